import Foundation
import HeraldCore

/// What the operator console reads (statements in `ConsoleStatements.swift`).
package enum ConsoleData {
    /// Jobs of one (state, category, app) cell of the outbox.
    package struct DepthCell: Sendable, Hashable {
        /// `due`, `scheduled`, `paused` or `running`.
        package var state: String
        package var category: String
        package var appID: String
        package var jobs: Int
        /// How long the oldest due job has waited (due cells only).
        package var oldestDueAge: Duration?
        /// Jobs already past their category's deadline.
        package var pastDeadline: Int
    }

    /// What the overview shows beside the queue (as `herald status`).
    package struct Activity: Sendable, Hashable {
        package var openDeadLetters: Int
        package var deliveredLastHour: Int
        package var activeDevices: Int
    }

    /// Provider attempts in one minute (UTC).
    package struct Minute: Sendable, Hashable {
        package var minute: String
        package var accepted: Int
        package var failed: Int
    }

    /// A category with a deadline, measured against it.
    package struct Deadline: Sendable, Hashable {
        package var category: String
        package var deadline: Duration
        /// Jobs a device accepted over the last hour.
        package var deliveredLastHour: Int
        /// Deadline alerts raised over the last hour (critical jobs no device took in time).
        package var alertsLastHour: Int
    }

    /// One job found by a search: still in the outbox, or finished (its last record).
    package struct JobRow: Sendable, Hashable {
        package var id: Int64
        package var userID: String
        package var category: String
        package var state: String
        package var reason: String
        package var at: String
    }

    /// What a job search matches; nil fields match anything.
    package struct JobFilter: Sendable, Hashable {
        package var user: String?
        package var category: String?
        package var state: String?
        package var dedupKey: String?
        /// Finished jobs whose last record is at or after this time (default: the last day).
        /// Pending and running jobs match whatever their age.
        package var since: Date?
        package init(
            user: String? = nil,
            category: String? = nil,
            state: String? = nil,
            dedupKey: String? = nil,
            since: Date? = nil
        ) {
            self.user = user
            self.category = category
            self.state = state
            self.dedupKey = dedupKey
            self.since = since
        }
    }

    /// A device as the console shows it: never its token, only ``tokenHash``.
    package struct DeviceRow: Sendable, Hashable {
        package var id: Int64
        package var provider: String
        package var appID: String
        package var environment: String
        package var active: Bool
        package var disabledReason: String
        package var permission: String
        package var locale: String
        package var registeredAt: String
        /// The same tag the worker's logs carry as `device.token_hash`.
        package var tokenHash: String
    }

    /// A user's notification by its latest record.
    package struct NotificationRow: Sendable, Hashable {
        package var jobID: Int64
        package var category: String
        package var firstSeen: String
        package var event: String
        package var provider: String
        package var outcome: String
        package var status: String
        package var reason: String
    }

    /// One operator action from `herald.audit_log`.
    package struct AuditRow: Sendable, Hashable {
        package var at: String
        package var actor: String
        package var action: String
        package var targetJSON: String
        package var jobs: Int
    }
}

extension Outbox {
    /// The outbox by state, category and app, in one pass.
    package func consoleCells() async throws -> [ConsoleData.DepthCell] {
        try await pool.query(ConsoleStatements.cells).readers.map { r in
            ConsoleData.DepthCell(
                state: r.string("state") ?? "",
                category: r.string("category") ?? "",
                appID: r.string("app_id") ?? "",
                jobs: r.int("jobs") ?? 0,
                oldestDueAge: r.duration("oldest_due_age"),
                pastDeadline: r.int("past_deadline") ?? 0
            )
        }
    }

    package func consoleActivity() async throws -> ConsoleData.Activity {
        let r = try await pool.query(ConsoleStatements.activity).firstReader
        return ConsoleData.Activity(
            openDeadLetters: r.int("dead_letters") ?? 0,
            deliveredLastHour: r.int("delivered_last_hour") ?? 0,
            activeDevices: r.int("active_devices") ?? 0
        )
    }

    package func consoleThroughput() async throws -> [ConsoleData.Minute] {
        try await pool.query(ConsoleStatements.throughput).readers.map { r in
            ConsoleData.Minute(
                minute: r.string("minute") ?? "",
                accepted: r.int("accepted") ?? 0,
                failed: r.int("failed") ?? 0
            )
        }
    }

    package func consoleDeadlines() async throws -> [ConsoleData.Deadline] {
        try await pool.query(ConsoleStatements.deadlines).readers.map { r in
            ConsoleData.Deadline(
                category: r.string("category") ?? "",
                deadline: r.duration("deadline") ?? .zero,
                deliveredLastHour: r.int("delivered") ?? 0,
                alertsLastHour: r.int("alerts") ?? 0
            )
        }
    }

    package func consoleJobs(_ filter: ConsoleData.JobFilter, limit: Int) async throws -> [ConsoleData.JobRow] {
        try await pool.query(
            ConsoleStatements.searchJobs,
            [filter.user, filter.category, filter.state, filter.dedupKey, filter.since?.epochText, String(limit)]
        ).readers.map { r in
            ConsoleData.JobRow(
                id: r.int64("id") ?? 0,
                userID: r.string("user_id") ?? "",
                category: r.string("category") ?? "",
                state: r.string("state") ?? "",
                reason: r.string("reason") ?? "",
                at: r.string("at") ?? ""
            )
        }
    }

    /// The user's devices; tokens are hashed here and go no further.
    package func consoleDevices(user: String) async throws -> [ConsoleData.DeviceRow] {
        try await pool.query(ConsoleStatements.userDevices, [user]).readers.map { r in
            ConsoleData.DeviceRow(
                id: r.int64("id") ?? 0,
                provider: r.string("provider") ?? "",
                appID: r.string("app_id") ?? "",
                environment: r.string("environment") ?? "",
                active: r.bool("active") ?? false,
                disabledReason: r.string("disabled_reason") ?? "",
                permission: r.string("permission") ?? "",
                locale: r.string("locale") ?? "",
                registeredAt: r.string("registered_at") ?? "",
                tokenHash: Device.tokenHash(of: r.string("token") ?? "")
            )
        }
    }

    /// The user's preferences document (JSON), nil when the user has none (everything on).
    package func consolePreferences(user: String) async throws -> String? {
        try await pool.query(ConsoleStatements.userPreferences, [user]).scalar
    }

    package func consoleNotifications(user: String, limit: Int) async throws -> [ConsoleData.NotificationRow] {
        try await pool.query(ConsoleStatements.userNotifications, [user, String(limit)]).readers.map { r in
            ConsoleData.NotificationRow(
                jobID: r.int64("job_id") ?? 0,
                category: r.string("category") ?? "",
                firstSeen: r.string("first_seen") ?? "",
                event: r.string("event") ?? "",
                provider: r.string("provider") ?? "",
                outcome: r.string("outcome") ?? "",
                status: r.string("status") ?? "",
                reason: r.string("reason") ?? ""
            )
        }
    }

    /// The troubleshooting suggestions and pending count of `herald.diagnose(user)`, as JSON.
    package func diagnose(user: String) async throws -> String? {
        try await pool.query(ConsoleStatements.diagnose, [user]).scalar
    }

    /// Writes one operator action to `herald.audit_log`.
    package func audit(actor: String, action: String, targetJSON: String, jobs: Int) async throws {
        _ = try await pool.query(ConsoleStatements.audit, [actor, action, targetJSON, String(jobs)])
    }

    package func auditLog(limit: Int) async throws -> [ConsoleData.AuditRow] {
        try await pool.query(ConsoleStatements.auditLog, [String(limit)]).readers.map { r in
            ConsoleData.AuditRow(
                at: r.string("at") ?? "",
                actor: r.string("actor") ?? "",
                action: r.string("action") ?? "",
                targetJSON: r.string("target") ?? "{}",
                jobs: r.int("jobs") ?? 0
            )
        }
    }

    /// Every category as (name, app).
    package func consoleCategories() async throws -> [(name: String, appID: String)] {
        try await pool.query(ConsoleStatements.categories).readers.map {
            ($0.string("name") ?? "", $0.string("app_id") ?? "")
        }
    }
}
