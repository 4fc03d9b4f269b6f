import Foundation

/// A user's preferences document (`herald.preferences.preferences`, docs/policy.md) as sentences
/// an on-call engineer can read.
package enum PreferencesInWords {
    /// One sentence per rule that holds back notifications, or a sentence saying there is none.
    /// A document that is not a JSON object is reported as such (the policy then uses defaults).
    package static func describe(_ json: String?) -> [String] {
        guard let json else { return ["No preferences saved: every category is on, no quiet hours."] }
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            return ["The preferences document is not a JSON object; the defaults apply (everything on)."]
        }
        var lines: [String] = []
        if object["enabled"] as? Bool == false {
            lines.append("Notifications are switched off for this app (only mandatory categories are sent).")
        }
        if let toggles = object["eventToggles"] as? [String: Any] {
            let off = toggles.filter { $0.value as? Bool == false }.map(\.key).sorted()
            let on = toggles.filter { $0.value as? Bool == true }.map(\.key).sorted()
            if !off.isEmpty { lines.append("Turned off: \(off.joined(separator: ", ")).") }
            if !on.isEmpty { lines.append("Turned on explicitly: \(on.joined(separator: ", ")).") }
        }
        if let optIns = object["optIns"] as? [String], !optIns.isEmpty {
            lines.append("Opted in to: \(optIns.sorted().joined(separator: ", ")).")
        }
        let zone = object["timeZone"] as? String
        if let quiet = object["quietHours"] as? [String: Any], quiet["enabled"] as? Bool != false {
            let start = (quiet["start"] as? String) ?? (quiet["startHour"] as? NSNumber).map(\.intValue).map { String(format: "%02d:00", $0) }
            let end = (quiet["end"] as? String) ?? (quiet["endHour"] as? NSNumber).map(\.intValue).map { String(format: "%02d:00", $0) }
            if let start, let end {
                lines.append("Quiet hours \(start)–\(end) (\(zone ?? "the device's time zone, else UTC")).")
            }
        }
        if let muted = object["mutedUntil"] as? String {
            lines.append("Muted until \(muted).")
        }
        if let location = object["location"] as? [String: Any], let radius = (location["radiusKm"] as? NSNumber)?.doubleValue {
            lines.append("Only nearby notifications: within \(String(format: "%g", radius)) km.")
        }
        return lines.isEmpty ? ["Nothing is turned off: every category is on, no quiet hours."] : lines
    }
}
