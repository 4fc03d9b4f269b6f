import HeraldCore

/// The simulated services `herald-simulator` and the test harness run, in routing order.
package enum StandardServices {
    package static func all() -> [any SimulatedService] {
        [
            APNsService(),
            WebPushService(),
            OAuthService(), FCMService(), ExpoService(),
            // A new provider adds its service here, from its own folder. The first match wins,
            // so keep path prefixes disjoint.
        ]
    }
}
