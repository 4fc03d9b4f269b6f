import Dispatcher
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

    package init(pool: PostgresPool, workerID: String) {
        self.pool = pool
        self.workerID = workerID
    }

    /// A claimed batch with everything the dispatcher needs about it.
    package struct Batch: Sendable {
        package var jobs: [Job]
        /// Per recipient: preferences, presence, active devices, recent sends, backlog, open summaries.
        package var recipients: [String: RecipientContext]
        package var categories: [String: CategoryRules]
        /// Unread inbox rows per recipient (the badge before this batch).
        package var unread: [String: Int]
        /// The oldest due time in the batch (epoch s), for the lag metric.
        package var oldestRunAt: Double?

        /// Active devices per recipient.
        package var devices: [String: [Device]] { recipients.mapValues(\.devices) }
    }

    /// Claims up to `limit` due jobs and leases them for `lease` seconds from `now`, with their
    /// recipients' context, in one statement (see ``OutboxStatements/claim``).
    /// - Parameter through: the least urgent priority to claim (`.critical` for the critical lane).
    package func claim(limit: Int, lease: Double, now: Double, through: Priority = .low) async throws -> Batch {
        let rows = try await pool.query(
            OutboxStatements.claim, [workerID, String(now), String(lease), String(limit), String(through.rawValue)])
        var jobs: [(job: Job, runAt: Double)] = []
        jobs.reserveCapacity(limit)
        var devices: [String: [Device]] = [:]
        var preferences: [String: String] = [:]
        var presence: [String: Set<String>] = [:]
        var sends: [String: [RecentSend]] = [:]
        var backlog: [String: [String: Int]] = [:]
        var summaries: [String: [SummaryKey: Double]] = [:]
        var batch = Batch(jobs: [], recipients: [:], categories: [:], unread: [:])
        for row in rows.rows {
            let r = RowReader(row)
            switch r.string(0) {
            case "j":
                let runAt = r.double(24) ?? 0
                jobs.append((Self.job(r), runAt))
                batch.oldestRunAt = min(batch.oldestRunAt ?? runAt, runAt)
            case "d":
                if let device = Self.device(r) { devices[device.userID, default: []].append(device) }
            case "c":
                let rules = Self.category(r)
                batch.categories[rules.name] = rules
            case "p":
                if let user = r.string(1) { preferences[user] = r.string(2) ?? "{}" }
            case "r":
                if let user = r.string(1), let context = r.string(2) { presence[user, default: []].insert(context) }
            case "s":
                if let user = r.string(1), let packed = r.string(2) { sends[user] = Self.recentSends(packed) }
            case "u":
                if let user = r.string(1) { batch.unread[user] = r.int(2) ?? 0 }
            case "b":
                if let user = r.string(1), let category = r.string(2) { backlog[user, default: [:]][category] = r.int(3) ?? 0 }
            case "o":
                if let user = r.string(1), let category = r.string(2), let key = r.string(3), let due = r.double(4) {
                    summaries[user, default: [:]][SummaryKey(category: category, key: key)] = due
                }
            default:
                continue
            }
        }
        // Claim order (priority, due time, id): the dispatcher decides, and the consumer sends,
        // each recipient's jobs in this order.
        jobs.sort { ($0.job.priority, $0.runAt, $0.job.id) < ($1.job.priority, $1.runAt, $1.job.id) }
        for (job, _) in jobs where batch.recipients[job.userID] == nil {
            let user = job.userID
            batch.recipients[user] = RecipientContext(
                userID: user, preferences: preferences[user].map(Self.preferences) ?? Preferences(),
                presence: presence[user] ?? [], devices: devices[user] ?? [],
                recentSends: sends[user] ?? [], pending: backlog[user] ?? [:],
                openSummaries: summaries[user] ?? [:])
        }
        batch.jobs = jobs.map(\.job)
        return batch
    }

    private static let parsedPreferences = Mutex<[String: Preferences]>([:])

    /// Parses a preferences document, remembering recent ones: the same users come back batch
    /// after batch, and parsing was the policy engine's largest CPU cost. Bounded: the cache is
    /// emptied when it passes 50,000 documents.
    static func preferences(_ json: String) -> Preferences {
        if let cached = parsedPreferences.withLock({ $0[json] }) { return cached }
        let parsed = Preferences(json: json)
        parsedPreferences.withLock { cache in
            if cache.count >= 50_000 { cache.removeAll(keepingCapacity: true) }
            cache[json] = parsed
        }
        return parsed
    }

    /// Unpacks a recipient's send history (see the claim's `s` rows), oldest first.
    ///
    /// Splits on UTF-8 bytes (U+001E between sends, U+001F between fields): splitting the
    /// `String` by `Character` cost more than the rest of the policy engine.
    static func recentSends(_ packed: String) -> [RecentSend] {
        var sends: [RecentSend] = []
        var packed = packed
        packed.withUTF8 { bytes in
            var start = 0
            func field(_ end: Int) -> String {
                String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            }
            var parts: [String] = []
            parts.reserveCapacity(4)
            for i in 0...bytes.count {
                let byte: UInt8 = i < bytes.count ? bytes[i] : 0x1E
                guard byte == 0x1E || byte == 0x1F else { continue }
                parts.append(field(i))
                start = i + 1
                if byte == 0x1E {
                    if parts.count == 4, let at = Double(parts[3]) {
                        sends.append(RecentSend(
                            at: at, category: parts[0], scope: parts[2].isEmpty ? nil : parts[2],
                            coalesceKey: parts[1].isEmpty ? nil : parts[1]))
                    }
                    parts.removeAll(keepingCapacity: true)
                }
            }
        }
        return sends.reversed()
    }

    private static func job(_ r: RowReader) -> Job {
        let summaryKey = r.string(25)
        var geo: GeoPoint?
        if let lat = r.double(27), let lon = r.double(28) { geo = GeoPoint(lat: lat, lon: lon) }
        let inputs = PolicyInputs(
            deliverAt: r.double(32), geo: geo,
            requires: r.string(29).map { [String: JSONValue].parsing($0) } ?? [:], scope: r.string(30),
            coalesceKey: summaryKey ?? r.string(31), isSummary: summaryKey != nil)
        return Job(
            id: r.int64(1) ?? 0, userID: r.string(2) ?? "", category: r.string(3) ?? "",
            priority: Priority(rawValue: r.int(4) ?? 2) ?? .normal,
            payload: Job.Payload(
                title: r.string(10) ?? "", body: r.string(11) ?? "", subtitle: r.string(12), route: r.string(13),
                metadataJSON: r.string(14), eventType: r.string(15), imageURL: r.string(16), sound: r.string(17),
                threadID: r.string(18), sentAtIso: r.string(34), actionsJSON: r.string(35),
                localized: r.string(39).map { LocalizedText.variants(JSONValue(parsing: $0)) } ?? [:]),
            options: Job.Options(
                collapseID: r.string(19), silent: r.string(20).map { $0 == "true" }, dedupKey: r.string(21),
                context: r.string(22), mandatory: r.string(23).map { $0 == "true" }, excludeDevice: r.int64(33),
                traceparent: r.string(40)),
            attempt: r.int(5) ?? 1, maxAttempts: r.int(6) ?? 1,
            acceptedDevices: Set(PostgresArray.decodeInt64s(r.string(9))),
            createdAt: r.double(7) ?? 0, expiresAt: r.double(8) ?? 0, inputs: inputs,
            summaryCount: r.int(26) ?? 0, alertedAt: r.double(36), summarized: summarizedItems(r.string(37), r.string(38)))
    }

    /// A summary's folded jobs: ids as a PostgreSQL array, titles as a JSON array, both newest first.
    private static func summarizedItems(_ ids: String?, _ titles: String?) -> [Job.SummarizedItem] {
        guard let ids, ids != "{}" else { return [] }
        let titles = titles.flatMap { JSONValue(parsing: $0) }.map { value -> [String] in
            guard case .array(let items) = value else { return [] }
            return items.map { $0.string ?? "" }
        } ?? []
        return PostgresArray.decodeInt64s(ids).enumerated().map { i, id in
            Job.SummarizedItem(id: id, title: i < titles.count ? titles[i] : "")
        }
    }

    private static func device(_ r: RowReader) -> Device? {
        guard let id = r.int64(1), let user = r.string(2), let kind = r.string(3).flatMap(ProviderKind.init(rawValue:)),
            let token = r.string(4)
        else { return nil }
        return Device(
            id: id, userID: user, provider: kind, token: token, appID: r.string(5) ?? "default",
            environment: r.string(6) ?? "production", p256dh: r.string(7), auth: r.string(8), locale: r.string(9),
            timeZone: r.string(10), attributesJSON: r.string(11) ?? "{}", registeredAt: r.double(12) ?? 0)
    }

    private static func category(_ r: RowReader) -> CategoryRules {
        let name = r.string(1) ?? ""
        let mandatory = r.bool(4) ?? false
        return CategoryRules(
            name: name, appID: r.string(2) ?? "default",
            priority: r.string(3).flatMap(Priority.init(name:)) ?? .normal, mandatory: mandatory,
            retry: RetryStrategy(base: r.double(5) ?? 2, cap: r.double(6) ?? 600, maxAttempts: r.int(7) ?? 5),
            sound: r.string(8), interruptionLevel: r.string(9), apnsCategory: r.string(10),
            androidChannel: r.string(11), defaultRoute: r.string(12), silent: r.bool(13) ?? false,
            previewChars: r.int(18),
            policy: CategoryPolicy(
                name: name, mandatory: mandatory, optIn: r.bool(14) ?? false, quietHours: r.string(15) ?? "defer",
                coalesceJSON: r.string(16) ?? "{}", rateLimitJSON: r.string(17) ?? "{}"),
            deadline: r.double(19))
    }

    /// Stores a batch's settlements in one statement; returns how many jobs were still ours.
    ///
    /// `jobs` gives each settled job's recipient and category for the delivery log.
    @discardableResult
    package func acknowledge(_ settlements: [Settlement], jobs: [Job]) async throws -> Int {
        guard !settlements.isEmpty else { return 0 }
        var owners: [Int64: (user: String, category: String)] = [:]
        owners.reserveCapacity(jobs.count)
        for job in jobs { owners[job.id] = (job.userID, job.category) }
        var ids: [Int64] = [], states: [String?] = [], runAts: [Double?] = [], errors: [String?] = []
        var refunds: [Bool] = []
        var accJobs: [Int64] = [], accDevices: [Int64] = []
        var deadIDs: [Int64] = [], deadErrors: [String?] = [], alertIDs: [Int64] = []
        var lJob: [Int64] = [], lUser: [String?] = [], lCategory: [String?] = [], lDevice: [Int64?] = []
        var lProvider: [String?] = [], lEvent: [String?] = [], lOutcome: [String?] = [], lStatus: [String?] = []
        var lReason: [String?] = [], lAttempt: [Int64] = [], lLatency: [Double?] = []
        var disableIDs: [Int64] = [], disableReasons: [String?] = []
        var iJob: [Int64] = [], iUser: [String?] = [], iCategory: [String?] = [], iTitle: [String?] = []
        var iBody: [String?] = [], iRoute: [String?] = [], iMetadata: [String?] = [], iKey: [String?] = []
        var iScope: [String?] = [], iCount: [Int64] = []
        var fJob: [Int64] = [], fKey: [String?] = [], fDue: [Double?] = []
        for s in settlements {
            ids.append(s.jobID)
            states.append(s.state.rawValue)
            runAts.append(s.runAt)
            errors.append(s.error)
            refunds.append(s.refundAttempt)
            if s.state == .dead {
                deadIDs.append(s.jobID)
                deadErrors.append(s.error)
            }
            if s.alert { alertIDs.append(s.jobID) }
            for d in s.accepted {
                accJobs.append(s.jobID)
                accDevices.append(d)
            }
            let owner = owners[s.jobID]
            for l in s.logs {
                lJob.append(l.jobID)
                lUser.append(owner?.user ?? "")
                lCategory.append(owner?.category ?? "")
                lDevice.append(l.deviceID)
                lProvider.append(l.provider)
                lEvent.append(l.event.rawValue)
                lOutcome.append(l.outcome?.rawValue)
                lStatus.append(l.status.rawValue)
                lReason.append(l.reason)
                lAttempt.append(Int64(l.attempt))
                lLatency.append(l.latencyMs)
            }
            for d in s.disable {
                disableIDs.append(d.deviceID)
                disableReasons.append(d.reason)
            }
            if let entry = s.inbox {  // a delivered job, or a fallback shown in the notification center
                iJob.append(s.jobID)
                iUser.append(owner?.user ?? "")
                iCategory.append(owner?.category ?? "")
                iTitle.append(entry.title)
                iBody.append(entry.body)
                iRoute.append(entry.route)
                iMetadata.append(entry.metadataJSON)
                iKey.append(entry.coalesceKey)
                iScope.append(entry.scope)
                iCount.append(Int64(entry.summaryCount))
            }
            if s.state == .summarized, let fold = s.fold {
                fJob.append(s.jobID)
                fKey.append(fold.key)
                fDue.append(fold.dueAt)
            }
        }
        let binds: [String?] = [
            workerID, PostgresArray.encode(ids), PostgresArray.encode(states), PostgresArray.encode(runAts),
            PostgresArray.encode(errors), PostgresArray.encode(refunds),
            PostgresArray.encode(accJobs), PostgresArray.encode(accDevices),
            PostgresArray.encode(deadIDs), PostgresArray.encode(deadErrors), PostgresArray.encode(alertIDs),
            PostgresArray.encode(lJob), PostgresArray.encode(lUser), PostgresArray.encode(lCategory),
            PostgresArray.encode(lDevice), PostgresArray.encode(lProvider), PostgresArray.encode(lEvent),
            PostgresArray.encode(lOutcome), PostgresArray.encode(lStatus), PostgresArray.encode(lReason),
            PostgresArray.encode(lAttempt), PostgresArray.encode(lLatency),
            PostgresArray.encode(disableIDs), PostgresArray.encode(disableReasons),
            PostgresArray.encode(iJob), PostgresArray.encode(iUser), PostgresArray.encode(iCategory),
            PostgresArray.encode(iTitle), PostgresArray.encode(iBody), PostgresArray.encode(iRoute),
            PostgresArray.encode(iMetadata), PostgresArray.encode(iKey), PostgresArray.encode(iScope),
            PostgresArray.encode(iCount),
            PostgresArray.encode(fJob), PostgresArray.encode(fKey), PostgresArray.encode(fDue),
        ]
        let rows = try await pool.query(OutboxStatements.acknowledge, binds)
        return rows.scalar.flatMap { Int($0) } ?? 0
    }

    /// Extends every lease this worker holds to `now + lease`; returns how many.
    @discardableResult
    package func extendLeases(lease: Double, now: Double) async throws -> Int {
        try await pool.query(OutboxStatements.extendLeases, [workerID, String(now), String(lease)]).affected
    }

    /// Returns expired leases to `pending` (or dead letters when it was the last attempt).
    package func reapExpiredLeases(now: Double, limit: Int = 1000) async throws -> (released: Int, dead: Int) {
        let rows = try await pool.query(OutboxStatements.reapExpiredLeases, [String(now), String(limit), workerID])
        let r = RowReader(rows.first ?? [])
        let (released, dead) = (r.int(0) ?? 0, r.int(1) ?? 0)
        // Their users after the jobs, in a statement of its own: it must see them no longer running.
        if released + dead > 0 { try await freeStrayRecipients() }
        return (released, dead)
    }

    /// Frees recipients held with no job of theirs running (see
    /// ``OutboxStatements/freeStrayRecipients``). Returns how many.
    @discardableResult
    package func freeStrayRecipients() async throws -> Int {
        try await pool.query(OutboxStatements.freeStrayRecipients).scalar.flatMap { Int($0) } ?? 0
    }

    /// Hands every job this worker holds back to `pending`, refunding the attempt.
    @discardableResult
    package func releaseOwned() async throws -> Int {
        try await pool.query(OutboxStatements.releaseOwned, [workerID]).scalar.flatMap { Int($0) } ?? 0
    }
}
