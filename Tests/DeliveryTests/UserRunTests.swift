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

    @Test("with a batch smaller than the users' runs, the claim fills it with the first users' runs; the cut user's later jobs wait for the next claim")
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
}
