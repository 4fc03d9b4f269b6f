import Foundation
import HeraldCore

/// A daily quiet window in the user's local time; it may cross midnight (22:00–07:00).
package struct QuietHours: Sendable, Hashable {
    /// Window start, minutes after local midnight (0 ..< 1440).
    package var start: Int
    /// Window end (exclusive), minutes after local midnight (0 ..< 1440); before `start` when it crosses midnight.
    package var end: Int

    /// Nil when `start == end` or either is out of range: an empty window is no window.
    package init?(start: Int, end: Int) {
        guard start != end, (0..<1440).contains(start), (0..<1440).contains(end) else { return nil }
        self.start = start
        self.end = end
    }

    /// Reads `{"enabled", "start": "22:00", "end": "07:00"}` or `{"startHour": 22, "endHour": 7}`.
    ///
    /// `enabled` defaults to true when absent; nil when disabled or malformed.
    init?(_ json: JSONValue?) {
        guard let members = json?.members, members["enabled"]?.bool ?? true,
            let start = Self.minutes(members["start"], hour: members["startHour"]),
            let end = Self.minutes(members["end"], hour: members["endHour"])
        else { return nil }
        self.init(start: start, end: end)
    }

    /// The absolute time the window containing `now` ends, or nil when `now` is outside the window.
    ///
    /// The end is the next moment the wall clock in `zone` reads `end`; when a DST change skips that
    /// time, the first instant after the gap; when it repeats, its first occurrence.
    package func windowEnd(containing now: Date, in zone: TimeZone) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone

        let local = calendar.dateComponents([.hour, .minute], from: now)
        guard let hour = local.hour, let minute = local.minute else { return nil }
        let clock = hour * 60 + minute
        let inside = start < end ? (start..<end).contains(clock) : (clock >= start || clock < end)
        guard inside else { return nil }
        return calendar.nextDate(
            after: now,
            matching: DateComponents(hour: end / 60, minute: end % 60, second: 0),
            matchingPolicy: .nextTime,
            repeatedTimePolicy: .first,
            direction: .forward
        )
    }

    /// Minutes after midnight from `"HH:MM"` (seconds ignored) or else a whole `hour`.
    private static func minutes(_ text: JSONValue?, hour: JSONValue?) -> Int? {
        if let text = text?.string {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard (2...3).contains(parts.count), let h = Int(parts[0]), let m = Int(parts[1]),
                (0..<24).contains(h), (0..<60).contains(m)
            else { return nil }
            return h * 60 + m
        }
        guard let hour = hour?.int, (0..<24).contains(hour) else { return nil }
        return hour * 60
    }
}
