import HeraldCore

/// Where FCM lives and which service account sends for each Herald app.
package struct FCMConfiguration: Sendable {
    /// The FCM HTTP v1 origin. Default `https://fcm.googleapis.com`; point it at the provider
    /// simulator in tests and demos.
    package var baseURL: String
    /// Overrides every account's `token_uri` (the OAuth token endpoint) when set. Default nil.
    package var tokenURL: String?
    /// Service accounts by Herald app id (`PushMessage.device.appID`). A message for an app
    /// missing here fails with `credentials_broken(app_not_configured)`.
    package var apps: [String: FCMServiceAccount]
    /// Requests in flight at once per `send` call. Default 32, at least 1.
    package var maxConcurrentRequests: Int

    package init(
        baseURL: String = "https://fcm.googleapis.com",
        tokenURL: String? = nil,
        apps: [String: FCMServiceAccount] = [:],
        maxConcurrentRequests: Int = 32
    ) {
        self.baseURL = baseURL
        self.tokenURL = tokenURL
        self.apps = apps
        self.maxConcurrentRequests = maxConcurrentRequests
    }
}
