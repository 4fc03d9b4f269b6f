import Foundation
import HeraldCore

/// A user's notification preferences (`herald.preferences.preferences`): the seed 001 model, extended.
///
/// Parsing never fails: a missing, unknown or malformed field keeps its default.
/// ```json
/// {"enabled": true, "eventToggles": {"new_listing": false}, "optIns": ["marketing"],
///  "quietHours": {"enabled": true, "start": "22:00", "end": "07:00"}, "timeZone": "Europe/London",
///  "mutedUntil": "2026-03-29T08:00:00Z", "location": {"lat": 51.5, "lon": -0.12, "radiusKm": 5}}
/// ```
package struct Preferences: Sendable, Hashable {
    /// Every non-mandatory notification on or off (`enabled`). Default true.
    package var enabled: Bool
    /// Per-category switches (`eventToggles`); a category without an entry is on unless it is opt-in. Default empty.
    package var eventToggles: [String: Bool]
    /// Opt-in categories the user turned on (`optIns`, or an explicit `eventToggles[category] = true`). Default empty.
    package var optIns: Set<String>
    /// The quiet window (`quietHours`); nil when off. Default nil.
    package var quietHours: QuietHours?
    /// IANA zone for quiet hours (`timeZone`); nil falls back to a device's zone, then UTC. Default nil.
    package var timeZone: String?
    /// Non-mandatory notifications are muted before this time (`mutedUntil`: ISO-8601, or epoch seconds). Default nil.
    package var mutedUntil: Date?
    /// Where geo jobs must fall (`location`); nil means geo jobs are not filtered. Default nil.
    package var location: Location?

    package init(
        enabled: Bool = true,
        eventToggles: [String: Bool] = [:],
        optIns: Set<String> = [],
        quietHours: QuietHours? = nil,
        timeZone: String? = nil,
        mutedUntil: Date? = nil,
        location: Location? = nil
    ) {
        self.enabled = enabled
        self.eventToggles = eventToggles
        self.optIns = optIns
        self.quietHours = quietHours
        self.timeZone = timeZone
        self.mutedUntil = mutedUntil
        self.location = location
    }

    /// Parses the preferences jsonb text.
    package init(json text: String) {
        let root = [String: JSONValue].parsing(text)
        self.init()
        enabled = root["enabled"]?.bool ?? true
        eventToggles = root["eventToggles"]?.members.compactMapValues(\.bool) ?? [:]
        if case .array(let names)? = root["optIns"] { optIns = Set(names.compactMap(\.string)) }
        optIns.formUnion(eventToggles.filter(\.value).keys)
        quietHours = QuietHours(root["quietHours"])
        timeZone = root["timeZone"]?.string
        mutedUntil = root["mutedUntil"]?.timestamp
        location = Location(root["location"])
    }

    /// A circle the user wants geo notifications from (seed 000 req 1.4).
    package struct Location: Sendable, Hashable {
        package var center: GeoPoint
        /// Kilometres, clamped to 1 ... 100 (seed 000 req 1.4). Default 10 km.
        package var radiusKm: Double

        package init(center: GeoPoint, radiusKm: Double = 10) {
            self.center = center
            self.radiusKm = min(100, max(1, radiusKm))
        }

        /// Reads `{"lat", "lon", "radiusKm"}`; nil without a valid position.
        init?(_ json: JSONValue?) {
            guard let center = GeoPoint(json) else { return nil }
            self.init(center: center, radiusKm: json?.members["radiusKm"]?.number ?? 10)
        }
    }
}
