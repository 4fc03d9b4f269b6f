import HeraldCore

/// Where the Expo push service lives, how each app authenticates, and when receipts are read.
package struct ExpoConfiguration: Sendable {
    /// The Expo origin. Default `https://exp.host`; point it at the provider simulator in tests.
    package var baseURL: String
    /// Access tokens by Herald app id, for projects with enhanced push security. An app without
    /// one sends no `Authorization` header. Default empty.
    package var accessTokens: [String: Secret]
    /// How long after a send its receipt is first checked. Expo recommends 15 minutes and keeps
    /// receipts for 24 hours. Default 15 min.
    package var receiptDelay: Duration
    /// Send requests in flight at once per `send` call (Expo's SDK uses 6). Default 6, at least 1.
    package var maxConcurrentRequests: Int
    /// Request bodies of at least this many bytes are sent gzip-encoded. Default 1024 (as
    /// Expo's Node SDK); `Int.max` disables compression.
    package var gzipThreshold: Int

    package init(
        baseURL: String = "https://exp.host",
        accessTokens: [String: Secret] = [:],
        receiptDelay: Duration = .seconds(15 * 60),
        maxConcurrentRequests: Int = 6,
        gzipThreshold: Int = 1024
    ) {
        self.baseURL = baseURL
        self.accessTokens = accessTokens
        self.receiptDelay = receiptDelay
        self.maxConcurrentRequests = maxConcurrentRequests
        self.gzipThreshold = gzipThreshold
    }
}
