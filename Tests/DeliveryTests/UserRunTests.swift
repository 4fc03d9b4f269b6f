import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Queue
import Testing

/// A claim takes a user's due jobs together (claim v38 on, a user's run), however they lie in the
/// queue: each user's per-user reads are paid once for all of its jobs in the batch.
@Suite("User runs: a claim takes each user's due jobs together, in order")
struct UserRunTests {
    /// The scope-turns claim itself (`herald_claim_turns`), a second ahead, with an empty cursor:
    /// the jobs it took (id, user) and whether it walked any scope (`l` rows).
    static func claimWithScopeTurns(
        _ db: TestDatabase,
        limit: Int,
        worker: String
    ) async throws
        -> (jobs: [(id: Int64, user: String)], walked: Bool)
    {
        let statement = try #require(OutboxStatements.hotPath.first { $0.name.hasPrefix("herald_claim_turns_v") })
        let now = String(Date().timeIntervalSince1970 + 1)
        let rows = try await db.pool.query(statement, [worker, now, "60", String(limit), "3", "0", "0", "{}"]).rows
        let jobs = rows.filter { $0.first == "j" }.compactMap { row -> (id: Int64, user: String)? in
            // The record's first two fields: "(id,user_id,…)".
            guard let record = row[1] else { return nil }
            let fields = record.dropFirst().split(separator: ",", maxSplits: 2)
            guard fields.count >= 2, let id = Int64(fields[0]) else { return nil }
            return (id, String(fields[1]))
        }
        return (jobs, rows.contains { $0.first == "l" })
    }

    /// Users u0…u3, three jobs each, enqueued as three broadcasts: interleaved in the queue.
    static func interleaved(_ db: TestDatabase) async throws -> [String: [Int64]] {
        try await db.addCategory("news")
        let users = (0..<4).map { "u\($0)" }
        var ids: [String: [Int64]] = [:]
        for user in users { _ = try await db.registerDevice(user, "apns", "token-\(user)") }
        for _ in 0..<3 {
            for user in users {
                ids[user, default: []].append(try #require(try await db.enqueue(user, "news")))
            }
        }
        return ids
    }

    @Test("interleaved in the queue, each user's due jobs are claimed together, in order")
    func claimTakesRuns() async throws {
        try await TestDatabase.withFresh { db in
            let ids = try await Self.interleaved(db)
            let batch = try await db.outbox().claim(limit: 100, lease: .seconds(60), now: Date() + 1)
            let taken = Dictionary(grouping: batch.jobs, by: \.userID).mapValues { $0.map(\.id) }
            for (user, jobs) in ids {
                #expect(taken[user] == jobs, "\(user)'s three jobs, in order")
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'pending'") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner IS NOT NULL") == 4)
        }
    }

    @Test(
        "with a batch smaller than the users' runs, the claim fills it with the first users' runs; the cut user's later jobs wait for the next claim"
    )
    func runsFillTheBatch() async throws {
        try await TestDatabase.withFresh { db in
            let ids = try await Self.interleaved(db)
            let outbox = db.outbox()
            let batch = try await outbox.claim(limit: 5, lease: .seconds(60), now: Date() + 1)
            #expect(batch.jobs.map(\.id).sorted() == (ids["u0"]! + ids["u1"]!.prefix(2)).sorted())
            // u1 is held by that batch: another claim takes u2's and u3's runs, none of u1's.
            let next = try await db.outbox("other").claim(limit: 100, lease: .seconds(60), now: Date() + 1)
            #expect(next.jobs.map(\.id).sorted() == (ids["u2"]! + ids["u3"]!).sorted())
        }
    }

    @Test("a user's jobs in a row and another's behind them: the first user's whole run, then the next user's")
    func contiguousRun() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("news")
            for user in ["solo", "other"] { _ = try await db.registerDevice(user, "apns", "token-\(user)") }
            var solo: [Int64] = []
            for _ in 0..<20 { solo.append(try #require(try await db.enqueue("solo", "news"))) }
            let other = try #require(try await db.enqueue("other", "news"))
            let batch = try await db.outbox().claim(limit: 21, lease: .seconds(60), now: Date() + 1)
            #expect(batch.jobs.filter { $0.userID == "solo" }.map(\.id) == solo)
            #expect(batch.jobs.filter { $0.userID == "other" }.map(\.id) == [other])
        }
    }

    @Test(
        "with scopes taking turns (an organisation's flood, another's trickle), the flood's users come as their runs, and the trickle still has its turn"
    )
    func scopeTurnsTakeRuns() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("news")
            let users = (0..<60).map { "x\($0)" }
            for user in users + ["y0", "y1"] { _ = try await db.registerDevice(user, "apns", "token-\(user)") }
            // Organisation x's flood: five broadcasts to 60 users (interleaved in the queue); then
            // organisation y's two jobs.
            var ids: [String: [Int64]] = [:]
            for _ in 0..<5 {
                for user in users {
                    ids[user, default: []].append(
                        try #require(
                            try await db.enqueueJSON(
                                user,
                                "news",
                                payload: #"{"title": "Hi", "body": "b"}"#,
                                options: #"{"scope": "org-x"}"#
                            )
                        )
                    )
                }
            }
            var trickle: [Int64] = []
            for user in ["y0", "y1"] {
                trickle.append(
                    try #require(
                        try await db.enqueueJSON(
                            user,
                            "news",
                            payload: #"{"title": "Hi", "body": "b"}"#,
                            options: #"{"scope": "org-y"}"#
                        )
                    )
                )
            }
            let batch = try await Self.claimWithScopeTurns(db, limit: 100, worker: "w")
            #expect(batch.walked, "the claim walked the scopes")
            #expect(Set(trickle).isSubset(of: Set(batch.jobs.map(\.id))), "y's jobs in the first batch")
            let flood = Dictionary(grouping: batch.jobs.filter { $0.user.hasPrefix("x") }, by: \.user)
                .mapValues { $0.map(\.id).sorted() }
            // Whole runs, but for the last ones, which y's turns push past the batch: about 20
            // users, not 60 users' first jobs (as when the walk took the queue job by job).
            #expect(flood.count <= 21, "\(flood.count) users of the flood in a batch of 100")
            #expect(flood.values.filter { $0.count < 5 }.count <= trickle.count)
            for (user, jobs) in flood {
                #expect(jobs == Array(try #require(ids[user]).prefix(jobs.count)), "\(user): its first jobs, in order")
            }
        }
    }
}
