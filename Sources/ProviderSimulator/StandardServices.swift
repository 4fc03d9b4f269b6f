/// The simulated services `herald simulate` and the test harness run, in routing order.
package enum StandardServices {
    package static func all() -> [any SimulatedService] {
        [
            APNsService(),
            WebPushService(),
            OAuthService(), FCMService(), ExpoService(),
            // Other helpers append their services here, each in its own folder:
            // FCMService(), OAuthService(), ExpoService(), WebPushService(),
        ]
    }
}
