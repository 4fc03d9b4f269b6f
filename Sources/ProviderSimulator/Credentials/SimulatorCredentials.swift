import Crypto
import Foundation
import HeraldCore
import Providers
import _CryptoExtras

/// Credentials for the demo and benchmark: keys the simulator trusts, written where the worker
/// can load them. None of them is valid anywhere but the simulator.
///
/// ``generate(into:context:)`` writes into `directory`:
/// - `apns-key.p8` (PKCS#8 PEM, P-256) and `apns.json` (`teamID`, `keyID`, `topic`, `keyFile`);
/// - `fcm-service-account.json` (Google's service-account format, `token_uri` = `<baseURL>/token`);
/// - `vapid.json` (`publicKey`: base64url uncompressed point, `privateKey`: base64url 32 bytes, `subject`);
/// - `herald-providers.json`, which says where all of the above (and the simulator) are.
///
/// Existing files are reused and trusted again, so a restarted simulator keeps accepting the
/// worker's keys; delete the directory to get fresh ones.
package enum SimulatorCredentials {
    /// An APNs signing key (`.p8`) and what identifies it.
    package struct APNsKeyMaterial: Sendable {
        package var teamID: String
        package var keyID: String
        package var topic: String
        /// PKCS#8 PEM (`BEGIN PRIVATE KEY`), like the `.p8` Apple issues.
        package var privateKeyPEM: String
    }

    /// A Google service account with an RSA key.
    package struct ServiceAccountMaterial: Sendable {
        package var projectID: String
        package var clientEmail: String
        package var privateKeyID: String
        /// PKCS#8 PEM, as in Google's JSON key files.
        package var privateKeyPEM: String

        /// Google's service-account JSON with `token_uri` set to `tokenURI`.
        package func json(tokenURI: String) -> [String: String] {
            [
                "type": "service_account", "project_id": projectID, "private_key_id": privateKeyID,
                "private_key": privateKeyPEM, "client_email": clientEmail, "client_id": "100000000000000000000",
                "token_uri": tokenURI, "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            ]
        }
    }

    /// A VAPID (RFC 8292) key pair in the encodings Web Push libraries use.
    package struct VAPIDKeyMaterial: Sendable {
        /// Base64url of the 65-byte uncompressed P-256 point.
        package var publicKey: String
        /// Base64url of the 32-byte private scalar.
        package var privateKey: String
        package var subject: String
    }

    /// Makes an APNs key and trusts it in `keyring` for `topic`.
    package static func makeAPNsKey(
        teamID: String = "HERALDTEAM",
        keyID: String = randomIdentifier(),
        topic: String = "com.example.herald",
        trustIn keyring: SimulatorKeyring
    ) -> APNsKeyMaterial {
        let key = P256.Signing.PrivateKey()
        keyring.trustAPNsKey(
            .init(teamID: teamID, keyID: keyID, publicKey: key.publicKey, topics: [topic])
        )
        return APNsKeyMaterial(teamID: teamID, keyID: keyID, topic: topic, privateKeyPEM: key.pemRepresentation)
    }

    /// Makes a service account (RSA 2048) and trusts it in `keyring`.
    package static func makeServiceAccount(
        projectID: String = "herald-sim",
        trustIn keyring: SimulatorKeyring
    )
        throws -> ServiceAccountMaterial
    {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let email = "herald@\(projectID).iam.gserviceaccount.com"
        keyring.trustServiceAccount(.init(clientEmail: email, projectID: projectID, publicKey: key.publicKey))
        return ServiceAccountMaterial(
            projectID: projectID,
            clientEmail: email,
            privateKeyID: randomIdentifier(length: 40).lowercased(),
            privateKeyPEM: key.pkcs8PEMRepresentation
        )
    }

    /// Makes a VAPID key pair.
    package static func makeVAPIDKey(subject: String = "mailto:push@herald.invalid") -> VAPIDKeyMaterial {
        let key = P256.Signing.PrivateKey()
        return VAPIDKeyMaterial(
            publicKey: Base64URL.encode(key.publicKey.x963Representation),
            privateKey: Base64URL.encode(key.rawRepresentation),
            subject: subject
        )
    }

    /// Where ``generate(into:context:)`` put everything; also written as `herald-providers.json`.
    package struct Manifest: Sendable, Codable {
        package struct Simulator: Sendable, Codable {
            package var baseURL: String
            package var caFile: String
        }
        package struct APNs: Sendable, Codable {
            package var teamID: String
            package var keyID: String
            package var topic: String
            package var keyFile: String
            /// Both the production and sandbox URL of the adapter point here.
            package var baseURL: String
        }
        package struct FCM: Sendable, Codable {
            package var projectID: String
            package var serviceAccountFile: String
            package var baseURL: String
        }
        package struct WebPush: Sendable, Codable {
            package var vapidFile: String
            /// The VAPID private key alone (base64url), as `app.<id>.webpush.private_key_file` reads it.
            package var privateKeyFile: String
            package var publicKey: String
            package var subject: String
        }
        package struct Expo: Sendable, Codable {
            package var baseURL: String
        }
        package var simulator: Simulator
        package var apns: APNs
        package var fcm: FCM
        package var expo: Expo
        package var webpush: WebPush

        /// The `HERALD_*` settings that deliver every push provider of app `default` through this
        /// simulator (written as `herald.env`; tests start workers with them).
        package var heraldEnvironment: [(key: String, value: String)] {
            [
                ("HERALD_PROVIDERS_APNS", "live"), ("HERALD_PROVIDERS_FCM", "live"), ("HERALD_PROVIDERS_EXPO", "live"),
                ("HERALD_PROVIDERS_WEBPUSH", "live"), ("HERALD_APP_IDS", "default"),
                ("HERALD_APP_DEFAULT_APNS_TEAM_ID", apns.teamID), ("HERALD_APP_DEFAULT_APNS_KEY_ID", apns.keyID),
                ("HERALD_APP_DEFAULT_APNS_TOPIC", apns.topic),
                ("HERALD_APP_DEFAULT_APNS_PRIVATE_KEY_FILE", apns.keyFile),
                ("HERALD_APP_DEFAULT_FCM_SERVICE_ACCOUNT_FILE", fcm.serviceAccountFile),
                ("HERALD_APP_DEFAULT_WEBPUSH_SUBJECT", webpush.subject),
                ("HERALD_APP_DEFAULT_WEBPUSH_PUBLIC_KEY", webpush.publicKey),
                ("HERALD_APP_DEFAULT_WEBPUSH_PRIVATE_KEY_FILE", webpush.privateKeyFile),
                ("HERALD_ENDPOINTS_APNS_PRODUCTION", apns.baseURL), ("HERALD_ENDPOINTS_APNS_SANDBOX", apns.baseURL),
                ("HERALD_ENDPOINTS_FCM", fcm.baseURL), ("HERALD_ENDPOINTS_EXPO", expo.baseURL),
                ("HERALD_TLS_EXTRA_CA_FILES", simulator.caFile), ("HERALD_SIMULATOR_URL", simulator.baseURL),
            ]
        }
    }

    /// Writes (or reloads) the demo credentials into `directory` and trusts them in `context.keyring`.
    /// `context.baseURL` must be set (the simulator has started).
    @discardableResult
    package static func generate(
        into directory: String,
        context: SimulatorContext,
        caFile: String? = nil
    ) throws
        -> Manifest
    {
        let dir = URL(fileURLWithPath: directory)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        func path(_ name: String) -> URL { dir.appendingPathComponent(name) }
        func write(_ text: String, _ name: String, secret: Bool) throws {
            try Data(text.utf8).write(to: path(name), options: .atomic)
            if secret {
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path(name).path)
            }
        }
        func writeJSON(_ object: Any, _ name: String, secret: Bool) throws {
            let data = try JSONSerialization.data(
                withJSONObject: object,
                options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            )
            try write(String(decoding: data, as: UTF8.self) + "\n", name, secret: secret)
        }
        func readJSON(_ name: String) -> [String: String]? {
            guard let data = try? Data(contentsOf: path(name)) else { return nil }
            return (try? JSONSerialization.jsonObject(with: data)) as? [String: String]
        }
        let base = context.baseURL

        // APNs.
        let apns: APNsKeyMaterial
        if let info = readJSON("apns.json"), let teamID = info["teamID"], let keyID = info["keyID"],
            let topic = info["topic"], let pem = try? String(contentsOf: path("apns-key.p8"), encoding: .utf8),
            let key = try? P256.Signing.PrivateKey(pemRepresentation: pem)
        {
            context.keyring.trustAPNsKey(.init(teamID: teamID, keyID: keyID, publicKey: key.publicKey, topics: [topic]))
            apns = APNsKeyMaterial(teamID: teamID, keyID: keyID, topic: topic, privateKeyPEM: pem)
        } else {
            apns = makeAPNsKey(trustIn: context.keyring)
            try write(apns.privateKeyPEM, "apns-key.p8", secret: true)
            try writeJSON(
                ["teamID": apns.teamID, "keyID": apns.keyID, "topic": apns.topic, "keyFile": path("apns-key.p8").path],
                "apns.json",
                secret: false
            )
        }

        // FCM service account (token_uri follows the simulator's current address).
        let account: ServiceAccountMaterial
        if let info = readJSON("fcm-service-account.json"), let projectID = info["project_id"],
            let email = info["client_email"], let keyID = info["private_key_id"], let pem = info["private_key"],
            let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem)
        {
            context.keyring.trustServiceAccount(
                .init(clientEmail: email, projectID: projectID, publicKey: key.publicKey)
            )
            account = ServiceAccountMaterial(
                projectID: projectID,
                clientEmail: email,
                privateKeyID: keyID,
                privateKeyPEM: pem
            )
        } else {
            account = try makeServiceAccount(trustIn: context.keyring)
        }
        try writeJSON(account.json(tokenURI: base + "/token"), "fcm-service-account.json", secret: true)

        // VAPID.
        let vapid: VAPIDKeyMaterial
        if let info = readJSON("vapid.json"), let publicKey = info["publicKey"], let privateKey = info["privateKey"],
            let subject = info["subject"]
        {
            vapid = VAPIDKeyMaterial(publicKey: publicKey, privateKey: privateKey, subject: subject)
        } else {
            vapid = makeVAPIDKey()
            try writeJSON(
                ["publicKey": vapid.publicKey, "privateKey": vapid.privateKey, "subject": vapid.subject],
                "vapid.json",
                secret: true
            )
        }

        try write(vapid.privateKey, "vapid-private-key.txt", secret: true)

        let manifest = Manifest(
            simulator: .init(baseURL: base, caFile: caFile ?? path("ca.pem").path),
            apns: .init(
                teamID: apns.teamID,
                keyID: apns.keyID,
                topic: apns.topic,
                keyFile: path("apns-key.p8").path,
                baseURL: base
            ),
            fcm: .init(
                projectID: account.projectID,
                serviceAccountFile: path("fcm-service-account.json").path,
                baseURL: base
            ),
            expo: .init(baseURL: base),
            webpush: .init(
                vapidFile: path("vapid.json").path,
                privateKeyFile: path("vapid-private-key.txt").path,
                publicKey: vapid.publicKey,
                subject: vapid.subject
            )
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try write(
            String(decoding: try encoder.encode(manifest), as: UTF8.self) + "\n",
            "herald-providers.json",
            secret: false
        )
        let env = manifest.heraldEnvironment.map { "export \($0.key)='\($0.value)'\n" }.joined()
        try write(env, "herald.env", secret: false)
        return manifest
    }

    /// Ten uppercase letters and digits, the shape of Apple team and key ids.
    package static func randomIdentifier(length: Int = 10) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<length).map { _ in alphabet.randomElement()! })
    }
}
