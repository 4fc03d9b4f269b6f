import Crypto
import Foundation
import HeraldCore
import _CryptoExtras

/// Compact JWS signing for the provider credentials Herald holds: ES256 (APNs provider tokens,
/// VAPID) and RS256 (Google service-account assertions).
///
/// Header and claims are given as JSON objects and serialised with sorted keys, so a token is
/// reproducible for a given clock. Keys are parsed once by the caller and reused.
///
/// Kept by hand rather than through jwt-kit on purpose: the keys and signatures are swift-crypto's
/// (nothing cryptographic is written here, only the JWS framing), and jwt-kit signs only through
/// an `async` key collection, which would make the APNs token cache and the VAPID authorizer
/// re-entrant actors that can mint two tokens at once. APNs answers a second token within 20
/// minutes with `TooManyProviderTokenUpdates`; one mint per key at a time is the point of those
/// caches.
package enum JWT {
    package enum SigningKey: Sendable {
        case es256(P256.Signing.PrivateKey)
        case rs256(_RSA.Signing.PrivateKey)

        var algorithm: String {
            switch self {
            case .es256: "ES256"
            case .rs256: "RS256"
            }
        }
    }

    package struct KeyError: Error, CustomStringConvertible {
        package var description: String
    }

    /// Parses a PEM private key (PKCS#8 `BEGIN PRIVATE KEY`, SEC1 `BEGIN EC PRIVATE KEY` or
    /// `BEGIN RSA PRIVATE KEY`). The error names the problem, never the key's bytes.
    package static func es256Key(pem: Secret) throws -> SigningKey {
        do {
            return .es256(try P256.Signing.PrivateKey(pemRepresentation: pem.reveal()))
        } catch {
            throw KeyError(description: "not a PEM-encoded P-256 private key")
        }
    }

    package static func rs256Key(pem: Secret) throws -> SigningKey {
        do {
            return .rs256(try _RSA.Signing.PrivateKey(pemRepresentation: pem.reveal()))
        } catch {
            throw KeyError(description: "not a PEM-encoded RSA private key")
        }
    }

    /// Signs `claims` with `key`; `header` gets `alg` (and `typ: JWT`) added.
    package static func sign(header: [String: String] = [:], claims: [String: Any], key: SigningKey) throws -> String {
        var header: [String: Any] = header
        header["alg"] = key.algorithm
        header["typ"] = "JWT"
        let headerData = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        let claimsData = try JSONSerialization.data(
            withJSONObject: claims,
            options: [.sortedKeys, .withoutEscapingSlashes]
        )
        let signingInput = Base64URL.encode(headerData) + "." + Base64URL.encode(claimsData)
        let signature: Data
        switch key {
        case .es256(let privateKey):
            signature = try privateKey.signature(for: Data(signingInput.utf8)).rawRepresentation
        case .rs256(let privateKey):
            signature = try privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
                .rawRepresentation
        }
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The decoded parts of a compact JWS, for verifiers (the simulator) and tests.
    package struct Decoded: Sendable {
        package var header: [String: String]
        package var claimsJSON: Data
        package var signingInput: Data
        package var signature: Data

        package var claims: [String: Any] {
            (try? JSONSerialization.jsonObject(with: claimsJSON)) as? [String: Any] ?? [:]
        }
    }

    package static func decode(_ token: String) -> Decoded? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Base64URL.decode(String(parts[0])),
            let claimsData = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2])),
            let headerObject = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any]
        else { return nil }
        var header: [String: String] = [:]
        for (k, v) in headerObject { header[k] = "\(v)" }
        return Decoded(
            header: header,
            claimsJSON: claimsData,
            signingInput: Data("\(parts[0]).\(parts[1])".utf8),
            signature: signature
        )
    }

    package static func verifyES256(_ decoded: Decoded, publicKey: P256.Signing.PublicKey) -> Bool {
        guard decoded.header["alg"] == "ES256",
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: decoded.signature)
        else { return false }
        return publicKey.isValidSignature(signature, for: decoded.signingInput)
    }

    package static func verifyRS256(_ decoded: Decoded, publicKey: _RSA.Signing.PublicKey) -> Bool {
        guard decoded.header["alg"] == "RS256" else { return false }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: decoded.signature)
        return publicKey.isValidSignature(signature, for: decoded.signingInput, padding: .insecurePKCS1v1_5)
    }
}
