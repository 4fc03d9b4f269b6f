import Foundation

/// One notification sent to the user (a `herald.delivery_log` or `herald.inbox` row).
package struct RecentSend: Sendable, Hashable {
    package var at: Date
    package var category: String
    /// The job's `scope` option (e.g. an org id), if any.
    package var scope: String?
    /// The job's `coalesceKey` option, if any.
    package var coalesceKey: String?

    package init(at: Date, category: String, scope: String? = nil, coalesceKey: String? = nil) {
        self.at = at
        self.category = category
        self.scope = scope
        self.coalesceKey = coalesceKey
    }
}

/// Names one pending summary of a user: folded jobs with the same category and key share it.
package struct SummaryKey: Sendable, Hashable {
    package var category: String
    /// The jobs' `coalesceKey`, else the category name.
    package var key: String

    package init(category: String, key: String) {
        self.category = category
        self.key = key
    }
}
