import Crypto
import Foundation
import HeraldCore

/// One application server identity for Web Push (RFC 8292 VAPID).
///
/// The public key is what browsers got as `applicationServerKey` when they subscribed; a
/// subscription made with it only accepts pushes signed by the matching private key.
package struct VAPIDCredentials: Sendable {
    /// Contact for the push service operator: `mailto:ops@example.com` or an `https://` URL.
    /// Apple's push service rejects anything else (and `mailto:…@localhost`).
    package var subject: String
    /// The application server key: base64url of the 65-byte uncompressed P-256 point (87 chars).
    package var publicKey: String
    /// The signing key: base64url of the 32-byte P-256 scalar, or a PEM (PKCS#8 or SEC1).
    package var privateKey: Secret

    package init(subject: String, publicKey: String, privateKey: Secret) {
        self.subject = subject
        self.publicKey = publicKey
        self.privateKey = privateKey
    }

    /// Parses the keys and checks they belong together and that `subject` is usable.
    /// The error names the problem (and `app`), never key bytes.
    package func validate(app: String = "default") throws {
        _ = try signingKey(app: app)
    }

    /// The parsed signing key, after every check ``validate(app:)`` makes.
    package func signingKey(app: String = "default") throws -> P256.Signing.PrivateKey {
        let subject = self.subject.trimmingCharacters(in: .whitespaces)
        if subject.hasPrefix("mailto:") {
            guard subject.dropFirst("mailto:".count).contains("@") else {
                throw ProviderConfigurationError("webpush app \(app): VAPID subject mailto: needs an address")
            }
        } else if subject.hasPrefix("https:") {
            guard let url = URL(string: subject), url.scheme == "https", url.host?.isEmpty == false else {
                throw ProviderConfigurationError("webpush app \(app): VAPID subject is not a valid https URL")
            }
        } else {
            throw ProviderConfigurationError("webpush app \(app): VAPID subject must start with mailto: or https:")
        }

        let key: P256.Signing.PrivateKey
        let text = privateKey.reveal().trimmingCharacters(in: .whitespacesAndNewlines)
        if text.contains("-----BEGIN") {
            guard let parsed = try? P256.Signing.PrivateKey(pemRepresentation: text) else {
                throw ProviderConfigurationError("webpush app \(app): VAPID private key is not a P-256 PEM key")
            }
            key = parsed
        } else {
            guard let raw = Base64URL.decode(text), raw.count == 32,
                let parsed = try? P256.Signing.PrivateKey(rawRepresentation: raw)
            else {
                throw ProviderConfigurationError(
                    "webpush app \(app): VAPID private key must be a base64url 32-byte P-256 scalar or PEM"
                )
            }
            key = parsed
        }

        guard let publicBytes = Base64URL.decode(publicKey), publicBytes.count == 65, publicBytes.first == 0x04 else {
            throw ProviderConfigurationError(
                "webpush app \(app): VAPID public key must be a base64url 65-byte uncompressed P-256 point"
            )
        }
        guard key.publicKey.x963Representation == publicBytes else {
            throw ProviderConfigurationError("webpush app \(app): VAPID public key does not match the private key")
        }
        return key
    }
}
