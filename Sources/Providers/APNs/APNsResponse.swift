import Foundation
import HeraldCore

/// Maps an APNs answer to a ``DeliveryOutcome``.
///
/// Reasons are a closed snake_case vocabulary, one per Apple reason string; an unknown reason
/// falls back to a per-status reason, never to the provider's text.
enum APNsResponse {
    /// Apple reason → (disposition, Herald reason), for everything except 410 `Unregistered`.
    static let table: [String: (DeliveryOutcome.Disposition, String)] = [
        // 400: the request itself is wrong; retrying it as-is cannot help.
        "BadCollapseId": (.payloadRejected, "bad_collapse_id"),
        "BadExpirationDate": (.payloadRejected, "bad_expiration_date"),
        "BadMessageId": (.payloadRejected, "bad_message_id"),
        "BadPriority": (.payloadRejected, "bad_priority"),
        "BadTopic": (.payloadRejected, "bad_topic"),
        "DuplicateHeaders": (.payloadRejected, "duplicate_headers"),
        "InvalidPushType": (.payloadRejected, "invalid_push_type"),
        "MissingDeviceToken": (.payloadRejected, "missing_device_token"),
        "MissingTopic": (.payloadRejected, "missing_topic"),
        "PayloadEmpty": (.payloadRejected, "payload_empty"),
        "BadPayload": (.payloadRejected, "bad_payload"),
        "BadPath": (.payloadRejected, "bad_path"),
        "MethodNotAllowed": (.payloadRejected, "method_not_allowed"),
        "PayloadTooLarge": (.payloadRejected, "payload_too_large"),
        // The token is dead for this app. A sandbox token sent to production also answers
        // BadDeviceToken; Herald keys the environment per device, so it is treated as dead.
        "BadDeviceToken": (.tokenInvalid, "bad_device_token"),
        "DeviceTokenNotForTopic": (.tokenInvalid, "device_token_not_for_topic"),
        "ExpiredToken": (.tokenInvalid, "expired_token"),
        // Our key, certificate or topic is not accepted: alert operators, retry later.
        "TopicDisallowed": (.credentialsBroken, "topic_disallowed"),
        "BadCertificate": (.credentialsBroken, "bad_certificate"),
        "BadCertificateEnvironment": (.credentialsBroken, "bad_certificate_environment"),
        "Forbidden": (.credentialsBroken, "forbidden"),
        "InvalidProviderToken": (.credentialsBroken, "invalid_provider_token"),
        "MissingProviderToken": (.credentialsBroken, "missing_provider_token"),
        "BadEnvironmentKeyIdInToken": (.credentialsBroken, "bad_environment_key_id_in_token"),
        "BadEnvironmentKeyInToken": (.credentialsBroken, "bad_environment_key_id_in_token"),
        // Still stale after one re-mint: our clock is probably wrong.
        "ExpiredProviderToken": (.credentialsBroken, "expired_provider_token"),
        // Transient: retry later (on a new connection for the connection-level ones).
        "UnrelatedKeyIdInToken": (.retry, "unrelated_key_id_in_token"),
        "IdleTimeout": (.retry, "idle_timeout"),
        "TooManyRequests": (.retry, "rate_limited"),
        "TooManyProviderTokenUpdates": (.retry, "too_many_provider_token_updates"),
        "InternalServerError": (.retry, "internal_error"),
        "ServiceUnavailable": (.retry, "unavailable"),
        "Shutdown": (.retry, "shutdown"),
    ]

    /// Classifies a non-200 answer.
    ///
    /// - Important: 410 `Unregistered` disables the device only when APNs saw the token die
    ///   (`timestamp`, ms) *after* the device last registered (`registeredAt`, s). An app that
    ///   re-registers the same token after reinstalling gets that token working again, while
    ///   APNs may still answer 410 (it delays 410s on purpose); disabling the fresh registration
    ///   would silence a live device. Such a stale 410 drops only the message
    ///   (`payload_rejected(unregistered_stale)`). A 410 without a timestamp disables the device.
    static func classify(
        status: Int, reason: String?, timestamp: Double?, registeredAt: Double
    ) -> (DeliveryOutcome.Disposition, String) {
        if status == 410, reason == "Unregistered" || reason == nil {
            if let timestamp, timestamp / 1000 <= registeredAt { return (.payloadRejected, "unregistered_stale") }
            return (.tokenInvalid, "unregistered")
        }
        if let reason, let known = table[reason] { return known }
        switch status {
        case 403: return (.credentialsBroken, "forbidden")
        case 410: return (.tokenInvalid, "expired_token")
        case 413: return (.payloadRejected, "payload_too_large")
        case 429: return (.retry, "rate_limited")
        case 500: return (.retry, "internal_error")
        case 500...: return (.retry, "unavailable")
        default: return (.payloadRejected, "bad_request")
        }
    }

    /// `reason` and `timestamp` from an APNs error body (`{"reason": …, "timestamp": ms}`).
    static func parseBody(_ bytes: [UInt8]) -> (reason: String?, timestamp: Double?) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            return (nil, nil)
        }
        let raw = object["timestamp"]
        let timestamp: Double? = (raw as? NSNumber)?.doubleValue ?? (raw as? String).flatMap { Double($0) }
        return (object["reason"] as? String, timestamp)
    }
}
