import HeraldCore

/// One app's APNs token-authentication credentials (a `.p8` signing key).
package struct APNsCredentials: Sendable {
    /// 10-character Apple Developer Team ID (JWT `iss`).
    package var teamID: String
    /// 10-character key id of the `.p8` key (JWT header `kid`).
    package var keyID: String
    /// The `.p8` key as PEM (PKCS#8 P-256). Never logged.
    package var privateKeyPEM: Secret
    /// The app's bundle id, sent as `apns-topic`.
    package var topic: String

    package init(teamID: String, keyID: String, privateKeyPEM: Secret, topic: String) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyPEM = privateKeyPEM
        self.topic = topic
    }
}

/// Where APNs lives and which credentials each Herald app uses.
package struct APNsConfiguration: Sendable {
    /// Base URL for devices whose environment is `production`. Default `https://api.push.apple.com`;
    /// point it at the provider simulator for demos and tests.
    package var productionURL = "https://api.push.apple.com"
    /// Base URL for devices whose environment is `sandbox` (or `development`).
    /// Default `https://api.sandbox.push.apple.com`.
    package var sandboxURL = "https://api.sandbox.push.apple.com"
    /// Credentials by Herald app id (`Device.appID`). A message for an app not listed here gets
    /// `credentials_broken(app_not_configured)`. Default empty.
    package var apps: [String: APNsCredentials] = [:]
    /// Age after which the provider JWT is re-minted. Apple wants a refresh no more often than
    /// every 20 minutes and rejects tokens older than 60; default 40 minutes sits in the middle.
    package var tokenLifetime: Duration = .seconds(40 * 60)
    /// Messages of one `send` call in flight at once (HTTP/2 streams across the pooled
    /// connections). Default 64: with 4 batches in flight that is 256 streams, enough to keep the
    /// connection busy, and each stream in flight holds buffers (256 per batch peaked at 77 MiB RSS,
    /// 64 at 64 MiB, same throughput; `make bench-worker`).
    package var maxConcurrentRequests = 64

    package init(
        apps: [String: APNsCredentials] = [:],
        productionURL: String = "https://api.push.apple.com",
        sandboxURL: String = "https://api.sandbox.push.apple.com",
        tokenLifetime: Duration = .seconds(40 * 60)
    ) {
        self.apps = apps
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.tokenLifetime = tokenLifetime
    }
}
