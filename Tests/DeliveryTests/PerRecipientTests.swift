import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Logging
import ProviderSimulator
import Providers
import Queue
import Synchronization
import Testing

/// Holds every request to a device whose token starts with `slow` until released; answers the
/// others at once, noting them.
final class GateProvider: PushProvider, Sendable {
    let name = "gate"
    private let state = Mutex<(open: Bool, held: Int, sent: [Int64])>((false, 0, []))

    var held: Int { state.withLock { $0.held } }
    var sent: [Int64] { state.withLock { $0.sent } }
    func open() { state.withLock { $0.open = true } }

    func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        if messages.contains(where: { $0.device.token.hasPrefix("slow") }) {
            state.withLock { $0.held += 1 }
            while !state.withLock({ $0.open }) { try? await Task.sleep(for: .milliseconds(10)) }
        }
        state.withLock { $0.sent.append(contentsOf: messages.map(\.jobID)) }
        return messages.map { _ in .accepted }
    }
}

/// One batch at a time holds a recipient (migration 0008, `OutboxStatements.claim`): per-user
/// limits, scope quotas, badges and order stay exact with several `herald run` processes, each
/// with several batches in flight (the defaults), hammering the same users.
@Suite("Per recipient: exact limits, quotas, badges and order across replicas and batches in flight", .serialized)
struct PerRecipientTests {
    static let users = 24
    static let replicas = 4

    /// Seed 004's rate limit (5 per 10 minutes, the rest folded), seed 002's scope quota (10 per
    /// day per organisation, the rest suppressed), and plain messages (seed 000's badge).
    static func seed(_ db: TestDatabase) async throws {
        try await db.addSeedCategory("delay_update", rateLimit: #"{"perUser": {"max": 5, "windowSeconds": 600}}"#)
        try await db.addSeedCategory(
            "announcement",
            rateLimit: #"{"perScope": {"max": 10, "windowSeconds": 86400}, "over": "suppress"}"#
        )
        try await db.addSeedCategory("message")
        try await db.exec(
            "SELECT herald.register_device('u' || g, 'apns', lpad(to_hex(g), 64, 'a')) FROM generate_series(0, \(users - 1)) g"
        )
    }

    /// One user's burst, each job its own statement, back to back: 8 delay updates (seed 004:
    /// the per-user limit counts every notification the user got in the window), then 11
    /// announcements in one scope and 3 messages, interleaved. Returns (job id, category) in order.
    static func burst(_ db: TestDatabase, user: String) async throws -> [(id: Int64, category: String)] {
        var jobs: [(id: Int64, category: String)] = []
        for i in 1...8 {
            jobs.append(
                (
                    try #require(
                        try await db.enqueueJSON(
                            user,
                            "delay_update",
                            payload: #"{"title": "Delay \#(i)", "body": "Line 4 is \#(i) min late"}"#
                        )
                    ),
                    "delay_update"
                )
            )
        }
        for i in 1...11 {
            jobs.append(
                (
                    try #require(
                        try await db.enqueueJSON(
                            user,
                            "announcement",
                            payload: #"{"title": "Announcement \#(i)", "body": "Trust-wide"}"#,
                            options: #"{"scope": "org-1"}"#
                        )
                    ), "announcement"
                )
            )
            if i <= 3 {
                jobs.append(
                    (
                        try #require(
                            try await db.enqueueJSON(
                                user,
                                "message",
                                payload: #"{"title": "Message \#(i)", "body": "Hi"}"#
                            )
                        ), "message"
                    )
                )
            }
        }
        return jobs
    }

    /// Starts `replicas` `herald run` processes with default settings against `db` and the simulator.
    static func startReplicas(_ name: String, _ db: TestDatabase, _ live: LiveSimulator) throws -> [WorkerProcess] {
        var env = live.workerEnvironment
        env["HERALD_DATABASE_URL"] = db.url
        env["HERALD_HTTP_PORT"] = "0"
        env["HERALD_LOG_LEVEL"] = "warning"
        let workers = (0..<replicas).map {
            WorkerProcess(name: "\(name)-\($0)-\(db.name)", environment: env, directory: ChaosTests.logDirectory())
        }
        for w in workers { try w.start() }
        return workers
    }

    /// `perUser` messages to each user, each its own statement: half the users' before the
    /// replicas start (their first claims race for them), the other half's while they run.
    /// Returns each user's job ids in order, and the replicas (`herald run`, named `name`).
    static func messageBursts(
        _ db: TestDatabase,
        _ live: LiveSimulator,
        replicas name: String,
        perUser: Int
    )
        async throws -> (order: [String: [Int64]], workers: [WorkerProcess])
    {
        func burst(_ user: String) async throws -> [Int64] {
            var ids: [Int64] = []
            for i in 1...perUser {
                ids.append(
                    try #require(
                        try await db.enqueueJSON(
                            user,
                            "message",
                            payload: #"{"title": "Message \#(i)", "body": "Hi"}"#
                        )
                    )
                )
            }
            return ids
        }
        let early = users / 2
        var order: [String: [Int64]] = [:]
        for u in 0..<early { order["u\(u)"] = try await burst("u\(u)") }
        let workers = try startReplicas(name, db, live)
        do {
            try await withThrowingTaskGroup(of: (String, [Int64]).self) { group in
                for u in early..<users { group.addTask { ("u\(u)", try await burst("u\(u)")) } }
                for try await (user, ids) in group { order[user] = ids }
            }
        } catch {
            for w in workers { w.signal(SIGKILL) }
            throw error
        }
        return (order, workers)
    }

    /// Per device token, in the order the simulator accepted them: (job id, badge).
    static func received(_ live: LiveSimulator) -> [String: [(job: Int64, badge: Int)]] {
        var byToken: [String: [(job: Int64, badge: Int)]] = [:]
        for record in live.records.records(provider: "apns") {
            let job = Int64(record.headers["apns-collapse-id"]?.dropFirst("herald-".count) ?? "") ?? -1
            let object = try? JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any]
            let badge = (object?["aps"] as? [String: Any])?["badge"] as? Int ?? -1
            byToken[record.token, default: []].append((job, badge))
        }
        return byToken
    }

    /// With four buckets (migration 0015) every claim keeps to one and the replicas rotate.
    @Test(
        "4 herald run × 4 batches in flight, bursts to the same 24 users: 5 of 8 rate-limited, 10 of 11 in quota, badges 1…18, each user's pushes in order; with one bucket, and with four and a full history (2 earlier announcements that 150 later messages pushed out of the recipient row's newest 100: 8 of 11 in quota)",
        arguments: [1, 4]
    )
    func exactUnderConcurrency(buckets: Int) async throws {
        try await TestDatabase.withFresh(buckets: buckets) { db in
            try await LiveSimulator.with { live in
                try await Self.seed(db)
                // With four buckets every user also has a day of history the row cannot hold
                // whole: every claim of them reads their window from the inbox as well.
                let earlier = buckets == 4 ? 2 : 0
                if earlier > 0 {
                    try await db.exec(
                        """
                        INSERT INTO herald.inbox (user_id, category, title, body, scope, created_at, read_at)
                        SELECT 'u' || u, 'announcement', 'Earlier', 'Trust-wide', 'org-1',
                               now() - interval '3 hours' - g * interval '1 second', now()
                        FROM generate_series(0, \(Self.users - 1)) u, generate_series(1, \(earlier)) g;
                        INSERT INTO herald.inbox (user_id, category, title, body, created_at, read_at)
                        SELECT 'u' || u, 'message', 'Earlier', 'Hi', now() - interval '1 hour' - g * interval '1 second', now()
                        FROM generate_series(0, \(Self.users - 1)) u, generate_series(1, 150) g
                        """
                    )
                    #expect(
                        try await db.int(
                            "SELECT count(*)::int FROM herald.recipients r, unnest(r.sends) s WHERE s.category = 'announcement'"
                        ) == 0
                    )
                }
                // Half the users' bursts wait in the queue before the workers start (every
                // replica's first claims race for them); the other half arrive while they run.
                let early = Self.users / 2
                var order: [String: [(id: Int64, category: String)]] = [:]
                for u in 0..<early { order["u\(u)"] = try await Self.burst(db, user: "u\(u)") }

                let workers = try Self.startReplicas("recipient", db, live)
                defer { for w in workers { w.signal(SIGKILL) } }

                try await withThrowingTaskGroup(of: (String, [(id: Int64, category: String)]).self) { group in
                    for u in early..<Self.users {
                        group.addTask { ("u\(u)", try await Self.burst(db, user: "u\(u)")) }
                    }
                    for try await (user, ids) in group { order[user] = ids }
                }
                let perUser = 5 + (10 - earlier) + 3
                let settled = try await waitUntil(.seconds(120)) {
                    try await db.int("SELECT count(*) FROM herald.outbox WHERE summary_key IS NULL") == 0
                        && live.records.acceptedCount(provider: "apns") >= Self.users * perUser
                }
                #expect(settled, "every job decided; \(live.records.acceptedCount(provider: "apns")) pushes")
                try await Task.sleep(for: .milliseconds(500))  // nothing more may arrive
                for w in workers { await w.stop() }

                let received = Self.received(live)
                for u in 0..<Self.users {
                    let user = "u\(u)"
                    let pushes = received[LiveSimulator.apnsToken(u)] ?? []
                    let burst = order[user] ?? []
                    // The first 5 delay updates and the first 10 announcements went out; the rest
                    // were folded (one summary, due when the window has room) or suppressed.
                    let expected =
                        burst.filter { $0.category == "message" }.map(\.id)
                        + burst.filter { $0.category == "delay_update" }.prefix(5).map(\.id)
                        + burst.filter { $0.category == "announcement" }.prefix(10 - earlier).map(\.id)
                    #expect(pushes.count == perUser, "\(user): \(pushes.count) pushes")
                    if Set(pushes.map(\.job)) != Set(expected) {
                        var story: [String] = []
                        for job in burst {
                            let rows = try await db.rows(
                                "SELECT event, coalesce(reason,''), right(coalesce(worker,''), 10), to_char(created_at, 'SS.US') FROM herald.delivery_log WHERE job_id = \(job.id) ORDER BY id"
                            )
                            story.append(
                                "\(job.id) \(job.category.prefix(3)): \(rows.map { $0.compactMap { $0 }.joined(separator: " ") })"
                            )
                        }
                        story.append("pushed \(pushes.map(\.job))")
                        Issue.record("\(user): the earliest of each limited category: \(story.joined(separator: "; "))")
                    }
                    #expect(pushes.map(\.badge) == Array(1...perUser), "\(user) badges: \(pushes.map(\.badge))")
                    #expect(pushes.map(\.job) == pushes.map(\.job).sorted(), "\(user) order: \(pushes.map(\.job))")
                }
                let decisions = try await db.rows(
                    """
                    SELECT category, event, coalesce(reason, ''), count(*)::text FROM herald.delivery_log
                    WHERE event IN ('summarized', 'suppressed') GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                    """
                )
                #expect(
                    decisions.map { $0.compactMap { $0 } } == [
                        ["announcement", "suppressed", "scope_quota", "\(Self.users * (1 + earlier))"],
                        // Per user: the 6th over the limit opens the summary, the 7th and 8th join it.
                        ["delay_update", "summarized", "rate_limited", "\(Self.users)"],
                        ["delay_update", "summarized", "summary_open", "\(Self.users * 2)"],
                    ]
                )
                let summaries = try await db.rows(
                    "SELECT user_id, summary_count::text FROM herald.outbox WHERE summary_key IS NOT NULL ORDER BY user_id"
                )
                #expect(summaries.count == Self.users, "at most one summary per user and window")
                #expect(summaries.allSatisfy { $0[1] == "3" }, "each holds the 3 folded updates: \(summaries)")
                #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner IS NOT NULL") == 0)
                #expect(try await db.recipientRowDrift() == [], "badges and recent sends as the inbox has them")
                #expect(
                    try await db.int("SELECT count(DISTINCT bucket) FROM herald.recipients") == buckets,
                    "the users spread over every bucket"
                )
            }
        }
    }

    @Test(
        "faults at default settings: 503s and the circuit they open mid-burst, 4 herald run × 4 batches in flight: every device gets each job once, in order"
    )
    func orderThroughFaults() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await Self.seed(db)
                // The first 40 APNs requests fail, spread over 4 replicas whose circuits each open
                // after 20 failures in a row: failures that stand (an attempt spent), maybe a
                // hand-back of an open circuit, and later jobs held back behind a retry all happen.
                // No job may spend its 5 attempts on them (the backoff keeps them 15 s apart).
                _ = try live.simulator.faults.add(
                    FaultRule(provider: "apns", status: 503, reason: "ServiceUnavailable", remaining: 40)
                )
                let perUser = 10
                let (order, workers) = try await Self.messageBursts(db, live, replicas: "ordered", perUser: perUser)
                defer { for w in workers { w.signal(SIGKILL) } }
                let drained = try await waitUntil(.seconds(180)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                let left = try await db.rows(
                    "SELECT state, last_error, count(*)::text FROM herald.outbox GROUP BY 1, 2"
                )
                #expect(drained, "left: \(left)")
                #expect(live.simulator.faults.entries.isEmpty, "all 40 faults fired")
                let dead = try await db.rows(
                    """
                    SELECT d.job_id::text, d.attempts::text, d.last_error,
                           (SELECT string_agg(l.event || '/' || coalesce(l.reason, ''), ', ' ORDER BY l.id)
                            FROM herald.delivery_log l WHERE l.job_id = d.job_id)
                    FROM herald.dead_letters d
                    """
                )
                #expect(dead.isEmpty, "dead letters (job, attempts, error, its log): \(dead)")
                #expect(
                    try await db.int("SELECT count(*) FROM herald.delivery_log WHERE reason = 'behind_retry'") > 0,
                    "later jobs waited behind a retry"
                )
                #expect(try await db.recipientRowDrift() == [], "badges and recent sends as the inbox has them")
                let received = Self.received(live)
                for u in 0..<Self.users {
                    let pushes = received[LiveSimulator.apnsToken(u)]?.map(\.job) ?? []
                    #expect(pushes == order["u\(u)"], "u\(u): \(pushes)")
                }
            }
        }
    }

    @Test(
        "a slow provider (40 ms a request) at default settings, 4 herald run × 4 batches in flight: batches give their slot back after their first wave, and every device still gets each job once, in order, badges 1…10"
    )
    func orderWithSlowProvider() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await Self.seed(db)
                // Every APNs answer 40 ms late: a batch's first wave takes longer than
                // `BatchSlot.slowWave`, so a batch with several pushes of a user gives its slot back.
                _ = try live.simulator.faults.add(FaultRule(provider: "apns", latencyMs: 40))
                let perUser = 10
                let (order, workers) = try await Self.messageBursts(db, live, replicas: "slow", perUser: perUser)
                defer { for w in workers { w.signal(SIGKILL) } }
                let drained = try await waitUntil(.seconds(120)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                #expect(drained)
                for w in workers { await w.stop() }
                #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner IS NOT NULL") == 0)
                #expect(try await db.recipientRowDrift() == [], "badges and recent sends as the inbox has them")
                let received = Self.received(live)
                for u in 0..<Self.users {
                    let pushes = received[LiveSimulator.apnsToken(u)] ?? []
                    #expect(pushes.map(\.job) == order["u\(u)"], "u\(u): \(pushes.map(\.job))")
                    #expect(pushes.map(\.badge) == Array(1...perUser), "u\(u) badges: \(pushes.map(\.badge))")
                }
            }
        }
    }

    @Test(
        "a claim's last look before it locks a recipient is fresh: a user another batch took after the claim's snapshot is seen as taken (by turn, and by the row version the snapshot read)"
    )
    func recipientFreeNowIsFresh() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            _ = try await db.enqueueJSON("u0", "message", payload: #"{"title": "Hi", "body": "Hi"}"#)
            #expect(try await db.scalar("SELECT herald.recipient_free_now('u0', 0)") == "t")
            #expect(try await db.scalar("SELECT herald.recipient_free_now('u0', 1)") == "f", "another turn")
            // The claim's form names the bucket (one shard once distributed): only the user's own finds it.
            let bucket = try await db.int("SELECT bucket FROM herald.recipients WHERE user_id = 'u0'")
            #expect(try await db.scalar("SELECT herald.recipient_free_in_bucket(\(bucket)::smallint, 'u0', 0)") == "t")
            #expect(
                try await db.scalar("SELECT herald.recipient_free_in_bucket(\(bucket + 1)::smallint, 'u0', 0)") == "f",
                "another bucket"
            )
            // Today's claim asks whether the row version its snapshot read is still the live one.
            let version = "(SELECT r.ctid FROM herald.recipients r WHERE r.user_id = 'u0')"
            #expect(
                try await db.scalar("SELECT herald.recipient_unchanged_in_bucket(\(bucket)::smallint, \(version))")
                    == "t"
            )
            #expect(
                try await db.scalar("SELECT herald.recipient_unchanged_in_bucket(\(bucket + 1)::smallint, \(version))")
                    == "f",
                "another bucket"
            )
            // A lock alone changes no version: the look passes, and the claim's SKIP LOCKED decides.
            let locked = try await db.rows(
                """
                SELECT (SELECT 1 FROM herald.recipients WHERE user_id = 'u0' FOR UPDATE) IS NOT NULL,
                       herald.recipient_unchanged_in_bucket(\(bucket)::smallint, \(version))
                """
            )
            #expect(locked.first == ["t", "t"], "locked by this statement, unchanged: \(locked)")
            // One statement whose snapshot predates another batch's hold of u0: the snapshot
            // still sees u0 free, the function sees it held.
            let marker = "fresh-look-\(UInt32.random(in: 0...UInt32.max))"
            let statement = Task {
                try await db.rows(
                    """
                    SELECT '\(marker)', pg_sleep(4) IS NULL,
                           (SELECT r.lease_owner IS NULL FROM herald.recipients r WHERE r.user_id = 'u0'),
                           herald.recipient_free_in_bucket(\(bucket)::smallint, 'u0', 0),
                           herald.recipient_unchanged_in_bucket(\(bucket)::smallint, \(version))
                    """
                )
            }
            #expect(
                try await waitUntil(.seconds(30)) {
                    try await db.int(
                        """
                        SELECT count(*) FROM pg_stat_activity
                        WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%\(marker)%pg_sleep%'
                        """
                    ) == 1
                }
            )
            try await db.exec(
                "UPDATE herald.recipients SET lease_owner = 'other-batch', turn = turn + 1 WHERE user_id = 'u0'"
            )
            let row = try #require(try await statement.value.first)
            #expect(row[2] == "t", "the statement's snapshot: free")
            #expect(row[3] == "f", "the fresh look: taken")
            #expect(row[4] == "f", "the version the snapshot read is no longer the live one")
        }
    }

    @Test(
        "a user whose earlier due job another statement has locked (a cancel in flight) is left whole: the claim takes none of its later jobs, and takes them all in order once the lock is gone"
    )
    func lockedEarlierJobLeavesUserWhole() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("bulk")
            for user in ["a", "b"] { try await db.registerDevice(user, "apns", "token-\(user)") }
            let a1 = try #require(try await db.enqueue("a", "bulk"))
            let a2 = try #require(try await db.enqueue("a", "bulk"))
            let b1 = try #require(try await db.enqueue("b", "bulk"))
            // The claim skips a1's row (locked) and locks a's recipient row at a2: a2 must not go
            // before a1.
            try await Self.expectUserALeftWhole(
                db,
                while: "SELECT 1 FROM herald.outbox WHERE id = \(a1) FOR UPDATE",
                claimTakes: b1,
                then: [a1, a2]
            )
        }
    }

    @Test(
        "a user whose middle due job another statement has locked (a cancel in a backend's transaction that rolls back) is left whole: the claim does not take the jobs on either side of it"
    )
    func lockedMiddleJobLeavesUserWhole() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("bulk")
            for user in ["a", "b"] { try await db.registerDevice(user, "apns", "token-\(user)") }
            let a1 = try #require(try await db.enqueue("a", "bulk"))
            let a2 = try #require(try await db.enqueue("a", "bulk", options: #"{"dedupKey": "listing-7"}"#))
            let a3 = try #require(try await db.enqueue("a", "bulk"))
            let b1 = try #require(try await db.enqueue("b", "bulk"))
            // The backend cancels a2 in its own transaction and has not committed. The scan locks
            // a's recipient row at a1 and reads a2 and a3; a2's row is locked, so it is skipped
            // when the job rows are taken: a3 must not go before it.
            try await Self.expectUserALeftWhole(
                db,
                while: "SELECT herald.cancel('listing-7')",
                claimTakes: b1,
                then: [a1, a2, a3]
            )
        }
    }

    /// While another transaction has run `lock` (uncommitted), a claim takes only `other` and
    /// leaves user a whole (its jobs pending, its row free); after that transaction rolls back,
    /// the next claim takes a's `jobs` in order.
    static func expectUserALeftWhole(
        _ db: TestDatabase,
        while lock: String,
        claimTakes other: Int64,
        then jobs: [Int64]
    )
        async throws
    {
        try await db.pool.withConnection { c in
            try await c.execute("BEGIN; \(lock)", name: "test")
            let claim = try await db.outbox().claim(limit: 10, lease: .seconds(60), now: Date() + 1)
            #expect(claim.jobs.map(\.id) == [other])
            #expect(
                try await db.int("SELECT count(*) FROM herald.outbox WHERE user_id = 'a' AND state = 'pending'")
                    == jobs.count
            )
            #expect(try await isFree(db, "a"))
            try await c.execute("ROLLBACK", name: "test")
        }
        try await expectNextClaim(db, takes: jobs)
    }

    /// Whether `user`'s recipient row is held by no batch.
    static func isFree(_ db: TestDatabase, _ user: String) async throws -> Bool {
        try await db.int("SELECT count(*) FROM herald.recipients WHERE user_id = '\(user)' AND lease_owner IS NULL")
            == 1
    }

    /// A claim by another worker takes exactly `jobs`, in that order.
    static func expectNextClaim(_ db: TestDatabase, takes jobs: [Int64]) async throws {
        let next = try await db.outbox("other").claim(limit: 10, lease: .seconds(60), now: Date() + 1)
        #expect(next.jobs.map(\.id) == jobs)
    }

    @Test(
        "a recipient row another claim locked and left (not held) comes free while this claim's scan is between two of that user's jobs: the claim leaves the user whole instead of taking the later job"
    )
    func strayLockFreedMidScan() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("bulk")
            try await db.registerDevice("a", "apns", "token-a")
            let a1 = try #require(try await db.enqueue("a", "bulk"))
            // 100,000 jobs between a's two, of users a batch elsewhere holds: the scan passes
            // them one recipient probe at a time (a second or more here) and takes none.
            try await db.exec(
                "SELECT herald.enqueue_many(ARRAY(SELECT 'o' || g FROM generate_series(1, 100000) g), 'bulk', '{\"title\": \"T\", \"body\": \"B\"}')"
            )
            let a2 = try #require(try await db.enqueue("a", "bulk"))
            try await db.exec("UPDATE herald.recipients SET lease_owner = 'elsewhere' WHERE user_id <> 'a'")
            let marker = "stray-\(UInt32.random(in: 0...UInt32.max))"
            var freedMidScan = false
            var taken: [Int64] = []
            try await db.pool.withConnection { c in
                // Another claim's lock on a's row, as when its batch left a out (the apps' turns).
                try await c.execute(
                    "BEGIN; SELECT 1 FROM herald.recipients WHERE user_id = 'a' FOR UPDATE",
                    name: "test"
                )
                let claim = Task {
                    try await db.outbox("claimer-\(marker)").claim(limit: 10, lease: .seconds(60), now: Date() + 1).jobs
                        .map(\.id)
                }
                let active =
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%lane_users AS MATERIALIZED%' AND pid <> pg_backend_pid()"
                #expect(try await waitUntil(.seconds(30), poll: .milliseconds(10)) { try await db.int(active) == 1 })
                // Past its planning and a1, the first job its scan meets; far from a2.
                try await Task.sleep(for: .milliseconds(100))
                try await c.execute("COMMIT", name: "test")
                freedMidScan = try await db.int(active) == 1
                taken = try await claim.value
            }
            #expect(freedMidScan, "the lock went while the claim was still scanning")
            #expect(taken.isEmpty, "a2 without a1: \(taken)")
            #expect(try await Self.isFree(db, "a"))
            try await Self.expectNextClaim(db, takes: [a1, a2])
        }
    }

    @Test(
        "kill -9 a replica holding users (default lease): nobody takes them until the lease expires, then they come back and everything is delivered; with one bucket and with four",
        arguments: [1, 4]
    )
    func killedReplicaReturnsItsRecipients(buckets: Int) async throws {
        try await TestDatabase.withFresh(buckets: buckets) { db in
            try await LiveSimulator.with { live in
                try await Self.seed(db)
                // Slow answers keep the first batches in flight while the replica dies.
                _ = try live.simulator.faults.add(FaultRule(provider: "apns", latencyMs: 3_000))
                var env = live.workerEnvironment
                env["HERALD_DATABASE_URL"] = db.url
                env["HERALD_HTTP_PORT"] = "0"
                env["HERALD_LOG_LEVEL"] = "warning"
                let victim = WorkerProcess(
                    name: "victim-\(db.name)",
                    environment: env,
                    directory: ChaosTests.logDirectory()
                )
                let survivor = WorkerProcess(
                    name: "survivor-\(db.name)",
                    environment: env,
                    directory: ChaosTests.logDirectory()
                )
                defer { for w in [victim, survivor] { w.signal(SIGKILL) } }
                // Queued before the victim starts, so its first claim takes every user at once (queued
                // while it ran, they could spread over more batches than it has slots, and the first
                // batches free their users before the last are claimed).
                for u in 0..<Self.users {
                    _ = try await db.enqueueJSON("u\(u)", "message", payload: #"{"title": "First", "body": "Hi"}"#)
                }
                try victim.start()
                #expect(
                    try await waitUntil(.seconds(30)) {
                        try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner LIKE 'victim-%'")
                            == Self.users
                    }
                )
                victim.signal(SIGKILL)
                _ = await victim.wait(timeout: .seconds(10))
                let killedAt = ContinuousClock.now
                // Work for the same users arrives; the survivor starts with the provider fast again.
                live.simulator.faults.clear()
                for u in 0..<Self.users {
                    _ = try await db.enqueueJSON("u\(u)", "message", payload: #"{"title": "Second", "body": "Hi"}"#)
                }
                try survivor.start()
                try await Task.sleep(for: .seconds(5))
                #expect(
                    try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner LIKE 'victim-%'")
                        == Self.users,
                    "the dead replica's users stay held until their lease expires"
                )
                #expect(
                    try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'pending'") == Self.users,
                    "their new jobs wait"
                )

                let drained = try await waitUntil(.seconds(120)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                #expect(drained)
                #expect(ContinuousClock.now - killedAt >= .seconds(55), "not before the 60 s lease ran out")
                await survivor.stop()
                #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner IS NOT NULL") == 0)
                // Every job reached its device; the first ones (cut short by the kill) at least once,
                // and each user's first before its second.
                let received = Self.received(live)
                for u in 0..<Self.users {
                    let pushes = received[LiveSimulator.apnsToken(u)] ?? []
                    #expect(Set(pushes.map(\.job)).count == 2, "u\(u): \(pushes.map(\.job))")
                    #expect(pushes.last?.job == pushes.map(\.job).max(), "u\(u): the second job last")
                }
            }
        }
    }

    /// Runs a consumer with a critical lane (batches of one, `inFlight` of them per lane) and the
    /// listener that wakes it, both over `db`, while `body` drives them; cancels them after.
    static func withLane(
        _ db: TestDatabase,
        provider: GateProvider,
        inFlight: Int,
        _ body: () async throws -> Void
    ) async throws {
        let wakeup = Wakeup()
        let critical = Wakeup()
        var configuration = OutboxConsumer.Configuration()
        configuration.batchSize = 1
        configuration.maxInFlightBatches = inFlight
        let consumer = OutboxConsumer(
            outbox: db.outbox(),
            providers: ProviderRegistry([.apns: provider]),
            wakeup: wakeup,
            critical: critical,
            configuration: configuration,
            logger: TestDatabase.logger
        )
        let listener = PostgresListener(
            pool: db.pool,
            channel: "herald_outbox",
            wakeup: wakeup,
            critical: critical,
            logger: TestDatabase.logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await listener.run() }
            group.addTask { try await consumer.run() }
            try await body()
            group.cancelAll()
        }
    }

    @Test(
        "the critical lane: with every batch slot, and a critical batch, held by a provider that does not answer, critical jobs still go out"
    )
    func criticalLaneBesideBusySlots() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("bulk")
            try await db.addCategory("alarm", priority: "critical")
            for u in 0..<4 { try await db.registerDevice("slow-\(u)", "apns", "slow-token-\(u)") }
            try await db.registerDevice("rider", "apns", "fast-token")
            try await db.registerDevice("slow-crit", "apns", "slow-token-crit")
            let provider = GateProvider()
            // Four batches of one: every slot busy.
            try await Self.withLane(db, provider: provider, inFlight: 4) {
                for u in 0..<4 { _ = try await db.enqueue("slow-\(u)", "bulk") }
                #expect(try await waitUntil(.seconds(10)) { provider.held == 4 }, "all four slots wait on the provider")
                let alarm = try #require(try await db.enqueue("rider", "alarm"))
                #expect(
                    try await waitUntil(.seconds(10)) { provider.sent.contains(alarm) },
                    "sent beside the busy slots"
                )
                #expect(provider.held == 4 && provider.sent == [alarm])
                // A critical job whose provider does not answer holds one lane batch; the next
                // critical job (another user) still goes out beside it.
                let stuck = try #require(try await db.enqueue("slow-crit", "alarm"))
                #expect(try await waitUntil(.seconds(10)) { provider.held == 5 }, "the lane's first batch waits")
                let second = try #require(try await db.enqueue("rider", "alarm"))
                #expect(
                    try await waitUntil(.seconds(10)) { provider.sent.contains(second) },
                    "not behind the stuck one"
                )
                #expect(provider.sent == [alarm, second] && provider.held == 5)
                provider.open()
                #expect(try await waitUntil(.seconds(10)) { provider.sent.contains(stuck) })
                #expect(
                    try await waitUntil(.seconds(10)) { try await db.int("SELECT count(*) FROM herald.outbox") == 0 }
                )
            }
        }
    }

    @Test(
        "batch slots beside a critical lane leave users with a due critical job to it, whole; during a flood they take critical jobs too"
    )
    func slotsLeaveCriticalUsersToTheLane() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("bulk")
            try await db.addCategory("alarm", priority: "critical")
            for user in ["a", "b"] { try await db.registerDevice(user, "apns", "token-\(user)") }
            let aBulk = try #require(try await db.enqueue("a", "bulk"))
            let aAlarm = try #require(try await db.enqueue("a", "alarm"))
            let bBulk = try #require(try await db.enqueue("b", "bulk"))
            let outbox = db.outbox()
            let now = Date() + 1
            // A slot takes b's job; a has a due critical job, so all of a is the lane's.
            let slot = try await outbox.claim(limit: 10, lease: .seconds(60), now: now, from: .high)
            #expect(slot.jobs.map(\.id) == [bBulk])
            #expect(slot.leftToLane == 1)
            let lane = try await outbox.claim(limit: 10, lease: .seconds(60), now: now, through: .critical)
            #expect(lane.jobs.map(\.id) == [aAlarm])
            #expect(lane.leftToLane == 0)
            // While the lane holds a, no slot takes a's later job: a's jobs go in order.
            let again = try await db.outbox("other").claim(limit: 10, lease: .seconds(60), now: now, from: .high)
            #expect(again.jobs.isEmpty)
            #expect(again.leftToLane == 0)
            #expect(
                try await db.int("SELECT count(*) FROM herald.outbox WHERE id = \(aBulk) AND state = 'pending'") == 1
            )
        }
        try await TestDatabase.withFresh { db in
            // Without a lane (`from` critical, the default) a claim takes a's critical job first.
            try await db.addCategory("bulk")
            try await db.addCategory("alarm", priority: "critical")
            try await db.registerDevice("a", "apns", "token-a")
            let aBulk = try #require(try await db.enqueue("a", "bulk"))
            let aAlarm = try #require(try await db.enqueue("a", "alarm"))
            let claim = try await db.outbox().claim(limit: 10, lease: .seconds(60), now: Date() + 1)
            #expect(claim.jobs.map(\.id) == [aAlarm, aBulk])
            #expect(claim.leftToLane == 0)
        }
        try await TestDatabase.withFresh { db in
            // A flood of critical jobs (as many as the slots leave to the lane, or more): the
            // slots claim them too, most urgent first, so the lane is not the bottleneck.
            try await db.addCategory("bulk")
            try await db.addCategory("alarm", priority: "critical")
            let n = OutboxStatements.laneUsersLimit
            try await db.exec(
                "SELECT herald.register_device('f' || g, 'apns', 'token-f' || g) FROM generate_series(0, \(n)) g"
            )
            try await db.exec(
                "SELECT herald.enqueue_many(ARRAY(SELECT 'f' || g FROM generate_series(1, \(n)) g), 'alarm', '{\"title\": \"Alarm\", \"body\": \"Now\"}')"
            )
            let bulk = try #require(try await db.enqueue("f0", "bulk"))
            let slot = try await db.outbox().claim(limit: n + 10, lease: .seconds(60), now: Date() + 1, from: .high)
            #expect(slot.jobs.count == n + 1)
            #expect(slot.jobs.prefix(n).allSatisfy { $0.priority == .critical })
            #expect(slot.jobs.last?.id == bulk)
            #expect(slot.leftToLane == 0)
        }
    }

    @Test(
        "a critical job no notification announced (a retry coming due) still goes out: a slot that leaves it signals the lane, which also looks every second"
    )
    func unannouncedCriticalJobGoesOut() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("alarm", priority: "critical")
            try await db.registerDevice("rider", "apns", "fast-token")
            let provider = GateProvider()
            var configuration = OutboxConsumer.Configuration()
            configuration.idlePoll = .milliseconds(50)
            // No listener: enqueue's NOTIFY reaches nobody, as with a retry whose backoff ends.
            let consumer = OutboxConsumer(
                outbox: db.outbox(),
                providers: ProviderRegistry([.apns: provider]),
                wakeup: Wakeup(),
                critical: Wakeup(),
                configuration: configuration,
                logger: TestDatabase.logger
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consumer.run() }
                try await Task.sleep(for: .milliseconds(200))  // both loops found nothing and wait
                let alarm = try #require(try await db.enqueue("rider", "alarm"))
                #expect(try await waitUntil(.seconds(10)) { provider.sent.contains(alarm) })
                group.cancelAll()
            }
        }
    }

    @Test("every critical lane batch waiting on a provider that does not answer: free slots send the next critical job")
    func slotsTakeCriticalJobsWhileTheLaneIsFull() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("alarm", priority: "critical")
            for u in 0..<2 { try await db.registerDevice("slow-\(u)", "apns", "slow-token-\(u)") }
            try await db.registerDevice("rider", "apns", "fast-token")
            let provider = GateProvider()
            try await Self.withLane(db, provider: provider, inFlight: 2) {
                for u in 0..<2 { _ = try await db.enqueue("slow-\(u)", "alarm") }
                #expect(try await waitUntil(.seconds(10)) { provider.held == 2 }, "both lane batches (or a slot) wait")
                let alarm = try #require(try await db.enqueue("rider", "alarm"))
                #expect(try await waitUntil(.seconds(10)) { provider.sent.contains(alarm) }, "a free slot sent it")
                provider.open()
                #expect(
                    try await waitUntil(.seconds(10)) { try await db.int("SELECT count(*) FROM herald.outbox") == 0 }
                )
            }
        }
    }
}
