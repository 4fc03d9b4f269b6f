import Crypto
import Foundation
import HeraldCore
import NIOHPACK

/// Renders a ``PushMessage`` as an APNs request: headers and JSON payload.
enum APNsRequest {
    /// Apple's payload limit for alert and background pushes, in bytes.
    static let maximumPayloadSize = 4096
    /// Apple's `apns-collapse-id` limit, in bytes.
    static let maximumCollapseIDSize = 64
    static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]

    /// The JSON body: `aps` plus the message's data keys at the top level (Apple ignores custom
    /// keys inside `aps`), `metadata` as an object, a summary's `summarizedIds` as an array. A silent message carries only
    /// `content-available` in `aps`.
    static func payload(for message: PushMessage) throws -> [UInt8] {
        var json = JSONWriter()
        json.beginObject()
        // Data keys first (sorted, so a payload is reproducible), then `aps`.
        var custom = message.data.filter { $0.key != "aps" }
        if let route = message.route, custom["route"] == nil { custom["route"] = route }
        if let imageURL = message.imageURL, custom["imageURL"] == nil { custom["imageURL"] = imageURL }
        for key in custom.keys.sorted() { json.string(key, custom[key]!) }
        if !message.metadata.isEmpty, custom["metadata"] == nil {
            json.beginObject("metadata")
            for key in message.metadata.keys.sorted() { json.string(key, message.metadata[key]!) }
            json.endObject()
        }
        if !message.summarizedIDs.isEmpty { json.integers("summarizedIds", message.summarizedIDs) }
        json.beginObject("aps")
        if message.silent {
            json.int("content-available", 1)
        } else {
            json.beginObject("alert")
            json.string("title", message.title)
            if let subtitle = message.subtitle { json.string("subtitle", subtitle) }
            json.string("body", message.body)
            json.endObject()
            if let badge = message.badge { json.int("badge", badge) }
            let level = message.interruptionLevel.flatMap { interruptionLevels.contains($0) ? $0 : nil }
            if level == "critical" {
                json.beginObject("sound")
                json.int("critical", 1)
                json.string("name", message.sound ?? "default")
                json.double("volume", 1.0)
                json.endObject()
            } else if let sound = message.sound {
                json.string("sound", sound)
            }
            if let category = message.actionCategory { json.string("category", category) }
            if let threadID = message.threadID { json.string("thread-id", threadID) }
            if let level { json.string("interruption-level", level) }
            json.double("relevance-score", relevanceScore(message.priority))
            if message.imageURL != nil { json.int("mutable-content", 1) }
        }
        json.endObject()
        json.endObject()
        return json.bytes
    }

    /// Summary ordering (`relevance-score`, 0…1) from Herald's priority: critical 1.0, high 0.75,
    /// normal 0.5, low 0.25.
    static func relevanceScore(_ priority: Priority) -> Double {
        switch priority {
        case .critical: 1.0
        case .high: 0.75
        case .normal: 0.5
        case .low: 0.25
        }
    }

    /// `apns-priority`: 10 sends at once, 5 lets the device deliver with power considerations.
    /// Apple requires 5 for background (silent) pushes; alerts get 10 only when the user must see
    /// them now (critical, high).
    package static func priority(_ priority: Priority, silent: Bool) -> Int {
        silent || priority > .high ? 5 : 10
    }

    /// Every header but `authorization`. Values that change per message (id, expiration,
    /// collapse id) stay out of the HPACK dynamic table, which then holds only the shared ones (a
    /// table full of collapse ids made every header's lookup a scan of sixty entries).
    static func headers(for message: PushMessage, topic: String) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(8)
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "apns-push-type", value: message.silent ? "background" : "alert")
        headers.add(name: "apns-priority", value: priority(message.priority, silent: message.silent) == 10 ? "10" : "5")
        headers.add(
            name: "apns-expiration",
            value: String(max(0, Int64(message.expiresAt.timeIntervalSince1970.rounded(.down)))),
            indexing: .nonIndexable
        )
        headers.add(name: "apns-topic", value: topic)
        headers.add(name: "apns-id", value: apnsID(for: message), indexing: .nonIndexable)
        let collapseID = truncatedCollapseID(message.collapseID)
        if !collapseID.isEmpty { headers.add(name: "apns-collapse-id", value: collapseID, indexing: .nonIndexable) }
        return headers
    }

    /// `text` cut to at most 64 UTF-8 bytes without splitting a character, without control
    /// characters (an HTTP field value cannot carry them; the HTTP/2 client does not re-check).
    static func truncatedCollapseID(_ text: String) -> String {
        var result = ""
        var size = 0
        for character in text {
            if character.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { continue }
            let length = character.utf8.count
            if size + length > maximumCollapseIDSize { break }
            result.append(character)
            size += length
        }
        return result
    }

    /// A UUID derived from the job and device, so a retried delivery carries the same `apns-id`
    /// (lowercase 8-4-4-4-12, version and variant bits set as for a name-based UUID).
    static func apnsID(for message: PushMessage) -> String {
        var hasher = SHA256()
        hasher.update(data: Array("herald:\(message.jobID):\(message.device.id)".utf8))
        var bytes = Array(hasher.finalize().prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        // 8-4-4-4-12, written in one pass (this runs once per message on the send path).
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(36)
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The device token as a path segment: APNs tokens are hex, sent as they are; anything else
    /// is percent-encoded (APNs will call it a bad token).
    static func pathSegment(_ token: String) -> String {
        if !token.isEmpty,
            token.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) })
        {
            return token
        }
        return token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
    }
}
