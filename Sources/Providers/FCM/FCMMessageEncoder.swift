import Foundation
import HeraldCore

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

    /// The request body `{"message": {…}}` — target, data, notification and the Android, APNs and
    /// Web Push overrides — or nil when the message exceeds ``maxPayloadBytes``. Written straight
    /// into bytes (``JSONWriter``), keys of maps sorted, so a body is reproducible.
    static func requestBody(_ m: PushMessage, now: Date) -> [UInt8]? {
        let ttl = max(0, min(maxTTLSeconds, Int(m.expiresAt.timeIntervalSince(now).rounded(.down))))
        var json = JSONWriter(capacity: 1024)
        json.beginObject()
        json.beginObject("message")
        json.string("token", m.device.token)
        // FCM `data` is a flat map of strings: each metadata key is an entry under its own name
        // (enqueue refuses metadata keys that collide with Herald's own or FCM's reserved ones).
        var data = m.data
        for (key, value) in m.metadata where data[key] == nil { data[key] = value }
        if !m.summarizedIDs.isEmpty { data["summarizedIds"] = m.summarizedIDs.map(String.init).joined(separator: ",") }
        if !data.isEmpty {
            json.beginObject("data")
            for key in data.keys.sorted() { json.string(key, data[key]!) }
            json.endObject()
        }
        if !m.silent {
            json.beginObject("notification")
            json.string("title", m.title)
            json.string("body", m.body)
            if let image = m.imageURL { json.string("image", image) }
            json.endObject()
        }

        json.beginObject("android")
        json.string("priority", androidPriority(m.priority, silent: m.silent))
        json.string("ttl", "\(ttl)s")
        // FCM throttles collapsible messages per device and keeps four collapse keys for an offline
        // one: a collapse key only when the job asked for collapsing; `tag` replaces on screen.
        if m.collapsible && !m.collapseID.isEmpty { json.string("collapse_key", m.collapseID) }
        if !m.silent, m.androidChannel != nil || m.sound != nil || !m.collapseID.isEmpty {
            json.beginObject("notification")
            if let channel = m.androidChannel { json.string("channel_id", channel) }
            if let sound = m.sound { json.string("sound", sound) }
            if !m.collapseID.isEmpty { json.string("tag", m.collapseID) }
            json.endObject()
        }
        json.endObject()

        json.beginObject("apns")
        json.beginObject("headers")
        // Data-only messages to iOS must use priority 5 (background).
        if !m.collapseID.isEmpty { json.string("apns-collapse-id", m.collapseID) }
        json.string("apns-expiration", String(Int(max(0, m.expiresAt.timeIntervalSince1970))))
        json.string("apns-priority", String(APNsRequest.priority(m.priority, silent: m.silent)))
        json.string("apns-push-type", m.silent ? "background" : "alert")
        json.endObject()
        json.beginObject("payload")
        json.beginObject("aps")
        if m.silent {
            json.int("content-available", 1)
        } else {
            // FCM builds the APNs alert from `notification`; an `alert` here replaces it, so it is
            // sent only to carry a subtitle (repeating title and body costs bytes of the limit).
            if let subtitle = m.subtitle {
                json.beginObject("alert")
                json.string("title", m.title)
                json.string("subtitle", subtitle)
                json.string("body", m.body)
                json.endObject()
            }
            if let sound = m.sound { json.string("sound", sound) }
            if let badge = m.badge { json.int("badge", badge) }
            if let thread = m.threadID { json.string("thread-id", thread) }
            if let category = m.actionCategory { json.string("category", category) }
            if let level = m.interruptionLevel { json.string("interruption-level", level) }
            if m.imageURL != nil { json.int("mutable-content", 1) }
        }
        json.endObject()
        json.endObject()
        json.endObject()

        json.beginObject("webpush")
        json.beginObject("headers")
        json.string("TTL", String(ttl))
        json.string("Urgency", WebPushProvider.urgency(m.priority, silent: m.silent))
        json.endObject()
        json.endObject()

        json.endObject()
        json.endObject()
        guard json.bytes.count - #"{"message":}"#.utf8.count <= maxPayloadBytes else { return nil }
        return json.bytes
    }
}
