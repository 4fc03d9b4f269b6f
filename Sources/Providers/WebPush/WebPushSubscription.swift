import Crypto
import Foundation
import HeraldCore
import Synchronization

/// A browser push subscription as a request needs it: where its pushes go and its keys, decoded
/// and checked (the `p256dh` point on P-256, `auth` 16 bytes).
package struct WebPushSubscription: Sendable {
    package var target: WebPushProvider.Target
    /// The request path with its query, exactly as in the endpoint.
    package var path: String
    /// The 65 bytes of `p256dh`, which the key schedule reads as they are.
    package var p256dh: Data
    package var auth: Data
    package var publicKey: P256.KeyAgreement.PublicKey

    /// Why a device's subscription cannot be used.
    package enum Invalid: Error, Hashable {
        /// The endpoint is not an absolute `https` URL with a host.
        case endpoint
        /// `p256dh` or `auth` is missing or malformed.
        case keys
    }

    /// Parses a device's endpoint (`token`) and keys.
    package static func parse(endpoint: String, p256dh: String?, auth: String?) -> Result<Self, Invalid> {
        guard let (target, path) = WebPushProvider.target(of: endpoint) else { return .failure(.endpoint) }
        guard let point = p256dh.flatMap(Base64URL.decode), let secret = auth.flatMap(Base64URL.decode),
            secret.count == 16, let publicKey = try? WebPushCrypto.parsePublicKey(point)
        else { return .failure(.keys) }
        return .success(Self(target: target, path: path, p256dh: point, auth: secret, publicKey: publicKey))
    }
}

/// The subscriptions of recently sent-to devices, parsed once each: a device's next message skips
/// the endpoint parse, the two base64url decodes and the point check (about 8 µs of the 9 µs a
/// message spends on its subscription before it is encrypted).
///
/// Keyed by device id; an entry is used only while the device's endpoint and both keys are the
/// ones it was parsed from, so a re-registered subscription is parsed again. Invalid
/// subscriptions are not kept (their devices are disabled). Bounded: emptied whenever it reaches
/// ``capacity`` entries, which keeps it at a few hundred kilobytes whatever the fleet.
package final class WebPushSubscriptionCache: Sendable {
    private struct Entry {
        var endpoint: String
        var p256dh: String?
        var auth: String?
        var subscription: WebPushSubscription
    }

    /// Entries kept at most. Default 1,024.
    package let capacity: Int
    private let entries = Mutex<[Int64: Entry]>([:])

    package init(capacity: Int = 1024) {
        precondition(capacity >= 1, "a cache holds at least one subscription")
        self.capacity = capacity
    }

    /// The device's subscription, from the cache when its endpoint and keys are unchanged.
    package func subscription(of device: Device) -> Result<WebPushSubscription, WebPushSubscription.Invalid> {
        let cached = entries.withLock { $0[device.id] }
        if let cached, cached.endpoint == device.token, cached.p256dh == device.p256dh, cached.auth == device.auth {
            return .success(cached.subscription)
        }
        let parsed = WebPushSubscription.parse(endpoint: device.token, p256dh: device.p256dh, auth: device.auth)
        if case .success(let subscription) = parsed {
            let entry = Entry(
                endpoint: device.token,
                p256dh: device.p256dh,
                auth: device.auth,
                subscription: subscription
            )
            entries.withLock { entries in
                if entries.count >= capacity && entries[device.id] == nil { entries.removeAll(keepingCapacity: true) }
                entries[device.id] = entry
            }
        }
        return parsed
    }

    /// How many subscriptions are cached (tests).
    package var count: Int { entries.withLock { $0.count } }
}
