import Foundation

/// Where a job stands after this worker is done with it for now.
package enum JobState: String, Sendable, Hashable, CaseIterable {
    /// Every reachable device accepted it.
    case done
    /// Back in the queue, for a retry at `runAt`.
    case pending
    /// Exhausted or rejected: moved to `herald.dead_letters`.
    case dead
    case cancelled
    /// A rule decided not to send it (reason recorded).
    case suppressed
    /// Its `expiresAt` passed before it could be delivered.
    case expired
    /// Folded into a summary job (coalescing, rate limit, backlog).
    case summarized
}

/// What a `herald.delivery_log` row written by the worker records. (Rows the database writes
/// itself, `cancelled`, `replayed`, `released`, carry their event in SQL.)
package enum LogEvent: String, Sendable, Hashable, CaseIterable {
    /// One device's send and its outcome.
    case attempt
    /// Held for later (quiet hours, presence, pacing); the job stays pending.
    case deferred
    /// Dropped by a rule (preferences, dedup, no device…).
    case suppressed
    /// Folded into a summary.
    case summarized
    /// Past its expiry before it could go out.
    case expired
    /// Dead-lettered.
    case dead
    /// Nothing left to do (every device already accepted it).
    case settled
    /// Recorded by the local fallback when no push device took it.
    case fallback
    /// A critical job missed its deadline: the user got an in-app alert.
    case alert
    /// A job whose alert was raised was delivered after all.
    case alertResolved = "alert_resolved"
}

/// One row for `herald.delivery_log`.
package struct LogEntry: Sendable, Hashable {
    package var jobID: Int64
    package var deviceID: Int64?
    package var provider: String?
    package var event: LogEvent
    /// The device outcome, for attempts.
    package var outcome: DeliveryOutcome.Disposition?
    /// The job's state after this record.
    package var status: JobState
    package var reason: LogReason?
    package var attempt: Int
    package var latency: Duration?

    package init(
        jobID: Int64,
        deviceID: Int64? = nil,
        provider: String? = nil,
        event: LogEvent,
        outcome: DeliveryOutcome.Disposition? = nil,
        status: JobState,
        reason: LogReason? = nil,
        attempt: Int,
        latency: Duration? = nil
    ) {
        self.jobID = jobID
        self.deviceID = deviceID
        self.provider = provider
        self.event = event
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.attempt = attempt
        self.latency = latency
    }
}

/// Everything the queue must store for one job, in the batch's single acknowledgement.
package struct Settlement: Sendable, Hashable {
    package var jobID: Int64
    package var state: JobState
    /// When a `pending` job runs again.
    package var runAt: Date?
    /// Why it stands where it does (kept as the job's `last_error` on retries and dead letters).
    package var error: LogReason?
    /// A `Retry-After` snooze does not use up an attempt.
    package var refundAttempt: Bool
    /// Write an `alert` row to the recipient's inbox (a critical job that could not be delivered).
    package var alert: Bool
    /// Devices that accepted on this attempt.
    package var accepted: [Int64]
    /// Devices to disable, with the reason.
    package var disable: [DisabledDevice]
    package var logs: [LogEntry]
    /// For a `summarized` job: the summary it joins.
    package var fold: Fold?
    /// For a `done` visible notification: its row in the user's inbox (history, badge).
    package var inbox: InboxEntry?

    package init(
        jobID: Int64,
        state: JobState,
        runAt: Date? = nil,
        error: LogReason? = nil,
        refundAttempt: Bool = false,
        alert: Bool = false,
        accepted: [Int64] = [],
        disable: [DisabledDevice] = [],
        logs: [LogEntry] = [],
        fold: Fold? = nil,
        inbox: InboxEntry? = nil
    ) {
        self.jobID = jobID
        self.state = state
        self.runAt = runAt
        self.error = error
        self.refundAttempt = refundAttempt
        self.alert = alert
        self.accepted = accepted
        self.disable = disable
        self.logs = logs
        self.fold = fold
        self.inbox = inbox
    }
}

extension Settlement {
    /// Back to pending to be sent again: it was sent, or held back on a device behind a job that
    /// was (a `deferred` record naming the device), as opposed to held by a rule (quiet hours, a
    /// schedule: a `deferred` record of the whole job).
    package var awaitsResend: Bool {
        state == .pending && logs.contains { $0.event == .attempt || ($0.event == .deferred && $0.deviceID != nil) }
    }
}

/// What the in-app notification center shows for one delivered notification.
package struct InboxEntry: Sendable, Hashable {
    package var title: String
    package var body: String
    package var route: String?
    /// A JSON object of strings.
    package var metadataJSON: String
    package var coalesceKey: String?
    package var scope: String?
    /// How many notifications a summary stands for (0 for a single one).
    package var summaryCount: Int

    package init(
        title: String,
        body: String,
        route: String? = nil,
        metadataJSON: String = "{}",
        coalesceKey: String? = nil,
        scope: String? = nil,
        summaryCount: Int = 0
    ) {
        self.title = title
        self.body = body
        self.route = route
        self.metadataJSON = metadataJSON
        self.coalesceKey = coalesceKey
        self.scope = scope
        self.summaryCount = summaryCount
    }
}

package struct DisabledDevice: Sendable, Hashable {
    package var deviceID: Int64
    package var reason: DeliveryOutcome.Reason
    package init(deviceID: Int64, reason: DeliveryOutcome.Reason) {
        self.deviceID = deviceID
        self.reason = reason
    }
}

/// A decision to fold a job into a summary.
package struct Fold: Sendable, Hashable {
    /// The summary it joins, per user and category: the job's `coalesceKey`, else the category name.
    package var key: String
    /// When the summary goes out.
    package var dueAt: Date
    package var reason: FoldReason

    package init(key: String, dueAt: Date, reason: FoldReason) {
        self.key = key
        self.dueAt = dueAt
        self.reason = reason
    }
}
