import Foundation
import HeraldCore

/// A claimed batch as the database holds it: the jobs, and what the claim read about their
/// recipients and categories. The delivery pipeline turns it into policy inputs (preferences
/// parsed, category rules built); storage stops at plain values.
package struct ClaimedBatch: Sendable {
    /// In claim order: priority, due time, id.
    package var jobs: [Job] = []
    /// The oldest due time in the batch (epoch s), for the lag metric.
    package var oldestRunAt: Date?
    /// The batch's categories by name.
    package var categories: [String: StoredCategory] = [:]
    /// One entry per recipient with a job in the batch.
    package var recipients: [String: StoredRecipient] = [:]
    /// The bucket the batch was claimed from (migration 0015); its acknowledgement names it.
    package var bucket = 0
    /// Users with due critical jobs a batch slot's claim left to the critical lane (in any bucket
    /// it looked at); the slot signals the lane when there were any.
    package var leftToLane = 0

    package init() {}
}

/// What the claim read about one recipient it now holds.
package struct StoredRecipient: Sendable, Hashable {
    package var userID: String
    /// `herald.preferences.preferences`, nil when the user has no row.
    package var preferencesJSON: String?
    /// Live presence contexts.
    package var presence: Set<String> = []
    /// Active devices.
    package var devices: [Device] = []
    /// Notifications sent in the last day (the newest 100), oldest first; read only when a
    /// category of the batch coalesces or rate-limits.
    package var recentSends: [RecentSend] = []
    /// Unread inbox rows: the badge before this batch.
    package var unread: Int = 0
    /// Due pending jobs per category, this batch's included; read only when a category of the
    /// batch has `coalesce.summarizeAbove`.
    package var backlog: [String: Int] = [:]
    /// Pending summaries and when each goes out (epoch s).
    package var openSummaries: [SummaryKey: Date] = [:]
    /// Jobs waiting to be sent again that this batch did not claim, oldest first.
    package var retrying: [RetryingJob] = []

    package init(userID: String) {
        self.userID = userID
    }
}

/// A pending job that was sent and waits to be sent again (`herald.outbox.retrying`).
package struct RetryingJob: Sendable, Hashable {
    package var id: Int64
    package var priority: Priority
    /// When it is due again (epoch s).
    package var runAt: Date
    /// Devices that already took it.
    package var acceptedDevices: Set<Int64>

    package init(id: Int64, priority: Priority, runAt: Date, acceptedDevices: Set<Int64>) {
        self.id = id
        self.priority = priority
        self.runAt = runAt
        self.acceptedDevices = acceptedDevices
    }
}

/// A `herald.categories` row.
package struct StoredCategory: Sendable, Hashable {
    package var name: String
    package var appID: String
    package var priority: Priority
    package var mandatory: Bool
    /// Retry backoff base and cap, seconds.
    package var backoffBase: Duration
    package var backoffCap: Duration
    package var maxAttempts: Int
    package var sound: String?
    package var interruptionLevel: String?
    package var apnsCategory: String?
    package var androidChannel: String?
    package var defaultRoute: String?
    package var silent: Bool
    package var optIn: Bool
    /// `defer`, `drop` or `ignore`.
    package var quietHours: String
    /// The `coalesce` and `rate_limit` documents (JSON objects).
    package var coalesceJSON: String
    package var rateLimitJSON: String
    package var previewChars: Int?
    /// `deadline`: seconds from enqueue by which a device should have accepted a job, if set.
    package var deadline: Duration?

    package init(
        name: String,
        appID: String,
        priority: Priority,
        mandatory: Bool,
        backoffBase: Duration,
        backoffCap: Duration,
        maxAttempts: Int,
        sound: String?,
        interruptionLevel: String?,
        apnsCategory: String?,
        androidChannel: String?,
        defaultRoute: String?,
        silent: Bool,
        optIn: Bool,
        quietHours: String,
        coalesceJSON: String,
        rateLimitJSON: String,
        previewChars: Int?,
        deadline: Duration?
    ) {
        self.name = name
        self.appID = appID
        self.priority = priority
        self.mandatory = mandatory
        self.backoffBase = backoffBase
        self.backoffCap = backoffCap
        self.maxAttempts = maxAttempts
        self.sound = sound
        self.interruptionLevel = interruptionLevel
        self.apnsCategory = apnsCategory
        self.androidChannel = androidChannel
        self.defaultRoute = defaultRoute
        self.silent = silent
        self.optIn = optIn
        self.quietHours = quietHours
        self.coalesceJSON = coalesceJSON
        self.rateLimitJSON = rateLimitJSON
        self.previewChars = previewChars
        self.deadline = deadline
    }
}
