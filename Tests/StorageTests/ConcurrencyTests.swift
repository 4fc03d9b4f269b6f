import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Logging
import Providers
import Queue
import ServiceLifecycle
import Synchronization
import Testing

/// Counts deliveries per job across every consumer.
final class DeliveryCounter: PushProvider, Sendable {
    let name = "counter"
    private let counts = Mutex<[Int64: Int]>([:])
    func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logging.Logger) async -> [DeliveryOutcome] {
        counts.withLock { c in for m in messages { c[m.jobID, default: 0] += 1 } }
        return messages.map { _ in .accepted }
    }
    var snapshot: [Int64: Int] { counts.withLock { $0 } }
}

@Suite("Concurrency and shutdown", .serialized)
struct ConcurrencyTests {
    @Test("4 workers × 20,000 jobs: every job delivered exactly once, none left")
    func fourWorkersExactlyOnce() async throws {
        try await TestDatabase.withFresh(poolSize: 2) { db in
            try await db.addCategory("bench")
            try await db.exec(
                "SELECT herald.register_device('u' || g, 'apns', 'tok-' || g) FROM generate_series(1, 2000) g"
            )
            let users = (1...2000).map { "u\($0)" }
            for _ in 0..<10 {
                _ = try await db.outbox().enqueueMany(
                    users: users,
                    category: "bench",
                    payloadJSON: #"{"title":"t","body":"b"}"#
                )
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 20_000)
            let counter = DeliveryCounter()
            let wakeup = Wakeup()
            var pools: [PostgresPool] = []
            for _ in 0..<4 {
                var c = PostgresPool.Configuration()
                c.size = 3
                c.connection.url = db.url
                pools.append(PostgresPool(configuration: c))
            }
            let consumers = pools.enumerated().map { i, pool in
                var configuration = OutboxConsumer.Configuration()
                configuration.batchSize = 250
                configuration.idlePoll = .milliseconds(20)
                return OutboxConsumer(
                    outbox: Outbox(pool: pool, workerID: "w\(i)"),
                    providers: ProviderRegistry([.apns: counter]),
                    wakeup: wakeup,
                    configuration: configuration,
                    logger: TestDatabase.logger
                )
            }
            let group = ServiceGroup(services: consumers, logger: TestDatabase.logger)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                for _ in 0..<600 {
                    if counter.snapshot.count >= 20_000,
                        try await db.int("SELECT count(*) FROM herald.outbox") == 0
                    {
                        break
                    }
                    try await Task.sleep(for: .milliseconds(100))
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
            for pool in pools { await pool.shutdown() }
            let counts = counter.snapshot
            #expect(counts.count == 20_000)
            #expect(counts.values.allSatisfy { $0 == 1 })
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            #expect(
                try await db.int("SELECT count(DISTINCT job_id) FROM herald.delivery_log WHERE outcome = 'accepted'")
                    == 20_000
            )
            #expect(try await db.int("SELECT count(DISTINCT worker) FROM herald.delivery_log") == 4)
            // Every user's badge counts its ten inbox rows once: the acks counted their own rows
            // (and the inbox trigger left them to the acks).
            #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE unread = 10") == 2000)
            #expect(try await db.recipientRowDrift() == [])
        }
    }

    @Test("graceful shutdown past its deadline releases in-flight jobs: no running rows left")
    func shutdownDeadlineReleases() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("u", "apns", "slow")
            for _ in 0..<20 { try await db.enqueue("u", "chat") }
            let slow = ScriptedProvider(delay: .seconds(30))
            let consumer = db.consumer(providers: ProviderRegistry([.apns: slow]), batchSize: 5)
            var configuration = ServiceGroupConfiguration(services: [consumer], logger: TestDatabase.logger)
            configuration.maximumGracefulShutdownDuration = .milliseconds(500)
            let group = ServiceGroup(configuration: configuration)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                for _ in 0..<100 {  // stop as soon as the condition no longer holds
                    guard try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") == 0 else {
                        break
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") > 0)
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
            }
            // Nothing left running, nothing lost: the abandoned sends come back without spending
            // their attempt (docs/outbox-states.md).
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'pending'") == 20)
            #expect(
                try await db.int(
                    "SELECT count(*) FROM herald.delivery_log WHERE outcome = 'retry' AND reason = 'shutdown'"
                ) > 0
            )
            #expect(try await db.int("SELECT max(attempt) FROM herald.outbox") == 0)
            #expect(slow.sent.isEmpty)
        }
    }

    @Test("an expired lease returns the job to pending; the old owner's late ack is fenced off")
    func leaseExpiryAndFence() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("u", "apns", "t")
            let id = try #require(try await db.enqueue("u", "chat"))
            let clock = ManualClock()
            clock.advance(by: 1)
            let crashed = db.outbox("crashed-worker")
            let batch = try await crashed.claim(limit: 10, lease: .seconds(30), now: clock.now())
            #expect(batch.jobs.map(\.id) == [id])
            // Nothing to reap before the lease ends.
            let maintenance = MaintenanceService(
                outbox: db.outbox("reaper"),
                clock: clock,
                configuration: .init(),
                logger: TestDatabase.logger
            )
            await maintenance.reap()
            #expect(try await db.scalar("SELECT state FROM herald.outbox WHERE id = \(id)") == "running")
            clock.advance(by: 31)
            await maintenance.reap()
            #expect(
                try await db.rows("SELECT state, lease_owner, attempt FROM herald.outbox WHERE id = \(id)")
                    == [["pending", nil, "1"]]
            )
            // The crashed worker wakes up and tries to ack: it no longer owns the row.
            let owned = try await crashed.acknowledge(
                [
                    Settlement(
                        jobID: id,
                        state: .done,
                        logs: [LogEntry(jobID: id, event: .attempt, status: .done, attempt: 1)]
                    )
                ],
                jobs: batch.jobs,
                bucket: batch.bucket
            )
            #expect(owned == 0)
            #expect(try await db.scalar("SELECT state FROM herald.outbox WHERE id = \(id)") == "pending")
            // Another worker delivers it.
            let provider = ScriptedProvider()
            let consumer = db.consumer(worker: "healthy", providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.map(\.jobID) == [id])
            #expect(
                try await db.rows("SELECT event, reason FROM herald.delivery_log WHERE job_id = \(id) ORDER BY id")
                    == [["released", "lease_expired"], ["attempt", "ok"]]
            )
        }
    }

    @Test("a job whose last attempt's lease expired is dead-lettered, not retried forever")
    func poisonLeaseDeadLetters() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("sos", priority: "critical", maxAttempts: 1)
            let id = try #require(try await db.enqueue("admin", "sos", title: "Help"))
            let clock = ManualClock()
            clock.advance(by: 1)
            _ = try await db.outbox("crashy").claim(limit: 1, lease: .seconds(10), now: clock.now())
            clock.advance(by: 11)
            let reaped = try await db.outbox("reaper").reapExpiredLeases(now: clock.now())
            #expect(reaped.released == 0 && reaped.dead == 1)
            #expect(
                try await db.scalar("SELECT last_error FROM herald.dead_letters WHERE job_id = \(id)")
                    == "attempts_exhausted: lease_expired"
            )
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE job_id = \(id) AND kind = 'alert'") == 1)
        }
    }

    @Test("the outbox wake-up comes from statements that insert jobs, never from an acknowledgement that inserts none")
    func wakeUpOnlyForInsertedJobs() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.addCategory("alarm", priority: "critical")
            try await db.registerDevice("u", "apns", "t")
            let listener = try await PostgresConnection.connect(
                configuration: db.pool.connectionConfiguration,
                threadPool: db.pool.blockingPool
            )
            try await listener.execute("LISTEN herald_outbox", name: "listen")
            // Everything the channel carries in the next 400 ms (a NOTIFY arrives at its commit).
            func heard() async throws -> [String] {
                var payloads: [String] = []
                let end = ContinuousClock.now + .milliseconds(400)
                while ContinuousClock.now < end {
                    payloads += try await listener.waitForNotifications(timeout: .milliseconds(50)).map(\.payload)
                }
                return payloads
            }
            // A worker waits for the wake-up (without one, only critical jobs send it:
            // `wakeUpOnlyWhileAWorkerWaits`).
            #expect(try await db.outbox("w").markIdle())
            try await db.enqueue("u", "chat")
            #expect(try await heard() == [""])
            // Claim, send and acknowledge: the acknowledgement's summaries insert (none here) and
            // its other writes wake nobody.
            let provider = ScriptedProvider()
            #expect(try await db.consumer(providers: ProviderRegistry([.apns: provider])).runOnce() == 1)
            #expect(provider.sent.count == 1)
            #expect(try await heard() == [])
            try await db.exec(
                """
                INSERT INTO herald.outbox (user_id, category, payload, expires_at)
                SELECT 'u', 'chat', '{"title": "x"}', now() + interval '1 hour' WHERE false
                """
            )
            #expect(try await heard() == [])
            // A critical job wakes the slots and the critical lane.
            try await db.enqueue("u", "alarm")
            #expect(Set(try await heard()) == ["", "critical"])
            await listener.close()
        }
    }

    @Test(
        "the critical lane's claim commits without waiting for its WAL flush; a slot's claim and the session keep the server's setting"
    )
    func laneClaimCommitsWithoutFlushWait() async throws {
        try await TestDatabase.withFresh(poolSize: 1) { db in
            try await db.addCategory("alarm", priority: "critical")
            try await db.registerDevice("u", "apns", "t")
            try await db.enqueue("u", "alarm")
            let claim = try #require(OutboxStatements.hotPath.first { $0.name.hasPrefix("herald_claim_v") })
            let now = String(Date().timeIntervalSince1970)
            // Binds: worker, now, lease, limit, least urgent rank (0: critical only, the lane), bucket,
            // most urgent rank. Inside a transaction block, to read the setting its commit would use.
            func commitSetting(leastUrgent: Int) async throws -> (claimed: Int, setting: String?) {
                try await db.pool.withConnection { c in
                    try await c.execute("BEGIN", name: "test")
                    let rows = try await c.query(claim, ["w", now, "60", "10", String(leastUrgent), "0", "0"])
                    let setting = try await c.simpleQuery("SHOW synchronous_commit", name: "test").scalar
                    try await c.execute("ROLLBACK", name: "test")
                    return (rows.rows.filter { $0.first == "j" }.count, setting)
                }
            }
            let lane = try await commitSetting(leastUrgent: 0)
            #expect(lane.claimed == 1 && lane.setting == "off")
            let slots = try await commitSetting(leastUrgent: 3)
            #expect(slots.claimed == 1 && slots.setting == "on")
            // As the worker runs it (autocommit): the lane's claim takes the job, and the one pooled
            // connection's session is back on the server's setting for the ack that follows.
            let batch = try await db.outbox("w").claim(limit: 10, lease: .seconds(60), now: Date(), through: .critical)
            #expect(batch.jobs.count == 1)
            #expect(try await db.scalar("SHOW synchronous_commit") == "on")
        }
    }

    @Test(
        "enqueues send the wake-up only while a worker waits; a producer still open holds back the waiter's confirmation"
    )
    func wakeUpOnlyWhileAWorkerWaits() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.addCategory("alarm", priority: "critical")
            let wakeup = Wakeup()
            let listener = PostgresListener(
                pool: db.pool,
                channel: "herald_outbox",
                wakeup: wakeup,
                logger: TestDatabase.logger
            )
            /// Whether a notification arrives within `within` (the wait returns early only on one).
            func woken(within: Duration = .seconds(1)) async -> Bool {
                let start = ContinuousClock.now
                await wakeup.wait(timeout: within)
                return ContinuousClock.now - start < within - .milliseconds(100)
            }
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { await listener.run() }
                #expect(await woken(within: .seconds(10)))  // the listener's catch-up signal once connected
                // No worker waits: an enqueue sends no wake-up (and takes no database-wide lock
                // at its commit), unless it holds a critical job.
                try await db.enqueue("u", "chat")
                #expect(!(await woken()))
                try await db.enqueue("u", "alarm")
                #expect(await woken())
                // A worker waits: every enqueue wakes it.
                let outbox = db.outbox("w")
                #expect(try await outbox.markIdle())
                try await db.enqueue("u", "chat")
                #expect(await woken())
                // It found work: no more wake-ups.
                try await outbox.markBusy()
                try await db.enqueue("u", "chat")
                #expect(!(await woken()))
                // A producer that looked before the worker's record and has not committed yet:
                // the record is not confirmed until it commits (the worker polls meanwhile), so the
                // claim after the confirmation sees that producer's job.
                try await db.pool.withConnection { producer in
                    try await producer.execute("BEGIN", name: "begin")
                    try await producer.execute(
                        "SELECT herald.enqueue('v', 'chat', '{\"title\":\"t\",\"body\":\"b\"}', '{}')",
                        name: "enqueue"
                    )
                    #expect(try await outbox.markIdle() == false)
                    try await producer.execute("COMMIT", name: "commit")
                }
                #expect(try await outbox.markIdle())
                #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE user_id = 'v'") == 1)
                // A record a minute old is a worker that died waiting: ignored.
                try await db.exec("UPDATE herald.idle_workers SET since = now() - interval '2 minutes'")
                try await db.enqueue("u", "chat")
                #expect(!(await woken()))
                tasks.cancelAll()
            }
        }
    }

    @Test("NOTIFY wakes an idle consumer long before its poll interval")
    func notifyWakesConsumer() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("u", "apns", "t")
            let wakeup = Wakeup()
            let provider = ScriptedProvider()
            let consumer = db.consumer(
                providers: ProviderRegistry([.apns: provider]),
                wakeup: wakeup,
                idlePoll: .seconds(60)
            )
            let listener = PostgresListener(
                pool: db.pool,
                channel: "herald_outbox",
                wakeup: wakeup,
                logger: TestDatabase.logger
            )
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { await listener.run() }
                tasks.addTask { try await consumer.run() }
                try await Task.sleep(for: .milliseconds(500))  // both idle now
                try await db.enqueue("u", "chat")
                for _ in 0..<200 {  // stop as soon as the condition no longer holds
                    guard provider.sent.isEmpty else { break }
                    try await Task.sleep(for: .milliseconds(25))
                }
                tasks.cancelAll()
            }
            #expect(provider.sent.count == 1)  // well inside the 60 s poll: woken by NOTIFY
        }
    }
}
