import Foundation

/// One push target of a user, as registered with `herald.register_device`.
package struct Device: Sendable, Hashable {
    package var id: Int64
    package var userID: String
    package var provider: ProviderKind
    /// The provider token. Secret-ish: never logged; use ``tokenHash`` in logs.
    package var token: String
    package var appID: String
    /// `sandbox` or `production` (APNs host selection).
    package var environment: String
    /// Web Push subscription keys (base64url).
    package var p256dh: String?
    package var auth: String?
    package var locale: String?
    package var timeZone: String?
    /// Device attributes as JSON text, e.g. `{"bluetooth": true}`.
    package var attributesJSON: String
    /// The latest registration (APNs 410 timestamps are compared to it).
    package var registeredAt: Date

    package init(
        id: Int64,
        userID: String,
        provider: ProviderKind,
        token: String,
        appID: String = "default",
        environment: String = "production",
        p256dh: String? = nil,
        auth: String? = nil,
        locale: String? = nil,
        timeZone: String? = nil,
        attributesJSON: String = "{}",
        registeredAt: Date = Date(timeIntervalSince1970: 0)
    ) {
        self.id = id
        self.userID = userID
        self.provider = provider
        self.token = token
        self.appID = appID
        self.environment = environment
        self.p256dh = p256dh
        self.auth = auth
        self.locale = locale
        self.timeZone = timeZone
        self.attributesJSON = attributesJSON
        self.registeredAt = registeredAt
    }

    /// A short, stable, non-reversible tag for logs: FNV-1a of the token, 8 hex digits.
    package var tokenHash: String { Self.tokenHash(of: token) }

    /// ``tokenHash`` of any token (the console shows devices by it).
    package static func tokenHash(of token: String) -> String {
        var hash: UInt32 = 2_166_136_261
        for byte in token.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}

extension Device: CustomStringConvertible {
    /// Never includes the token.
    package var description: String { "Device(\(id), \(provider.rawValue), token#\(tokenHash))" }
}
