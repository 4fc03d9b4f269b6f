import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Queue
import Testing

/// A claim takes a user's due jobs together, up to the user run its consumer picks (claim v38's
/// `$8`, ``UserRun``): fewer per-user probes against a fast provider, one job a user against a
/// slow one (each job of a user in a batch is one more round trip to send).
@Suite("User runs: a user's due jobs claimed together, as many as the provider's round trips allow")
struct UserRunTests {
    @Test("the run is the batch's database time over a wave's, within 1 and the cap; the cap until a wave is measured")
    func runFromAverages() {
        #expect(UserRun.run(claim: nil, ack: nil, wave: nil, limit: 8) == 8)
        #expect(UserRun.run(claim: 0.030, ack: 0.030, wave: nil, limit: 8) == 8)
        #expect(UserRun.run(claim: 0.030, ack: 0.030, wave: 0, limit: 8) == 8)
        // The sink: a wave answers in a fraction of a millisecond.
        #expect(UserRun.run(claim: 0.030, ack: 0.030, wave: 0.0002, limit: 8) == 8)
        // 20 ms a request: three waves cost what the batch's database work does.
        #expect(UserRun.run(claim: 0.030, ack: 0.030, wave: 0.020, limit: 8) == 3)
        // 100 ms a request: one job a user.
        #expect(UserRun.run(claim: 0.030, ack: 0.030, wave: 0.100, limit: 8) == 1)
        #expect(UserRun.run(claim: nil, ack: nil, wave: 0.010, limit: 8) == 1)
        #expect(UserRun.run(claim: 1, ack: 1, wave: 0.001, limit: 4) == 4)
    }

    @Test("measurements move the run: a provider that slows down shortens it within a few batches, and a fast one lengthens it again")
    func runFollowsMeasurements() {
        let run = UserRun(limit: 8)
        #expect(run.current == 8)
        run.claimed(in: .milliseconds(30))
        run.acknowledged(in: .milliseconds(30))
        run.waveAnswered(in: .microseconds(200))
        #expect(run.current == 8)
        for _ in 0..<10 { run.waveAnswered(in: .milliseconds(100)) }
        #expect(run.current == 1)
        for _ in 0..<30 { run.waveAnswered(in: .milliseconds(1)) }
        #expect(run.current == 8)
    }

    /// Users u0…u3, three jobs each, enqueued as three broadcasts: interleaved in the queue.
    static func interleaved(_ db: TestDatabase) async throws -> [String: [Int64]] {
        try await db.addCategory("news")
        var ids: [String: [Int64]] = [:]
        for user in (0..<4).map({ "u\($0)" }) { _ = try await db.registerDevice(user, "apns", "token-\(user)") }
        for _ in 0..<3 {
            for user in (0..<4).map({ "u\($0)" }) {
                ids[user, default: []].append(try #require(try await db.enqueue(user, "news")))
            }
        }
        return ids
    }

    @Test("a claim takes each user's first due jobs, as many as its run, in order; the rest stay for the next claim", arguments: [1, 2, 8])
    func claimTakesRuns(run: Int) async throws {
        try await TestDatabase.withFresh { db in
            let ids = try await Self.interleaved(db)
            let batch = try await db.outbox().claim(limit: 100, lease: .seconds(60), now: Date() + 1, userRun: run)
            let taken = Dictionary(grouping: batch.jobs, by: \.userID).mapValues { $0.map(\.id) }
            for (user, jobs) in ids {
                #expect(taken[user] == Array(jobs.prefix(run)), "\(user)'s first \(run) jobs, in order")
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'pending'") == 12 - 4 * min(run, 3))
        }
    }

    @Test("with a batch smaller than the users' runs, the claim fills it with whole runs of the first users")
    func runsFillTheBatch() async throws {
        try await TestDatabase.withFresh { db in
            let ids = try await Self.interleaved(db)
            let batch = try await db.outbox().claim(limit: 5, lease: .seconds(60), now: Date() + 1, userRun: 8)
            #expect(batch.jobs.map(\.id).sorted() == (ids["u0"]! + ids["u1"]!.prefix(2)).sorted())
        }
    }
}
