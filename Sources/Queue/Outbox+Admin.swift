import Foundation
import HeraldCore

/// Queue depth: what the maintenance leader exports as gauges.
package struct QueueDepth: Sendable, Hashable {
    package var pendingDue: Int
    package var pendingScheduled: Int
    package var running: Int
    /// How long the oldest due pending job has waited.
    package var oldestPendingAge: Duration
    package var deadLetters: Int
    /// Pending jobs held by a pause.
    package var paused: Int = 0
    /// Pauses in force (categories, apps, or everything).
    package var activePauses: Int = 0
}

/// A pause in force (`herald.pauses`): a category, an app, or everything when both are nil.
package struct Pause: Sendable, Hashable {
    package var category: String?
    package var appID: String?
    /// ISO 8601 (UTC), or nil: until resumed.
    package var until: String?
    package var pausedBy: String
    package var since: String
}

/// Depth plus the figures `herald status` adds.
package struct QueueStatus: Sendable, Hashable {
    package var depth: QueueDepth
    package var deliveredLastHour: Int
    package var activeDevices: Int
}

/// One dead letter as listed by `herald dlq`.
package struct DeadLetter: Sendable, Hashable {
    package var id: Int64
    package var jobID: Int64
    package var userID: String
    package var category: String
    package var attempts: Int
    package var lastError: String
    package var failedAt: String
    package var replayJobID: Int64?
    package var payloadJSON: String?
    package var optionsJSON: String?
    package var enqueuedAt: String?
}

/// Narrows `herald dlq` to some dead letters; nil fields match anything.
package struct DeadLetterFilter: Sendable, Hashable {
    package var category: String?
    /// A substring of the last error, e.g. `payload_rejected` or `unregistered`.
    package var reason: String?
    /// A provider one of the job's attempts went to.
    package var provider: String?
    /// Failed at or after / before.
    package var since: Date?
    package var until: Date?
    package init(
        category: String? = nil,
        reason: String? = nil,
        provider: String? = nil,
        since: Date? = nil,
        until: Date? = nil
    ) {
        self.category = category
        self.reason = reason
        self.provider = provider
        self.since = since
        self.until = until
    }
    package var isEmpty: Bool { self == DeadLetterFilter() }
}

/// What one retention pass deleted.
package struct PruneResult: Sendable, Hashable {
    /// Rows deleted.
    package var deliveryLog = 0, inbox = 0, localNotifications = 0, deadLetters = 0, dedupKeys = 0, presence = 0
    /// Day partitions of the history tables dropped (past retention) and created (ahead).
    package var partitionsDropped = 0, partitionsCreated = 0
    package var total: Int { deliveryLog + inbox + localNotifications + deadLetters + dedupKeys + presence }
}

extension Outbox {
    /// Enqueues one job through `herald.enqueue`; nil when a dedup key already covers it.
    package func enqueue(
        user: String,
        category: String,
        payloadJSON: String,
        optionsJSON: String = "{}"
    ) async throws
        -> Int64?
    {
        try await pool.query(OutboxStatements.enqueue, [user, category, payloadJSON, optionsJSON]).scalar
            .flatMap { Int64($0) }
    }

    /// Enqueues one job per user through `herald.enqueue_many`; returns how many.
    package func enqueueMany(
        users: [String],
        category: String,
        payloadJSON: String,
        optionsJSON: String = "{}"
    )
        async throws -> Int
    {
        try await pool.query(
            OutboxStatements.enqueueMany,
            [PostgresArray.encode(users), category, payloadJSON, optionsJSON]
        ).scalar.flatMap { Int($0) } ?? 0
    }

    package func depth() async throws -> QueueDepth {
        Self.depth(try await pool.query(OutboxStatements.depth).firstReader)
    }

    package func status() async throws -> QueueStatus {
        let r = try await pool.query(OutboxStatements.status).firstReader
        return QueueStatus(
            depth: Self.depth(r),
            deliveredLastHour: r.int("delivered_last_hour") ?? 0,
            activeDevices: r.int("active_devices") ?? 0
        )
    }

    private static func depth(_ r: RowReader) -> QueueDepth {
        QueueDepth(
            pendingDue: r.int("pending_due") ?? 0,
            pendingScheduled: r.int("pending_scheduled") ?? 0,
            running: r.int("running") ?? 0,
            oldestPendingAge: r.duration("oldest_pending_age") ?? .zero,
            deadLetters: r.int("dead_letters") ?? 0,
            paused: r.int("paused") ?? 0,
            activePauses: r.int("active_pauses") ?? 0
        )
    }

    // MARK: - The kill switch (sql/functions/08_control.sql)

    /// The pauses in force, oldest first.
    package func pauses() async throws -> [Pause] {
        try await pool.query(OutboxStatements.pauses).readers.map { r in
            Pause(
                category: r.string("category"),
                appID: r.string("app_id"),
                until: r.string("until"),
                pausedBy: r.string("paused_by") ?? "",
                since: r.string("since") ?? ""
            )
        }
    }

    /// Pauses a category, an app, or everything (both nil) until `until` (nil: until resumed);
    /// `actor` goes to the audit log (nil: the login role). Returns the pending jobs it covers.
    /// Claims skip the target as soon as this returns; ``holdPaused()`` then parks its jobs.
    package func pause(category: String?, appID: String?, until: Date?, actor: String?) async throws -> Int {
        Int(try await pool.query(OutboxStatements.pause, [category, appID, until?.epochText, actor]).scalar ?? "") ?? 0
    }

    /// Lifts exactly this target's pause; returns the held jobs it frees (``releaseUnpaused()``
    /// gives them their due times back).
    package func resume(category: String?, appID: String?, actor: String?) async throws -> Int {
        Int(try await pool.query(OutboxStatements.resume, [category, appID, actor]).first?[0] ?? "") ?? 0
    }

    /// Holds every pending job of the paused categories, `chunk` rows per transaction (at most
    /// `maxChunks` of them); returns how many.
    package func holdPaused(chunk: Int = 10_000, maxChunks: Int = 1_000) async throws -> Int {
        try await repeatChunks(OutboxStatements.holdPaused, chunk: chunk, maxChunks: maxChunks)
    }

    /// Gives held jobs that no pause covers any more their due times back, `chunk` rows per
    /// transaction (at most `maxChunks`); returns how many.
    package func releaseUnpaused(chunk: Int = 10_000, maxChunks: Int = 1_000) async throws -> Int {
        try await repeatChunks(OutboxStatements.releaseUnpaused, chunk: chunk, maxChunks: maxChunks)
    }

    private func repeatChunks(_ statement: PostgresStatement, chunk: Int, maxChunks: Int) async throws -> Int {
        var total = 0
        for _ in 0..<maxChunks {
            let n = Int(try await pool.query(statement, ["\(chunk)"]).scalar ?? "") ?? 0
            total += n
            if n < chunk { break }
        }
        return total
    }

    /// Cancels the pending jobs matching every given filter (at least one); returns how many.
    package func cancelPending(category: String?, scope: String?, appID: String?, actor: String?) async throws -> Int {
        Int(try await pool.query(OutboxStatements.cancelPending, [category, scope, appID, actor]).first?[0] ?? "") ?? 0
    }

    /// How many pending jobs `cancelPending` would cancel now.
    package func countPending(category: String?, scope: String?, appID: String?) async throws -> Int {
        Int(try await pool.query(OutboxStatements.countPending, [category, scope, appID]).first?[0] ?? "") ?? 0
    }

    /// The maintenance leader's sweep: holds what turned pending in a paused category and
    /// releases what no pause covers any more, at most 20 chunks each; returns (held, released).
    package func sweepPauses() async throws -> (held: Int, released: Int) {
        (try await holdPaused(maxChunks: 20), try await releaseUnpaused(maxChunks: 20))
    }

    package func deadLetters(
        limit: Int,
        includeReplayed: Bool,
        filter: DeadLetterFilter = DeadLetterFilter()
    )
        async throws -> [DeadLetter]
    {
        try await pool.query(
            OutboxStatements.deadLetterList,
            [
                includeReplayed ? "true" : "false", String(limit), filter.category, filter.reason, filter.provider,
                filter.since?.epochText, filter.until?.epochText,
            ]
        ).readers.map(Self.deadLetter)
    }

    package func deadLetter(id: Int64) async throws -> DeadLetter? {
        try await pool.query(OutboxStatements.deadLetterShow, [String(id)]).readers.first.map(Self.deadLetter)
    }

    /// Replays dead letters as new jobs; returns (dead letter id, new job id) pairs.
    package func replayDeadLetters(ids: [Int64]) async throws -> [(Int64, Int64)] {
        try await pool.query(OutboxStatements.deadLetterReplay, [PostgresArray.encode(ids)])
            .readers.compactMap { r in
                guard let a = r.int64("id"), let b = r.int64("new_job") else { return nil }
                return (a, b)
            }
    }

    /// Deletes the dead letters `ids` that are older than `olderThan`.
    package func purgeDeadLetters(ids: [Int64], olderThan: Duration) async throws -> Int {
        try await pool.query(OutboxStatements.deadLetterPurge, [PostgresArray.encode(ids), olderThan.secondsText])
            .scalar.flatMap { Int($0) } ?? 0
    }

    /// Retention: the history tables drop their days past retention whole (and delete at most
    /// `limit` rows past it from their default and legacy partitions), each table in a
    /// transaction of its own, so no statement waits on two of them; then dead letters, dedup
    /// keys and presence, at most `limit` rows each.
    package func pruneHistory(
        deliveryLog: Duration,
        inbox: Duration,
        localNotifications: Duration,
        deadLetters: Duration,
        limit: Int
    ) async throws -> PruneResult {
        var result = PruneResult()
        let tables: [(String, Duration, WritableKeyPath<PruneResult, Int>)] = [
            ("delivery_log", deliveryLog, \.deliveryLog), ("inbox", inbox, \.inbox),
            ("local_notifications", localNotifications, \.localNotifications),
        ]
        for (table, keep, deleted) in tables {
            let r = try await pool.query(OutboxStatements.pruneHistoryTable, [table, keep.secondsText, String(limit)])
                .firstReader
            result[keyPath: deleted] = r.int("deleted") ?? 0
            result.partitionsDropped += r.int("dropped") ?? 0
            result.partitionsCreated += r.int("created") ?? 0
        }
        let r = try await pool.query(OutboxStatements.pruneHistory, [deadLetters.secondsText, String(limit)])
            .firstReader
        result.deadLetters = r.int("dead_letters") ?? 0
        result.dedupKeys = r.int("dedup_keys") ?? 0
        result.presence = r.int("presence") ?? 0
        return result
    }

    /// Analyzes `herald.outbox` when its planner statistics lag a burst: it holds four times the
    /// rows they say, and at least `floor` (``OutboxStatements/refreshQueueStatistics``). Returns
    /// whether it analyzed.
    package func refreshQueueStatistics(floor: Int) async throws -> Bool {
        try await pool.query(OutboxStatements.refreshQueueStatistics, [String(floor)]).scalar == "t"
    }

    /// Every record of one job, oldest first: time, user, category, event, provider, outcome,
    /// status, reason, attempt, latency (ms), worker.
    package func explain(job: Int64) async throws -> [[String]] {
        try await pool.query(OutboxStatements.explainJob, [String(job)]).rows.map { $0.map { $0 ?? "" } }
    }

    /// A user's latest decisions, newest first: time, job, category, event, provider, outcome,
    /// status, reason, attempt.
    package func explain(user: String, limit: Int) async throws -> [[String]] {
        try await pool.query(OutboxStatements.explainUser, [user, String(limit)]).rows.map { $0.map { $0 ?? "" } }
    }

    private static func deadLetter(_ r: RowReader) -> DeadLetter {
        DeadLetter(
            id: r.int64("id") ?? 0,
            jobID: r.int64("job_id") ?? 0,
            userID: r.string("user_id") ?? "",
            category: r.string("category") ?? "",
            attempts: r.int("attempts") ?? 0,
            lastError: r.string("last_error") ?? "",
            failedAt: r.string("failed_at") ?? "",
            replayJobID: r.int64("replay_job_id"),
            payloadJSON: r.optional("payload"),
            optionsJSON: r.optional("options"),
            enqueuedAt: r.optional("enqueued_at")
        )
    }
}

/// Minimal JSON text encoding for string maps (no Foundation on the hot path).
package enum JSONText {
    package static func string(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\0": continue  // PostgreSQL jsonb cannot hold \u0000
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    package static func object(_ map: [String: String]) -> String {
        "{" + map.keys.sorted().map { string($0) + ":" + string(map[$0]!) }.joined(separator: ",") + "}"
    }

    /// `map` with `metadata` as a nested object (when there is any).
    package static func object(_ map: [String: String], metadata: [String: String]) -> String {
        guard !metadata.isEmpty, map["metadata"] == nil else { return object(map) }
        let fields =
            map.keys.sorted().map { string($0) + ":" + string(map[$0]!) } + [
                string("metadata") + ":" + object(metadata)
            ]
        return "{" + fields.joined(separator: ",") + "}"
    }
}
