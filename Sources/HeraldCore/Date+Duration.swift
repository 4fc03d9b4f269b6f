import Foundation

// Herald keeps instants as `Date` and spans as `Duration` in Swift; the database layer turns them
// into epoch seconds (and back) in one place, the statements' binds and row readers.

extension Date {
    /// This instant moved by a span.
    package static func + (lhs: Date, rhs: Duration) -> Date { lhs.addingTimeInterval(rhs.seconds) }

    /// This instant moved back by a span.
    package static func - (lhs: Date, rhs: Duration) -> Date { lhs.addingTimeInterval(-rhs.seconds) }

    /// The span from `rhs` to `lhs` (negative when `lhs` is earlier).
    package static func - (lhs: Date, rhs: Date) -> Duration { .seconds(lhs.timeIntervalSince(rhs)) }
}
