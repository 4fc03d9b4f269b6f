import Foundation
import HeraldCore

/// Renders a ``PushMessage`` as an Expo push message and checks what Expo would refuse.
package enum ExpoMessageEncoder {
    /// Expo's limit for one message's payload.
    package static let maxPayloadBytes = 4096

    /// Whether `token` has Expo's push token shape: `ExponentPushToken[…]` or `ExpoPushToken[…]`.
    package static func isExpoPushToken(_ token: String) -> Bool {
        for prefix in ["ExponentPushToken[", "ExpoPushToken["] where token.hasPrefix(prefix) {
            let inner = token.utf8.dropFirst(prefix.utf8.count)
            guard inner.last == UInt8(ascii: "]") else { return false }
            let body = inner.dropLast()
            return !body.isEmpty && !body.contains { $0 <= 0x20 || $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") }
        }
        return false
    }

    /// The size Expo counts against ``maxPayloadBytes``: the message's JSON without `to`.
    ///
    /// The simulator applies the same rule, so the adapter refuses exactly what it would.
    package static func payloadSize(message: [String: Any]) -> Int {
        var copy = message
        copy["to"] = nil
        return (try? JSONSerialization.data(withJSONObject: copy, options: [.sortedKeys]))?.count ?? Int.max
    }

    /// Expo `priority`: `high` (critical, high), `default` (normal) or `normal` (low, and every
    /// silent message); Expo maps them to each platform's own priority.
    package static func priority(_ priority: Priority, silent: Bool) -> String {
        if silent { return "normal" }
        switch priority {
        case .critical, .high: return "high"
        case .normal: return "default"
        case .low: return "normal"
        }
    }

    /// The message's JSON text (`to`, notification fields, data, delivery options), or nil when
    /// its payload exceeds ``maxPayloadBytes``. Written straight into bytes (``JSONWriter``).
    ///
    /// Counted on the whole message as sent (with `to`): stricter than Expo's rule by the token's
    /// length, so nothing Herald sends is refused as `MessageTooBig`.
    static func encode(_ m: PushMessage) -> [UInt8]? {
        var json = JSONWriter(capacity: 768)
        json.beginObject()
        json.string("to", m.device.token)
        if !m.data.isEmpty || !m.metadata.isEmpty || !m.summarizedIDs.isEmpty {
            json.beginObject("data")
            for key in m.data.keys.sorted() { json.string(key, m.data[key]!) }
            if !m.metadata.isEmpty { json.strings("metadata", m.metadata) }
            if !m.summarizedIDs.isEmpty { json.integers("summarizedIds", m.summarizedIDs) }
            json.endObject()
        }
        if m.silent {
            json.bool("_contentAvailable", true)
        } else {
            json.string("title", m.title)
            json.string("body", m.body)
            if let subtitle = m.subtitle { json.string("subtitle", subtitle) }
            if let sound = m.sound { json.string("sound", sound) }
            if let badge = m.badge { json.int("badge", badge) }
            if let channel = m.androidChannel { json.string("channelId", channel) }
            if let category = m.actionCategory { json.string("categoryId", category) }
            if let level = m.interruptionLevel { json.string("interruptionLevel", level) }
            if let thread = m.threadID { json.string("threadId", thread) }
            // Replacement on screen (Android `tag`); collapsing (FCM collapse_key, apns-collapse-id)
            // only when the job asked for it, as FCM throttles collapsible messages.
            if !m.collapseID.isEmpty { json.string("tag", m.collapseID) }
            if let image = m.imageURL {
                json.beginObject("richContent")
                json.string("image", image)
                json.endObject()
                json.bool("mutableContent", true)
            }
        }
        if m.collapsible && !m.collapseID.isEmpty { json.string("collapseId", m.collapseID) }
        // Absolute expiry, so a resend from the receipt poller keeps the original deadline.
        json.int("expiration", Int(max(0, m.expiresAt.timeIntervalSince1970).rounded(.down)))
        json.string("priority", priority(m.priority, silent: m.silent))
        json.endObject()
        return json.bytes.count <= maxPayloadBytes ? json.bytes : nil
    }
}

/// Expo's ticket and receipt `details.error` codes, classified.
package enum ExpoErrorCode {
    /// The outcome of a ticket or receipt error; reasons are lowercase snake_case.
    package static func outcome(_ code: String?) -> DeliveryOutcome {
        switch code ?? "" {
        case "DeviceNotRegistered": DeliveryOutcome(.tokenInvalid, reason: .deviceNotRegistered)
        case "MessageTooBig": DeliveryOutcome(.payloadRejected, reason: .messageTooBig)
        case "MessageRateExceeded": DeliveryOutcome(.retry, reason: .messageRateExceeded)
        case "InvalidCredentials": DeliveryOutcome(.credentialsBroken, reason: .invalidCredentials)
        case "MismatchSenderId": DeliveryOutcome(.credentialsBroken, reason: .mismatchSenderID)
        case "DeveloperError": DeliveryOutcome(.payloadRejected, reason: .developerError)
        case "ExpoError": DeliveryOutcome(.retry, reason: .expoError)
        case "ProviderError": DeliveryOutcome(.retry, reason: .providerError)
        default: DeliveryOutcome(.retry, reason: .unknownError)
        }
    }
}
