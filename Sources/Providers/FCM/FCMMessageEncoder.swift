import Foundation

/// Renders a ``PushMessage`` as an FCM HTTP v1 `SendMessageRequest` body.
package enum FCMMessageEncoder {
    /// FCM's limit for messages to a token: "4096 bytes … includes both the keys and the values".
    package static let maxPayloadBytes = 4096
    /// FCM's longest TTL: four weeks.
    package static let maxTTLSeconds = 2_419_200

    /// The size counted against ``maxPayloadBytes``: the whole `message` object as sent, every key
    /// and value of its notification, data and platform overrides (and the target).
    ///
    /// FCM documents the limit as "4096 bytes … includes both the keys and the values" without
    /// saying which parts count; counting everything that is sent is the reading under which a
    /// message Herald sends is never refused as too big.
    package static func payloadSize(message: [String: Any]) -> Int {
        (try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys, .withoutEscapingSlashes]))?.count
            ?? Int.max
    }

    /// `android.priority`: `HIGH` wakes the device at once (critical, high); `NORMAL` may wait for
    /// Doze, and is what a data-only (silent) message asks for.
    package static func androidPriority(_ priority: Priority, silent: Bool) -> String {
        !silent && priority <= .high ? "HIGH" : "NORMAL"
    }

    /// The `message` object: target, notification, data and the Android, APNs and Web Push overrides.
    package static func message(_ m: PushMessage, now: Date) -> [String: Any] {
        let ttl = max(0, min(maxTTLSeconds, Int((m.expiresAt - now.timeIntervalSince1970).rounded(.down))))

        var message: [String: Any] = ["token": m.device.token]
        // FCM `data` is a flat map of strings: each metadata key is an entry under its own name
        // (enqueue refuses metadata keys that collide with Herald's own or FCM's reserved ones).
        var data = m.data
        for (key, value) in m.metadata where data[key] == nil { data[key] = value }
        if !m.summarizedIDs.isEmpty { data["summarizedIds"] = m.summarizedIDs.map(String.init).joined(separator: ",") }
        if !data.isEmpty { message["data"] = data }
        if !m.silent {
            var notification: [String: Any] = ["title": m.title, "body": m.body]
            if let image = m.imageURL { notification["image"] = image }
            message["notification"] = notification
        }

        var android: [String: Any] = ["priority": androidPriority(m.priority, silent: m.silent), "ttl": "\(ttl)s"]
        // FCM throttles collapsible messages per device and keeps four collapse keys for an offline
        // one: a collapse key only when the job asked for collapsing; `tag` replaces on screen.
        if m.collapsible && !m.collapseID.isEmpty { android["collapse_key"] = m.collapseID }
        if !m.silent {
            var notification: [String: Any] = [:]
            if let channel = m.androidChannel { notification["channel_id"] = channel }
            if let sound = m.sound { notification["sound"] = sound }
            if !m.collapseID.isEmpty { notification["tag"] = m.collapseID }
            if !notification.isEmpty { android["notification"] = notification }
        }
        message["android"] = android

        // Data-only messages to iOS must use priority 5 (background).
        var apnsHeaders: [String: String] = [
            "apns-priority": String(APNsRequest.priority(m.priority, silent: m.silent)),
            "apns-expiration": String(Int(max(0, m.expiresAt))),
            "apns-push-type": m.silent ? "background" : "alert",
        ]
        if !m.collapseID.isEmpty { apnsHeaders["apns-collapse-id"] = m.collapseID }
        var aps: [String: Any] = [:]
        if m.silent {
            aps["content-available"] = 1
        } else {
            // FCM builds the APNs alert from `notification`; an `alert` here replaces it, so it is
            // sent only to carry a subtitle (repeating title and body costs bytes of the limit).
            if let subtitle = m.subtitle { aps["alert"] = ["title": m.title, "subtitle": subtitle, "body": m.body] }
            if let sound = m.sound { aps["sound"] = sound }
            if let badge = m.badge { aps["badge"] = badge }
            if let thread = m.threadID { aps["thread-id"] = thread }
            if let category = m.actionCategory { aps["category"] = category }
            if let level = m.interruptionLevel { aps["interruption-level"] = level }
            if m.imageURL != nil { aps["mutable-content"] = 1 }
        }
        message["apns"] = ["headers": apnsHeaders, "payload": ["aps": aps]]

        message["webpush"] = [
            "headers": ["TTL": String(ttl), "Urgency": WebPushProvider.urgency(m.priority, silent: m.silent)]
        ]
        return message
    }

    /// The request body, or nil when the message exceeds ``maxPayloadBytes``.
    static func requestBody(_ m: PushMessage, now: Date) -> [UInt8]? {
        let message = message(m, now: now)
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: ["message": message], options: [.sortedKeys, .withoutEscapingSlashes]),
            data.count - #"{"message":}"#.utf8.count <= maxPayloadBytes
        else { return nil }
        return Array(data)
    }
}
