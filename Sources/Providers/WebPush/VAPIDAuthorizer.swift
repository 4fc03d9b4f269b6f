import Crypto
import Foundation
import HeraldCore

/// Mints and caches the RFC 8292 `Authorization` header for one application server key.
///
/// One JWT per push-service origin (`aud`), valid 12 h (RFC 8292 caps `exp` at 24 h), reused
/// until ``refreshMargin`` before it expires. An actor because concurrent sends share the cache.
package actor VAPIDAuthorizer {
    /// How long a minted token is valid. 12 h, as the reference libraries use.
    package static let lifetime: TimeInterval = 12 * 3600
    /// A cached token is replaced once less than this remains. 10 min.
    package static let refreshMargin: TimeInterval = 10 * 60

    private let key: JWT.SigningKey
    private let publicKey: String
    private let subject: String
    private let now: @Sendable () -> Date
    private var cache: [String: (header: String, expires: Date)] = [:]

    package init(credentials: VAPIDCredentials, app: String = "default", now: @escaping @Sendable () -> Date) throws {
        self.key = .es256(try credentials.signingKey(app: app))
        self.publicKey = credentials.publicKey
        self.subject = credentials.subject.trimmingCharacters(in: .whitespaces)
        self.now = now
    }

    /// The header value for `origin` and whether it was minted by this call (false = from cache).
    package func authorization(origin: String) throws -> (value: String, fresh: Bool) {
        let now = self.now()
        if let cached = cache[origin], cached.expires.timeIntervalSince(now) > Self.refreshMargin {
            return (cached.header, false)
        }
        let expires = now.addingTimeInterval(Self.lifetime)
        let claims: [String: Any] = ["aud": origin, "exp": Int(expires.timeIntervalSince1970), "sub": subject]
        let token = try JWT.sign(claims: claims, key: key)
        let header = "vapid t=\(token), k=\(publicKey)"
        cache[origin] = (header, expires)
        return (header, true)
    }

    /// Drops the cached token for `origin` (the push service refused it).
    package func invalidate(origin: String) {
        cache[origin] = nil
    }

    /// The RFC 6454 ASCII serialisation of a URL's origin: `scheme://host[:port]`, default port omitted.
    package static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { return nil }
        let hostPart = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        if let port = url.port, !(scheme == "https" && port == 443) && !(scheme == "http" && port == 80) {
            return "\(scheme)://\(hostPart.lowercased()):\(port)"
        }
        return "\(scheme)://\(hostPart.lowercased())"
    }
}
