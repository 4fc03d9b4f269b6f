import Foundation
import HeraldCore

/// Maps an APNs answer to a ``DeliveryOutcome``.
///
/// Reasons are a closed snake_case vocabulary, one per Apple reason string; an unknown reason
/// falls back to a per-status reason, never to the provider's text.
enum APNsResponse {
    /// Apple reason → (disposition, Herald reason), for everything except 410 `Unregistered`.
    static let table: [String: (DeliveryOutcome.Disposition, DeliveryOutcome.Reason)] = [
        // 400: the request itself is wrong; retrying it as-is cannot help.
        "BadCollapseId": (.payloadRejected, .badCollapseID),
        "BadExpirationDate": (.payloadRejected, .badExpirationDate),
        "BadMessageId": (.payloadRejected, .badMessageID),
        "BadPriority": (.payloadRejected, .badPriority),
        "BadTopic": (.payloadRejected, .badTopic),
        "DuplicateHeaders": (.payloadRejected, .duplicateHeaders),
        "InvalidPushType": (.payloadRejected, .invalidPushType),
        "MissingDeviceToken": (.payloadRejected, .missingDeviceToken),
        "MissingTopic": (.payloadRejected, .missingTopic),
        "PayloadEmpty": (.payloadRejected, .payloadEmpty),
        "BadPayload": (.payloadRejected, .badPayload),
        "BadPath": (.payloadRejected, .badPath),
        "MethodNotAllowed": (.payloadRejected, .methodNotAllowed),
        "PayloadTooLarge": (.payloadRejected, .payloadTooLarge),
        // The token is dead for this app. A sandbox token sent to production also answers
        // BadDeviceToken; Herald keys the environment per device, so it is treated as dead.
        "BadDeviceToken": (.tokenInvalid, .badDeviceToken),
        "DeviceTokenNotForTopic": (.tokenInvalid, .deviceTokenNotForTopic),
        "ExpiredToken": (.tokenInvalid, .expiredToken),
        // Our key, certificate or topic is not accepted: alert operators, retry later.
        "TopicDisallowed": (.credentialsBroken, .topicDisallowed),
        "BadCertificate": (.credentialsBroken, .badCertificate),
        "BadCertificateEnvironment": (.credentialsBroken, .badCertificateEnvironment),
        "Forbidden": (.credentialsBroken, .forbidden),
        "InvalidProviderToken": (.credentialsBroken, .invalidProviderToken),
        "MissingProviderToken": (.credentialsBroken, .missingProviderToken),
        "BadEnvironmentKeyIdInToken": (.credentialsBroken, .badEnvironmentKeyIDInToken),
        "BadEnvironmentKeyInToken": (.credentialsBroken, .badEnvironmentKeyIDInToken),
        // Still stale after one re-mint: our clock is probably wrong.
        "ExpiredProviderToken": (.credentialsBroken, .expiredProviderToken),
        // Transient: retry later (on a new connection for the connection-level ones).
        "UnrelatedKeyIdInToken": (.retry, .unrelatedKeyIDInToken),
        "IdleTimeout": (.retry, .idleTimeout),
        "TooManyRequests": (.retry, .rateLimited),
        "TooManyProviderTokenUpdates": (.retry, .tooManyProviderTokenUpdates),
        "InternalServerError": (.retry, .internalError),
        "ServiceUnavailable": (.retry, .unavailable),
        "Shutdown": (.retry, .shutdown),
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
        status: Int,
        reason: String?,
        timestamp: Double?,
        registeredAt: Double
    ) -> (DeliveryOutcome.Disposition, DeliveryOutcome.Reason) {
        if status == 410, reason == "Unregistered" || reason == nil {
            if let timestamp, timestamp / 1000 <= registeredAt { return (.payloadRejected, .unregisteredStale) }
            return (.tokenInvalid, .unregistered)
        }
        if let reason, let known = table[reason] { return known }
        switch status {
        case 403: return (.credentialsBroken, .forbidden)
        case 410: return (.tokenInvalid, .expiredToken)
        case 413: return (.payloadRejected, .payloadTooLarge)
        case 429: return (.retry, .rateLimited)
        case 500: return (.retry, .internalError)
        case 500...: return (.retry, .unavailable)
        default: return (.payloadRejected, .badRequest)
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
