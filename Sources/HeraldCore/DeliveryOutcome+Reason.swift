/// Why a provider (or the worker, for a message it did not send) answered as it did, for one
/// message. A closed vocabulary: each case's raw value is stable, stored in
/// `herald.delivery_log.reason`, shown by `herald explain`, and used as a metric label; no
/// provider text (which may carry a token or URL) ever becomes a reason.
extension DeliveryOutcome {
    package enum Reason: String, Sendable, Hashable, CaseIterable {
        // MARK: Shared by the adapters
        /// The provider took the message.
        case ok
        /// No answer in time.
        case timeout
        /// The connection closed before an answer (the message may be sent again at once).
        case connectionClosed = "connection_closed"
        /// The connection failed (TLS, reset, refused, an oversized answer).
        case connectionError = "connection_error"
        /// The worker stopped waiting (shutdown).
        case cancelled
        /// The provider said to slow down (429).
        case rateLimited = "rate_limited"
        /// A 5xx answer.
        case serverError = "server_error"
        /// The provider said it is unavailable (503, `UNAVAILABLE`).
        case unavailable
        /// A 400 the adapter cannot name more precisely.
        case badRequest = "bad_request"
        /// An answer the adapter could not read.
        case badResponse = "bad_response"
        /// An HTTP status the provider does not document.
        case unexpectedStatus = "unexpected_status"
        /// Over the provider's payload limit, found before or by the provider.
        case payloadTooLarge = "payload_too_large"
        /// The token is dead (APNs `Unregistered`, FCM `UNREGISTERED`).
        case unregistered
        /// The job's app has no credentials for this provider.
        case appNotConfigured = "app_not_configured"
        /// The adapter returned no outcome for this message: retried.
        case noOutcome = "no_outcome"

        // MARK: The worker's own, for messages not sent
        /// No adapter is configured for the device's provider.
        case providerNotConfigured = "provider_not_configured"
        /// The provider's circuit is open: handed back unsent.
        case circuitOpen = "circuit_open"
        /// The circuit's probe request failed: the circuit stays open.
        case probeFailed = "probe_failed"
        /// Held back by the provider's configured request rate.
        case paced
        /// The app's credential was refused recently: paused, not sent.
        case credentialPaused = "credential_paused"
        /// Not sent: an earlier job of the same batch is retried on the same device (per-device order).
        case behindRetry = "behind_retry"
        /// Not sent: the device's token was refused earlier in the same batch.
        case tokenRefusedInBatch = "token_refused_in_batch"

        // MARK: APNs (Apple's reason strings, snake_case)
        /// The provider refused our credentials (403).
        case forbidden
        /// A 410 older than the device's registration: the message is dropped, the device stays.
        case unregisteredStale = "unregistered_stale"
        case badCollapseID = "bad_collapse_id"
        case badExpirationDate = "bad_expiration_date"
        case badMessageID = "bad_message_id"
        case badPriority = "bad_priority"
        case badTopic = "bad_topic"
        case duplicateHeaders = "duplicate_headers"
        case invalidPushType = "invalid_push_type"
        case missingDeviceToken = "missing_device_token"
        case missingTopic = "missing_topic"
        case payloadEmpty = "payload_empty"
        case badPayload = "bad_payload"
        case badPath = "bad_path"
        case methodNotAllowed = "method_not_allowed"
        case badDeviceToken = "bad_device_token"
        case deviceTokenNotForTopic = "device_token_not_for_topic"
        case expiredToken = "expired_token"
        case topicDisallowed = "topic_disallowed"
        case badCertificate = "bad_certificate"
        case badCertificateEnvironment = "bad_certificate_environment"
        case invalidProviderToken = "invalid_provider_token"
        case missingProviderToken = "missing_provider_token"
        case badEnvironmentKeyIDInToken = "bad_environment_key_id_in_token"
        case expiredProviderToken = "expired_provider_token"
        case unrelatedKeyIDInToken = "unrelated_key_id_in_token"
        case idleTimeout = "idle_timeout"
        case tooManyProviderTokenUpdates = "too_many_provider_token_updates"
        case internalError = "internal_error"
        case shutdown
        /// The provider token (ES256 JWT) could not be signed.
        case jwtSigningFailed = "jwt_signing_failed"

        // MARK: FCM (the v1 API's error codes, and the OAuth token exchange)
        case senderIDMismatch = "sender_id_mismatch"
        case `internal`
        case thirdPartyAuthError = "third_party_auth_error"
        case unspecifiedError = "unspecified_error"
        case projectNotFound = "project_not_found"
        case unauthenticated
        case permissionDenied = "permission_denied"
        /// `INVALID_ARGUMENT` naming the token.
        case invalidRegistration = "invalid_registration"
        case invalidArgument = "invalid_argument"
        case quotaExceeded = "quota_exceeded"
        /// The service account's JWT assertion could not be signed.
        case assertionSigningFailed = "assertion_signing_failed"
        /// The OAuth token endpoint is unavailable.
        case tokenUnavailable = "token_unavailable"
        case invalidGrant = "invalid_grant"
        case invalidClient = "invalid_client"
        /// The OAuth token endpoint refused the assertion.
        case tokenRejected = "token_rejected"
        /// The OAuth token endpoint's answer could not be read.
        case tokenBadResponse = "token_bad_response"
        /// The OAuth token request timed out.
        case tokenTimeout = "token_timeout"
        /// The OAuth token request's connection closed.
        case tokenConnectionClosed = "token_connection_closed"
        /// The OAuth token request's connection failed.
        case tokenConnectionError = "token_connection_error"
        /// The OAuth token request was cancelled.
        case tokenCancelled = "token_cancelled"

        // MARK: Expo (push tickets, receipts and request errors)
        /// The provider refused our credentials (401).
        case unauthorized
        case deviceNotRegistered = "device_not_registered"
        case messageTooBig = "message_too_big"
        case messageRateExceeded = "message_rate_exceeded"
        case invalidCredentials = "invalid_credentials"
        case mismatchSenderID = "mismatch_sender_id"
        case developerError = "developer_error"
        case expoError = "expo_error"
        case providerError = "provider_error"
        /// An error code Expo does not document.
        case unknownError = "unknown_error"
        /// Not an `ExponentPushToken[…]`: never sent.
        case invalidTokenFormat = "invalid_token_format"
        case tooManyExperienceIds = "too_many_experience_ids"
        case tooManyItems = "too_many_items"
        /// A `MessageRateExceeded` message whose own expiration passed before it could be resent.
        case expired
        case requestError = "request_error"
        /// Expo answered with a different number of tickets than messages.
        case ticketCountMismatch = "ticket_count_mismatch"

        // MARK: Web Push (RFC 8030 statuses, VAPID)
        case subscriptionNotFound = "subscription_not_found"
        case subscriptionGone = "subscription_gone"
        case vapidUnauthorized = "vapid_unauthorized"
        case vapidForbidden = "vapid_forbidden"
        case vapidSigningFailed = "vapid_signing_failed"
        /// The subscription's endpoint is not an https URL: the device is disabled.
        case invalidEndpoint = "invalid_endpoint"
        /// The subscription's `p256dh` or `auth` key is missing or malformed.
        case invalidSubscription = "invalid_subscription"

        // MARK: Local fallback and the development sink
        /// Written to `herald.local_notifications`.
        case recorded
        /// The local-fallback table could not be written.
        case storeUnavailable = "store_unavailable"
        case badCredentials = "bad_credentials"
    }
}

extension DeliveryOutcome.Reason {
    /// A transport failure of FCM's OAuth token request, told apart from one of the send itself.
    package var ofTokenRequest: Self {
        switch self {
        case .timeout: .tokenTimeout
        case .connectionClosed: .tokenConnectionClosed
        case .cancelled: .tokenCancelled
        default: .tokenConnectionError
        }
    }
}

extension DeliveryOutcome.Reason: CustomStringConvertible {
    /// The stored text, so a reason interpolated into a log line reads as it does everywhere else.
    package var description: String { rawValue }
}
