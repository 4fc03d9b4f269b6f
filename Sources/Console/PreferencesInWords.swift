import Dispatcher
import Foundation
import HeraldCore

/// A user's preferences document (`herald.preferences.preferences`, docs/policy.md) as sentences
/// an on-call engineer can read.
///
/// It describes the document as the policy engine reads it (``Preferences``), so a field the
/// policy ignores (malformed, or a location without a position) is not described either.
package enum PreferencesInWords {
    /// One sentence per rule that holds back notifications, or a sentence saying there is none.
    /// A document that is not a JSON object is reported as such (the policy then uses defaults).
    package static func describe(_ json: String?) -> [String] {
        guard let json else { return ["No preferences saved: every category is on, no quiet hours."] }
        guard case .object = JSONValue(parsing: json) else {
            return ["The preferences document is not a JSON object; the defaults apply (everything on)."]
        }
        let p = Preferences(json: json)
        var lines: [String] = []
        if !p.enabled {
            lines.append("Notifications are switched off for this app (only mandatory categories are sent).")
        }
        let off = p.eventToggles.filter { !$0.value }.map(\.key).sorted()
        let on = p.eventToggles.filter(\.value).map(\.key).sorted()
        if !off.isEmpty { lines.append("Turned off: \(off.joined(separator: ", ")).") }
        if !on.isEmpty { lines.append("Turned on explicitly: \(on.joined(separator: ", ")).") }
        // The policy counts a category turned on explicitly as opted in too; it is said above.
        let optIns = p.optIns.subtracting(on).sorted()
        if !optIns.isEmpty { lines.append("Opted in to: \(optIns.joined(separator: ", ")).") }
        if let quiet = p.quietHours {
            let zone = p.timeZone ?? "the device's time zone, else UTC"
            lines.append("Quiet hours \(Self.clock(quiet.start))–\(Self.clock(quiet.end)) (\(zone)).")
        }
        if let muted = p.mutedUntil {
            lines.append("Muted until \(muted.formatted(.iso8601)).")
        }
        if let location = p.location {
            lines.append("Only nearby notifications: within \(String(format: "%g", location.radiusKm)) km.")
        }
        return lines.isEmpty ? ["Nothing is turned off: every category is on, no quiet hours."] : lines
    }

    /// `HH:MM` from minutes after midnight.
    private static func clock(_ minutes: Int) -> String {
        String(format: "%02d:%02d", minutes / 60, minutes % 60)
    }
}
