import Foundation
import HeraldCore

/// The fields of a Google service-account key file (`type: service_account`) that FCM needs.
package struct FCMServiceAccount: Sendable {
    /// The Firebase project messages are sent through (`project_id`).
    package var projectID: String
    /// The assertion's issuer (`client_email`).
    package var clientEmail: String
    /// The RSA private key (`private_key`, PEM); signs the OAuth assertion, never leaves the process.
    package var privateKeyPEM: Secret
    /// Where assertions are exchanged for access tokens (`token_uri`). Default
    /// `https://oauth2.googleapis.com/token` when the file has none; ``FCMConfiguration/tokenURL``
    /// overrides it.
    package var tokenURI: String
    /// The key's id (`private_key_id`), sent as the JWT `kid` when present.
    package var privateKeyID: String?

    package static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    package init(
        projectID: String,
        clientEmail: String,
        privateKeyPEM: Secret,
        tokenURI: String = Self.defaultTokenURI,
        privateKeyID: String? = nil
    ) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyPEM = privateKeyPEM
        self.tokenURI = tokenURI
        self.privateKeyID = privateKeyID
    }

    /// Parses a key file's JSON text. The error names the missing or malformed field, never the key.
    package static func parse(json: Secret) throws -> FCMServiceAccount {
        let object: [String: Any]
        do {
            guard let parsed = try JSONSerialization.jsonObject(with: Data(json.reveal().utf8)) as? [String: Any] else {
                throw ProviderConfigurationError("FCM service account is not a JSON object")
            }
            object = parsed
        } catch let error as ProviderConfigurationError {
            throw error
        } catch {
            throw ProviderConfigurationError("FCM service account is not valid JSON")
        }
        func field(_ name: String) throws -> String {
            guard let value = object[name] as? String, !value.isEmpty else {
                throw ProviderConfigurationError("FCM service account is missing \"\(name)\"")
            }
            return value
        }
        if let type = object["type"] as? String, type != "service_account" {
            throw ProviderConfigurationError("FCM service account has \"type\" other than \"service_account\"")
        }
        let tokenURI = (object["token_uri"] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? defaultTokenURI
        return FCMServiceAccount(
            projectID: try field("project_id"),
            clientEmail: try field("client_email"),
            privateKeyPEM: Secret(try field("private_key")),
            tokenURI: tokenURI,
            privateKeyID: object["private_key_id"] as? String
        )
    }
}

extension FCMServiceAccount: CustomStringConvertible {
    /// Names the project and account, never the key.
    package var description: String { "FCMServiceAccount(\(projectID), \(clientEmail))" }
}
