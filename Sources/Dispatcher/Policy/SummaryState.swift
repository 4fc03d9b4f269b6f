import Foundation
import HeraldCore

/// One open summary of a user (`SummaryKey`): a value state machine that folds jobs in and says when
/// and what to send.
///
/// The queue stores it as a row; the engine's ``Fold`` decisions drive ``fold(_:payload:)``, and
/// ``poll(now:template:)`` turns it into a message once due.
package struct SummaryState: Sendable, Hashable {
    /// Jobs folded in so far.
    package private(set) var count: Int
    /// When it goes out: the latest due time of any fold (a debounce moves it later).
    package private(set) var dueAt: Date
    /// The newest folded job's content: a `trailing` summary shows it, latest wins.
    package private(set) var latest: Job.Payload

    /// Opens a summary with its first folded job.
    package init(_ fold: Fold, payload: Job.Payload) {
        count = 1
        dueAt = fold.dueAt
        latest = payload
    }

    /// Folds one more job in; the due time never moves earlier.
    package mutating func fold(_ fold: Fold, payload: Job.Payload) {
        count += 1
        dueAt = max(dueAt, fold.dueAt)
        latest = payload
    }

    /// What to do at `now`.
    package enum Action: Sendable, Hashable {
        /// Nothing yet: poll again at `until`.
        case wait(until: Date)
        /// Send this content as one notification and close the summary.
        case send(title: String, body: String, route: String?)
    }

    /// Waits until due; then a single folded job goes out as itself and several as the category's template.
    package func poll(now: Date, template: CategoryPolicy.SummaryTemplate) -> Action {
        guard now >= dueAt else { return .wait(until: dueAt) }
        guard count > 1 else { return .send(title: latest.title, body: latest.body, route: latest.route) }
        let values = ["count": String(count), "title": latest.title, "body": latest.body]
        return .send(
            title: fillTemplate(template.title, values),
            body: fillTemplate(template.body, values),
            route: template.route
        )
    }
}

/// Replaces each `{name}` in `template` with `values[name]` in one pass; unknown placeholders stay as written.
package func fillTemplate(_ template: String, _ values: [String: String]) -> String {
    var result = ""
    var rest = template[...]
    while let open = rest.firstIndex(of: "{") {
        result += rest[..<open]
        let name = rest[rest.index(after: open)...].prefix { $0 != "}" }
        if name.endIndex < rest.endIndex, let value = values[String(name)] {
            result += value
            rest = rest[rest.index(after: name.endIndex)...]
        } else {
            result += "{"
            rest = rest[rest.index(after: open)...]
        }
    }
    return result + rest
}
