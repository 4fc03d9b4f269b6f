import Foundation
import HeraldCore

// The one place instants and spans cross into SQL and back: statements take epoch seconds
// (`to_timestamp($n)`, `make_interval(secs => $n)`) and the claim returns them as
// `extract(epoch FROM …)`; Swift above this layer sees only `Date` and `Duration`.

extension Date {
    /// Seconds since 1970, as a statement's text parameter.
    package var epochText: String { String(timeIntervalSince1970) }

    /// The instant an `extract(epoch FROM …)` text names; nil for NULL or malformed text.
    package init?(epochText text: String?) {
        guard let text, let seconds = Double(text) else { return nil }
        self.init(timeIntervalSince1970: seconds)
    }
}

extension Duration {
    /// Seconds, as a statement's text parameter.
    package var secondsText: String { String(seconds) }

    /// The span an `extract(epoch FROM interval)` text names; nil for NULL or malformed text.
    package init?(secondsText text: String?) {
        guard let text, let seconds = Double(text) else { return nil }
        self = .seconds(seconds)
    }
}

extension ClaimReader {
    func date(_ column: Column) -> Date? { Date(epochText: string(column)) }
    func duration(_ column: Column) -> Duration? { Duration(secondsText: string(column)) }
}

extension RowReader {
    package func date(_ column: String) -> Date? { Date(epochText: string(column)) }
    package func duration(_ column: String) -> Duration? { Duration(secondsText: string(column)) }
}

extension PostgresRecords.Row {
    /// An instant, written as epoch seconds (the composite types' time fields are `double precision`).
    package mutating func field(_ name: String, _ value: Date?) { field(name, value?.timeIntervalSince1970) }
}
