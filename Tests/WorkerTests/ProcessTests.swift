import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Queue
import Testing

/// Tests that run the real `herald` executable against a real database.
@Suite("The herald process", .serialized)
struct ProcessTests {
    @Test(
        "a worker killed with SIGKILL mid-batch: every job delivered, duplicates only for jobs it held, same collapse id"
    )
    func sigkillLosesNothing() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat", maxAttempts: 5)
            try await db.exec(
                "SELECT herald.register_device('u' || g, 'local', 'dev-' || g) FROM generate_series(1, 3000) g"
            )
            let users = (1...3000).map { "u\($0)" }
            for _ in 0..<10 {
                _ = try await db.outbox().enqueueMany(
                    users: users,
                    category: "chat",
                    payloadJSON: #"{"title":"t","body":"b"}"#
                )
            }
            let env = [
                "HERALD_DATABASE_URL": db.url, "HERALD_QUEUE_BATCH_SIZE": "100", "HERALD_QUEUE_LEASE_SECONDS": "5",
                "HERALD_MAINTENANCE_REAP_INTERVAL_SECONDS": "1", "HERALD_LOG_LEVEL": "warning",
            ]
            var victimEnv = env
            victimEnv["HERALD_WORKER_ID"] = "victim"
            let (victim, _) = try HeraldBinary.start(["run"], environment: victimEnv)
            // Kill early: on a loaded machine this loop may look only every few hundred ms.
            for _ in 0..<600 {  // stop as soon as the condition no longer holds
                guard try await db.int("SELECT count(*) FROM herald.local_notifications") < 1000 else { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            kill(victim.processIdentifier, SIGKILL)
            await waitUntilExitOffPool(victim)
            let leased = Set(
                try await db.rows(
                    "SELECT id FROM herald.outbox WHERE state = 'running' AND lease_owner LIKE 'victim.%'"
                ).compactMap { $0[0].flatMap { Int64($0) } }
            )
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") > 0, "killed before the queue drained")

            var survivorEnv = env
            survivorEnv["HERALD_WORKER_ID"] = "survivor"
            let (survivor, _) = try HeraldBinary.start(["run"], environment: survivorEnv)
            for _ in 0..<600 {  // stop as soon as the condition no longer holds
                guard try await db.int("SELECT count(*) FROM herald.outbox") > 0 else { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            kill(survivor.processIdentifier, SIGTERM)
            await waitUntilExitOffPool(survivor)
            #expect(survivor.terminationStatus == 0)

            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            #expect(try await db.int("SELECT count(DISTINCT job_id) FROM herald.local_notifications") == 30_000)
            let duplicates = try await db.rows(
                "SELECT job_id, count(DISTINCT collapse_id), min(collapse_id) FROM herald.local_notifications GROUP BY job_id HAVING count(*) > 1"
            )
            for row in duplicates {
                let job = try #require(row[0].flatMap { Int64($0) })
                #expect(leased.contains(job), "job \(job) was sent twice but was not leased by the killed worker")
                #expect(row[1] == "1" && row[2] == "herald-\(job)")
            }
        }
    }

    @Test("SIGTERM under load: exits 0 within the drain deadline, no running rows, nothing lost")
    func sigtermDrains() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.exec(
                "SELECT herald.register_device('u' || g, 'local', 'dev-' || g) FROM generate_series(1, 1000) g"
            )
            let users = (1...1000).map { "u\($0)" }
            for _ in 0..<30 {
                _ = try await db.outbox().enqueueMany(
                    users: users,
                    category: "chat",
                    payloadJSON: #"{"title":"t","body":"b"}"#
                )
            }
            let (worker, _) = try HeraldBinary.start(
                ["run"],
                environment: [
                    "HERALD_DATABASE_URL": db.url, "HERALD_SHUTDOWN_DEADLINE_SECONDS": "10",
                    "HERALD_LOG_LEVEL": "warning",
                ]
            )
            for _ in 0..<600 {  // stop as soon as the condition no longer holds
                guard try await db.int("SELECT count(*) FROM herald.local_notifications") < 2000 else { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            let start = ContinuousClock.now
            kill(worker.processIdentifier, SIGTERM)
            await waitUntilExitOffPool(worker)
            #expect(worker.terminationStatus == 0)
            #expect(ContinuousClock.now - start < .seconds(10))
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") == 0)
            let pending = try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'pending'")
            let delivered = try await db.int(
                "SELECT count(DISTINCT job_id) FROM herald.delivery_log WHERE status = 'done'"
            )
            #expect(pending > 0, "the worker drained everything before SIGTERM; the test proves nothing")
            #expect(pending + delivered == 30_000)
        }
    }

    @Test("herald migrate run by 5 processes at once: applied once, the others are no-ops")
    func concurrentMigrate() async throws {
        try await TestDatabase.withEmpty { url in
            let results = try await withThrowingTaskGroup(of: (Int32, String).self) { group in
                for _ in 0..<5 {
                    group.addTask { try await HeraldBinary.run(["migrate"], environment: ["HERALD_DATABASE_URL": url]) }
                }
                var all: [(Int32, String)] = []
                for try await r in group { all.append(r) }
                return all
            }
            #expect(results.allSatisfy { $0.0 == 0 }, "\(results.map(\.1))")
            #expect(results.filter { $0.1.contains("applied migrations") }.count == 1)
            #expect(results.filter { $0.1.contains("up to date") }.count == 4)
            let (status, output) = try await HeraldBinary.run(["migrate"], environment: ["HERALD_DATABASE_URL": url])
            #expect(status == 0 && output.contains("up to date"))
        }
    }

    @Test("bad flags and bad config: one clear line, non-zero exit, secrets masked")
    func badConfiguration() async throws {
        let (s1, o1) = try await HeraldBinary.run(["status"], environment: ["HERALD_QUEUE_BATCH_SIZE": "lots"])
        #expect(s1 != 0)
        #expect(o1.contains("queue.batch_size: must be an integer"))
        let (s2, o2) = try await HeraldBinary.run(
            ["status"],
            environment: ["HERALD_DATABASE_URL": "postgresql://herald:s3cret-pw@127.0.0.1:1/x"]
        )
        #expect(s2 != 0)
        #expect(!o2.contains("s3cret-pw"))
        #expect(o2.contains("connection error"))
        let (s3, o3) = try await HeraldBinary.run(
            ["check-config"],
            environment: ["HERALD_DATABASE_URL": "postgresql://herald:s3cret-pw@db/x"]
        )
        #expect(s3 == 0)
        #expect(o3.contains("postgresql://herald:***@db/x"))
        #expect(!o3.contains("s3cret-pw"))
        let (s4, o4) = try await HeraldBinary.run(["run", "--bogus"], environment: [:])
        #expect(s4 != 0)
        #expect(o4.contains("Unknown option '--bogus'"))
        let (s5, o5) = try await HeraldBinary.run(["status", "--config", "/nonexistent.json"], environment: [:])
        #expect(s5 != 0)
        #expect(o5.contains("/nonexistent.json does not exist"))
    }
}
