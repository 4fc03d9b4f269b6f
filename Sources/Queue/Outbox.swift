import Foundation
import HeraldCore
import Logging
import Synchronization

/// The durable outbox: claims due jobs in batches under a lease and acknowledges whole batches.
///
/// Every operation is one statement whatever the batch size. Claims take the most urgent due
/// work first (priority, then due time) with `FOR UPDATE SKIP LOCKED`, so replicas never block
/// each other; acknowledgements are fenced by the lease, so a worker that lost its lease (it
/// was too slow and the reaper handed the job to another) cannot overwrite the row.
///
/// ```swift
/// let outbox = Outbox(pool: pool, workerID: "herald-1")
/// let batch = try await outbox.claim(limit: 200, lease: 60, now: clock.now())
/// // deliver…
/// try await outbox.acknowledge(settlements)
/// ```
package struct Outbox: Sendable {
    package let pool: PostgresPool
    /// The lease owner written on claimed rows. Unique per consumer.
    package let workerID: String

    /// Whether this worker's claims walk the apps' scopes, and where each app's walk stopped
    /// (``OutboxStatements/claimWithScopeTurns``). Shared by copies of this value.
    private let scopeCursor = ScopeCursor()
    /// The database's buckets, the one this worker claims from next, and the buckets of the
    /// batches it holds (migration 0015). Shared by copies of this value.
    private let buckets = BucketRotation()

    package init(pool: PostgresPool, workerID: String) {
        self.pool = pool
        self.workerID = workerID
    }

    /// The number of buckets the database is laid out with (`herald.layout`, read once).
    private func bucketCount() async throws -> Int {
        if let n = buckets.count { return n }
        let n = max(1, try await pool.query(OutboxStatements.layout).scalar.flatMap { Int($0) } ?? 1)
        buckets.setCount(n)
        return n
    }

    /// Claims up to `limit` due jobs of one bucket and leases them for `lease` from `now`, with
    /// what the claim read about their recipients and categories, in one statement (see
    /// ``OutboxStatements/claim``).
    ///
    /// Claims rotate through the buckets: each starts at the bucket after the last one that gave
    /// jobs, and an empty bucket passes on to the next, so an empty batch means every bucket was
    /// empty. With one bucket (one PostgreSQL, the default) that is one statement, as before.
    /// - Parameters:
    ///   - through: the least urgent priority to claim (`.critical` for the critical lane).
    ///   - from: the most urgent priority to claim: `.high` for batch slots beside a critical lane,
    ///     which then leave users with due critical jobs to it (``OutboxStatements/laneUsers``).
    package func claim(
        limit: Int,
        lease: Duration,
        now: Date,
        through: Priority = .low,
        from: Priority = .critical
    ) async throws -> ClaimedBatch {
        let count = try await bucketCount()
        let first = buckets.next()
        var batch = ClaimedBatch()
        var leftToLane = 0
        for step in 0..<count {
            let bucket = (first + step) % count
            batch = try await claim(bucket: bucket, limit: limit, lease: lease, now: now, through: through, from: from)
            leftToLane += batch.leftToLane
            if !batch.jobs.isEmpty {
                buckets.claimed(bucket)
                break
            }
        }
        batch.leftToLane = leftToLane
        return batch
    }

    /// One bucket's claim.
    private func claim(
        bucket: Int,
        limit: Int,
        lease: Duration,
        now: Date,
        through: Priority,
        from: Priority
    )
        async throws -> ClaimedBatch
    {
        let binds = [
            workerID, now.epochText, lease.secondsText, String(limit), String(through.rawValue), String(bucket),
            String(from.rawValue),
        ]
        // The critical lane (critical jobs only, a few at a time) neither looks nor walks: scope
        // turns share out floods, and the look would be one more round trip on its way.
        let sharing = through != .critical
        if sharing && scopeCursor.lookNow(bucket: bucket) {
            let apps = try await pool.query(OutboxStatements.appsWithSeveralScopes, [String(bucket)]).readers
                .compactMap { $0.string("app_id") }
            scopeCursor.found(apps, bucket: bucket)
        }
        let cursor = sharing ? scopeCursor.walk(bucket: bucket) : nil
        let rows =
            if let cursor {
                try await pool.query(OutboxStatements.claimWithScopeTurns, binds + [cursor])
            } else {
                try await pool.query(OutboxStatements.claim, binds)
            }
        var walked: [(app: String, scope: String, scopes: Int)] = []
        var jobs: [Job] = []
        var runAts: [Date] = []
        jobs.reserveCapacity(limit)
        runAts.reserveCapacity(limit)
        var batch = ClaimedBatch()
        batch.bucket = bucket
        // Users whose recipient row may lack sends of their window, with the window's start (epoch s).
        var incomplete: [(user: String, since: Double)] = []
        // Every recipient row names a user the claim holds, so it has a job in `jobs`.
        func recipient(_ user: String?, _ update: (inout StoredRecipient) -> Void) {
            guard let user else { return }
            update(&batch.recipients[user, default: StoredRecipient(userID: user)])
        }
        for row in rows.readers {
            let record = row.string("record")
            switch row.string("kind") {
            case JobColumn.kind:
                let r = ClaimReader<JobColumn>(record: record)
                let runAt = r.date(.runAt) ?? .distantPast
                jobs.append(Self.job(r))
                runAts.append(runAt)
                batch.oldestRunAt = min(batch.oldestRunAt ?? runAt, runAt)
            case DeviceColumn.kind:
                guard let device = Self.device(ClaimReader(record: record)) else { continue }
                recipient(device.userID) { $0.devices.append(device) }
            case CategoryColumn.kind:
                let category = Self.category(ClaimReader(record: record))
                batch.categories[category.name] = category
            case PreferencesColumn.kind:
                let r = ClaimReader<PreferencesColumn>(record: record)
                recipient(r.string(.userID)) { $0.preferencesJSON = r.string(.document) ?? "{}" }
            case PresenceColumn.kind:
                let r = ClaimReader<PresenceColumn>(record: record)
                guard let context = r.string(.context) else { continue }
                recipient(r.string(.userID)) { $0.presence.insert(context) }
            case SendsColumn.kind:
                let r = ClaimReader<SendsColumn>(record: record)
                guard let sends = r.string(.sends) else { continue }
                recipient(r.string(.userID)) { $0.recentSends = Self.recentSends(sends) }
                // A full list whose oldest send is newer than the start of the user's window may
                // lack sends of it (another category's flood pushed them out).
                if let user = r.string(.userID), let size = r.int(.size), size >= OutboxStatements.historyLimit,
                    let oldest = r.double(.oldest), let reach = r.double(.reach)
                {
                    let since = now.timeIntervalSince1970 - reach
                    if oldest > since { incomplete.append((user, since)) }
                }
            case UnreadColumn.kind:
                let r = ClaimReader<UnreadColumn>(record: record)
                recipient(r.string(.userID)) { $0.unread = r.int(.count) ?? 0 }
            case BacklogColumn.kind:
                let r = ClaimReader<BacklogColumn>(record: record)
                guard let category = r.string(.category) else { continue }
                recipient(r.string(.userID)) { $0.backlog[category] = r.int(.count) ?? 0 }
            case OpenSummaryColumn.kind:
                let r = ClaimReader<OpenSummaryColumn>(record: record)
                guard let category = r.string(.category), let key = r.string(.key), let due = r.date(.dueAt)
                else { continue }
                recipient(r.string(.userID)) { $0.openSummaries[SummaryKey(category: category, key: key)] = due }
            case ScopeCursorColumn.kind:
                let r = ClaimReader<ScopeCursorColumn>(record: record)
                guard let app = r.string(.appID), let scope = r.string(.scope) else { continue }
                walked.append((app, scope, r.int(.scopes) ?? 1))
            case LaneUsersColumn.kind:
                batch.leftToLane = ClaimReader<LaneUsersColumn>(record: record).int(.count) ?? 0
            case RetryingColumn.kind:
                let r = ClaimReader<RetryingColumn>(record: record)
                guard let id = r.int64(.jobID), let runAt = r.date(.runAt) else { continue }
                let job = RetryingJob(
                    id: id,
                    priority: Priority(rawValue: r.int(.priority) ?? 2) ?? .normal,
                    runAt: runAt,
                    acceptedDevices: Set(PostgresArray.decodeInt64s(r.string(.acceptedDevices)))
                )
                recipient(r.string(.userID)) { $0.retrying.append(job) }
            default:
                continue
            }
        }
        if cursor != nil { scopeCursor.walked(walked, bucket: bucket) }
        if !incomplete.isEmpty {
            // Their windows from the inbox.
            let rows = try await pool.query(
                OutboxStatements.sendsFromInbox,
                [
                    PostgresArray.encode(incomplete.map(\.user)), PostgresArray.encode(incomplete.map(\.since)),
                    String(bucket),
                ]
            )
            for row in rows.readers {
                guard let user = row.string("user_id"), let sends = row.string("sends") else { continue }
                recipient(user) { $0.recentSends = Self.recentSends(sends) }
            }
        }
        // Claim order (priority, due time, id): the dispatcher decides, and the consumer sends,
        // each recipient's jobs in this order.
        // Indexes sorted, not the jobs: a job is a large value, and sorting the jobs themselves
        // moved each one many times.
        batch.jobs = jobs.indices.sorted {
            (jobs[$0].priority, runAts[$0], jobs[$0].id) < (jobs[$1].priority, runAts[$1], jobs[$1].id)
        }.map { jobs[$0] }
        // The snapshot still saw this batch's own jobs pending: only the others wait apart.
        let claimed = Set(batch.jobs.map(\.id))
        for user in batch.recipients.keys where !(batch.recipients[user]?.retrying.isEmpty ?? true) {
            batch.recipients[user]?.retrying.removeAll { claimed.contains($0.id) }
            batch.recipients[user]?.retrying.sort { $0.id < $1.id }
        }
        for user in batch.jobs.map(\.userID) where batch.recipients[user] == nil {
            batch.recipients[user] = StoredRecipient(userID: user)
        }
        return batch
    }

    /// A recipient's send history (the claim's `s` rows): an array of ``SentColumn`` records,
    /// oldest first.
    static func recentSends(_ array: String) -> [RecentSend] {
        PostgresText.arrayElements(array).compactMap { element in
            let r = ClaimReader<SentColumn>(record: element)
            guard let category = r.string(.category), let at = r.date(.at) else { return nil }
            return RecentSend(at: at, category: category, scope: r.string(.scope), coalesceKey: r.string(.coalesceKey))
        }
    }

    private static func job(_ r: ClaimReader<JobColumn>) -> Job {
        let summaryKey = r.string(.summaryKey)
        var geo: GeoPoint?
        if let lat = r.double(.geoLat), let lon = r.double(.geoLon) { geo = GeoPoint(lat: lat, lon: lon) }
        let inputs = PolicyInputs(
            deliverAt: r.date(.deliverAt),
            geo: geo,
            requires: r.string(.requires).map { [String: JSONValue].parsing($0) } ?? [:],
            scope: r.string(.scope),
            coalesceKey: summaryKey ?? r.string(.coalesceKey),
            isSummary: summaryKey != nil
        )
        return Job(
            id: r.int64(.id) ?? 0,
            userID: r.string(.userID) ?? "",
            category: r.string(.category) ?? "",
            priority: Priority(rawValue: r.int(.priority) ?? 2) ?? .normal,
            payload: Job.Payload(
                title: r.string(.title) ?? "",
                body: r.string(.body) ?? "",
                subtitle: r.string(.subtitle),
                route: r.string(.route),
                metadataJSON: r.string(.metadata),
                eventType: r.string(.eventType),
                imageURL: r.string(.imageURL),
                sound: r.string(.sound),
                threadID: r.string(.threadID),
                sentAtIso: r.string(.sentAtIso),
                actionsJSON: r.string(.actions),
                localized: r.string(.localized).map { LocalizedText.variants(JSONValue(parsing: $0)) } ?? [:]
            ),
            options: Job.Options(
                collapseID: r.string(.collapseID),
                silent: r.string(.silent).map { $0 == "true" },
                dedupKey: r.string(.dedupKey),
                context: r.string(.context),
                mandatory: r.string(.mandatory).map { $0 == "true" },
                excludeDevice: r.int64(.excludeDevice),
                traceparent: r.string(.traceparent)
            ),
            attempt: r.int(.attempt) ?? 1,
            maxAttempts: r.int(.maxAttempts) ?? 1,
            acceptedDevices: Set(PostgresArray.decodeInt64s(r.string(.acceptedDevices))),
            createdAt: r.date(.createdAt) ?? .distantPast,
            expiresAt: r.date(.expiresAt) ?? .distantPast,
            inputs: inputs,
            summaryCount: r.int(.summaryCount) ?? 0,
            alertedAt: r.date(.alertedAt),
            summarized: summarizedItems(r.string(.summarizedIDs), r.string(.summarizedTitles))
        )
    }

    /// A summary's folded jobs: ids as a PostgreSQL array, titles as a JSON array, both newest first.
    private static func summarizedItems(_ ids: String?, _ titles: String?) -> [Job.SummarizedItem] {
        guard let ids, ids != "{}" else { return [] }
        let titles =
            titles.flatMap { JSONValue(parsing: $0) }.map { value -> [String] in
                guard case .array(let items) = value else { return [] }
                return items.map { $0.string ?? "" }
            } ?? []
        return PostgresArray.decodeInt64s(ids).enumerated().map { i, id in
            Job.SummarizedItem(id: id, title: i < titles.count ? titles[i] : "")
        }
    }

    private static func device(_ r: ClaimReader<DeviceColumn>) -> Device? {
        guard let id = r.int64(.id), let user = r.string(.userID),
            let kind = r.string(.provider).flatMap(ProviderKind.init(rawValue:)), let token = r.string(.token)
        else { return nil }
        return Device(
            id: id,
            userID: user,
            provider: kind,
            token: token,
            appID: r.string(.appID) ?? "default",
            environment: r.string(.environment) ?? "production",
            p256dh: r.string(.p256dh),
            auth: r.string(.auth),
            locale: r.string(.locale),
            timeZone: r.string(.timeZone),
            attributesJSON: r.string(.attributes) ?? "{}",
            registeredAt: r.date(.registeredAt) ?? Date(timeIntervalSince1970: 0)
        )
    }

    private static func category(_ r: ClaimReader<CategoryColumn>) -> StoredCategory {
        StoredCategory(
            name: r.string(.name) ?? "",
            appID: r.string(.appID) ?? "default",
            priority: r.string(.priority).flatMap(Priority.init(name:)) ?? .normal,
            mandatory: r.bool(.mandatory) ?? false,
            backoffBase: r.duration(.backoffBase) ?? .seconds(2),
            backoffCap: r.duration(.backoffCap) ?? .seconds(600),
            maxAttempts: r.int(.maxAttempts) ?? 5,
            sound: r.string(.sound),
            interruptionLevel: r.string(.interruptionLevel),
            apnsCategory: r.string(.apnsCategory),
            androidChannel: r.string(.androidChannel),
            defaultRoute: r.string(.defaultRoute),
            silent: r.bool(.silent) ?? false,
            optIn: r.bool(.optIn) ?? false,
            quietHours: r.string(.quietHours) ?? "defer",
            coalesceJSON: r.string(.coalesce) ?? "{}",
            rateLimitJSON: r.string(.rateLimit) ?? "{}",
            previewChars: r.int(.previewChars),
            deadline: r.duration(.deadline)
        )
    }

    /// Stores a batch's settlements in one statement; returns how many jobs were still ours.
    ///
    /// `jobs` gives each settled job's recipient and category for the delivery log and inbox.
    /// Each row kind is one bind, an array of its composite type (migration 0012), written field
    /// by field under the type's names (``PostgresRecords``).
    /// `bucket` is the batch's (``ClaimedBatch/bucket``).
    @discardableResult
    package func acknowledge(_ settlements: [Settlement], jobs: [Job], bucket: Int) async throws -> Int {
        guard !settlements.isEmpty else { return 0 }
        var owners: [Int64: (user: String, category: String)] = [:]
        owners.reserveCapacity(jobs.count)
        for i in jobs.indices { owners[jobs[i].id] = (jobs[i].userID, jobs[i].category) }
        // Room for a usual batch's records (a delivered job: one settlement, one accepted device,
        // one log record and an inbox row), so the literals do not grow by copying themselves.
        let n = settlements.count
        var settled = PostgresRecords(OutboxStatements.settledJob, reserving: n * 48)
        var accepted = PostgresRecords(OutboxStatements.acceptedDevice, reserving: n * 24)
        var logs = PostgresRecords(OutboxStatements.logRecord, reserving: n * 128)
        var disabled = PostgresRecords(OutboxStatements.disabledDevice)
        var inbox = PostgresRecords(OutboxStatements.inboxRecord, reserving: n * 192)
        for s in settlements {
            let fold = s.state == .summarized ? s.fold : nil
            settled.row {
                $0.field("id", s.jobID)
                $0.field("state", s.state.rawValue)
                $0.field("run_at", s.runAt)
                $0.field("error", s.error?.text)
                $0.field("refund", s.refundAttempt)
                $0.field("alert", s.alert)
                $0.field("retrying", s.awaitsResend)
                $0.field("fold_key", fold?.key)
                $0.field("fold_due", fold?.dueAt)
            }
            for device in s.accepted {
                accepted.row {
                    $0.field("job_id", s.jobID)
                    $0.field("device_id", device)
                }
            }
            let owner = owners[s.jobID]
            for l in s.logs {
                logs.row {
                    $0.field("job_id", l.jobID)
                    $0.field("user_id", owner?.user ?? "")
                    $0.field("category", owner?.category ?? "")
                    $0.field("device_id", l.deviceID)
                    $0.field("provider", l.provider)
                    $0.field("event", l.event.rawValue)
                    $0.field("outcome", l.outcome?.rawValue)
                    $0.field("status", l.status.rawValue)
                    $0.field("reason", l.reason?.text)
                    $0.field("attempt", l.attempt)
                    $0.field("latency_ms", l.latency.map { $0.seconds * 1000 })
                }
            }
            for d in s.disable {
                disabled.row {
                    $0.field("id", d.deviceID)
                    $0.field("reason", d.reason.rawValue)
                }
            }
            if let entry = s.inbox {  // a delivered job, or a fallback shown in the notification center
                inbox.row {
                    $0.field("job_id", s.jobID)
                    $0.field("user_id", owner?.user ?? "")
                    $0.field("category", owner?.category ?? "")
                    $0.field("title", entry.title)
                    $0.field("body", entry.body)
                    $0.field("route", entry.route)
                    // No metadata goes as NULL (the ack writes '{}'): PostgreSQL parses no JSON
                    // for it, a third of what reading the inbox records costs.
                    $0.field("metadata", entry.metadataJSON == "{}" ? nil : entry.metadataJSON)
                    $0.field("coalesce_key", entry.coalesceKey)
                    $0.field("scope", entry.scope)
                    $0.field("summary_count", entry.summaryCount)
                }
            }
        }
        let binds: [String?] = [
            workerID, settled.encoded(), accepted.encoded(), logs.encoded(), disabled.encoded(), inbox.encoded(),
            String(bucket),
        ]
        let rows = try await pool.query(OutboxStatements.acknowledge, binds)
        buckets.settled(bucket)
        return rows.scalar.flatMap { Int($0) } ?? 0
    }

    /// Extends every lease this worker holds to `now + lease`, one statement per bucket it holds
    /// batches of; returns how many.
    @discardableResult
    package func extendLeases(lease: Duration, now: Date) async throws -> Int {
        var extended = 0
        for bucket in buckets.held() {
            extended += try await pool.query(
                OutboxStatements.extendLeases,
                [workerID, now.epochText, lease.secondsText, String(bucket)]
            ).affected
        }
        return extended
    }

    /// Returns expired leases to `pending` (or dead letters when it was the last attempt), bucket
    /// by bucket, at most `limit` per bucket.
    package func reapExpiredLeases(now: Date, limit: Int = 1000) async throws -> (released: Int, dead: Int) {
        var (released, dead) = (0, 0)
        for bucket in 0..<(try await bucketCount()) {
            let rows = try await pool.query(
                OutboxStatements.reapExpiredLeases,
                [now.epochText, String(limit), workerID, String(bucket)]
            )
            let r = rows.firstReader
            let (back, gone) = (r.int("released") ?? 0, r.int("dead") ?? 0)
            // Their users after the jobs, in a statement of its own: it must see them no longer running.
            if back + gone > 0 { try await freeStrayRecipients(bucket: bucket) }
            (released, dead) = (released + back, dead + gone)
        }
        return (released, dead)
    }

    /// Frees recipients held with no job of theirs running (see
    /// ``OutboxStatements/freeStrayRecipients``), in every bucket. Returns how many.
    @discardableResult
    package func freeStrayRecipients() async throws -> Int {
        var freed = 0
        for bucket in 0..<(try await bucketCount()) { freed += try await freeStrayRecipients(bucket: bucket) }
        return freed
    }

    @discardableResult
    private func freeStrayRecipients(bucket: Int) async throws -> Int {
        try await pool.query(OutboxStatements.freeStrayRecipients, [String(bucket)]).scalar.flatMap { Int($0) } ?? 0
    }

    /// Hands every job this worker holds back to `pending`, refunding the attempt.
    @discardableResult
    package func releaseOwned() async throws -> Int {
        try await pool.query(OutboxStatements.releaseOwned, [workerID]).scalar.flatMap { Int($0) } ?? 0
    }
}

/// Whether this worker's next claim walks the apps' scopes (``OutboxStatements/claimWithScopeTurns``)
/// and, if so, where each app's walk starts. While an app has several scopes pending, every claim
/// walks (and its `l` rows say whether that is still so), and it goes on walking for
/// ``lingerFor`` after the last walk that found several; otherwise (one scope per app, the common
/// case, where turns change nothing) the plain claim runs, which costs less, and every
/// ``lookEvery`` ``OutboxStatements/appsWithSeveralScopes`` looks again.
///
/// Why it lingers: a scope sending a trickle beside another's flood has its jobs claimed as soon
/// as they are due, so most walks find it empty. Stopping at the first such walk put the
/// trickle's next job behind the flood until the next look (p99 1.5–3 s in the benchmark).
private final class ScopeCursor: Sendable {
    /// How often a worker whose apps have one scope pending each looks again: two index probes
    /// per app, the longest a newly busy scope waits behind another's flood.
    static let lookEvery: Duration = .milliseconds(250)
    /// How long claims keep walking after the last walk that found an app with several scopes.
    static let lingerFor: Duration = .seconds(5)

    /// One bucket's: each bucket's scopes are walked, looked at and lingered on apart.
    private struct State {
        var scopes: [String: String] = [:]
        var lastLook: ContinuousClock.Instant?
        /// Claims walk until then: ``lingerFor`` after a walk or a look last found an app with
        /// several scopes pending.
        var walkUntil: ContinuousClock.Instant?

        func walking(at now: ContinuousClock.Instant) -> Bool { walkUntil.map { now < $0 } ?? false }
    }
    private let state = Mutex([Int: State]())

    /// Whether to look for apps with several scopes before this claim of `bucket`.
    func lookNow(bucket: Int) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { buckets in
            let s = buckets[bucket] ?? State()
            if s.walking(at: now) { return false }
            if let last = s.lastLook, now - last < Self.lookEvery { return false }
            buckets[bucket, default: State()].lastLook = now
            return true
        }
    }

    /// What a look found: the apps with several scopes pending.
    func found(_ apps: [String], bucket: Int) {
        guard !apps.isEmpty else { return }
        let now = ContinuousClock.now
        state.withLock { $0[bucket, default: State()].walkUntil = now + Self.lingerFor }
    }

    /// The cursor to bind (a JSON object, app id → scope) when this claim walks; nil when not.
    func walk(bucket: Int) -> String? {
        let now = ContinuousClock.now
        let scopes: [String: String]? = state.withLock { buckets in
            guard let s = buckets[bucket], s.walking(at: now) else { return nil }
            return s.scopes
        }
        guard let scopes else { return nil }
        guard !scopes.isEmpty, let data = try? JSONEncoder().encode(scopes) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// What a walk found: per app with pending jobs, where it ended and how many scopes it walked.
    func walked(_ apps: [(app: String, scope: String, scopes: Int)], bucket: Int) {
        let now = ContinuousClock.now
        state.withLock { buckets in
            var s = buckets[bucket] ?? State()
            for walk in apps { s.scopes[walk.app] = walk.scope }
            if apps.contains(where: { $0.scopes > 1 }) { s.walkUntil = now + Self.lingerFor }
            buckets[bucket] = s
        }
    }
}

/// Which bucket a worker claims from next, and which it holds batches of (migration 0015).
///
/// Each worker starts at a random bucket, so replicas spread over them; after a claim that gave
/// jobs the next starts at the following bucket, so one bucket's backlog does not keep a worker
/// from the others. Lease extension visits only the buckets it holds batches of.
private final class BucketRotation: Sendable {
    private struct State {
        var count: Int?
        var next: Int = .random(in: 0..<1024)
        var held: [Int: Int] = [:]
    }
    private let state = Mutex(State())

    var count: Int? { state.withLock { $0.count } }

    func setCount(_ n: Int) { state.withLock { $0.count = n } }

    /// The bucket the next claim starts at.
    func next() -> Int { state.withLock { $0.next % ($0.count ?? 1) } }

    /// A claim of `bucket` gave a batch: the next claim starts after it.
    func claimed(_ bucket: Int) {
        state.withLock {
            $0.held[bucket, default: 0] += 1
            $0.next = bucket + 1
        }
    }

    /// A batch of `bucket` was acknowledged.
    func settled(_ bucket: Int) {
        state.withLock {
            let left = ($0.held[bucket] ?? 1) - 1
            $0.held[bucket] = left > 0 ? left : nil
        }
    }

    /// The buckets this worker holds batches of.
    func held() -> [Int] { state.withLock { $0.held.keys.sorted() } }
}
