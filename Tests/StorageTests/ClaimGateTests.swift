import DatabaseTestSupport
import Foundation
import HeraldCore
import Queue
import Testing

/// The claim reads a user's preferences, presence, open summaries and waiting retries only when
/// its bucket has some (migration 0021's gates): measured on the claim's own plan, run for real
/// (`EXPLAIN ANALYZE`, rolled back), in a database of four buckets.
@Suite("Claim gates: per-user reads only in a bucket that has such rows")
struct ClaimGateTests {
    /// The claim's per-user reads the gates guard, as (table, alias) in its SQL, and the gates'.
    static let guarded = [("preferences", "p"), ("presence", "r"), ("outbox", "m"), ("outbox", "w")]
    static let gates = [("preferences", "gp"), ("presence", "gr"), ("outbox", "gm"), ("outbox", "gw")]

    /// Runs the claim in `bucket` under `EXPLAIN (ANALYZE, FORMAT JSON, VERBOSE)` in a transaction
    /// that is rolled back; returns the loops run by each scan node, keyed "table alias".
    static func loops(in bucket: Int, _ db: TestDatabase) async throws -> [String: Int] {
        let claim = try #require(OutboxStatements.hotPath.first { $0.name.hasPrefix("herald_claim_v") })
        let now = Date().timeIntervalSince1970 + 5
        let json = try await db.explain(
            claim,
            binds: ["w", "\(now)", "60", "100", "3", "\(bucket)", "0"],
            options: "ANALYZE, FORMAT JSON, VERBOSE",
            around: ("BEGIN", "ROLLBACK")
        )
        var loops: [String: Int] = [:]
        for node in json.planScans {
            guard let relation = node["Relation Name"]?.string, let alias = node["Alias"]?.string else { continue }
            loops["\(relation) \(alias)", default: 0] += Int(node["Actual Loops"]?.number ?? 0)
        }
        return loops
    }

    @Test(
        "a bucket without preferences, presence, summaries or retries: each gate is read once and no user's row is looked for; a bucket with them: every user's are"
    )
    func gatesFollowTheBucket() async throws {
        try await TestDatabase.withFresh(buckets: 4) { db in
            // Three users in bucket 0 with nothing but a job; two in bucket 1, one of them with
            // every kind of row the gates guard.
            let users = try await db.rows(
                "SELECT 'g' || g, herald.bucket_of('g' || g) FROM generate_series(1, 200) g ORDER BY g"
            )
            let quiet = users.filter { $0[1] == "0" }.prefix(3).compactMap { $0[0] }
            let busy = users.filter { $0[1] == "1" }.prefix(2).compactMap { $0[0] }
            #expect(quiet.count == 3 && busy.count == 2)
            try await db.addSeedCategory("chat")
            for user in quiet + busy {
                try await db.registerDevice(user, "expo", "ExponentPushToken[\(user)]")
                try #require(try await db.enqueueJSON(user, "chat", payload: #"{"title": "T", "body": "b"}"#) != nil)
            }
            let full = busy[0]
            try await db.setPreferences(full, #"{"muted": []}"#)
            try await db.exec(
                "INSERT INTO herald.presence (user_id, context, expires_at) VALUES ('\(full)', 'chat', now() + interval '1 hour')"
            )
            let retry = try #require(try await db.enqueueJSON(full, "chat", payload: #"{"title": "R", "body": "b"}"#))
            // (Due later: the batch's own jobs are not handed over as waiting.)
            try await db.exec(
                "UPDATE herald.outbox SET retrying = true, run_at = now() + interval '1 hour' WHERE id = \(retry)"
            )
            let summary = try #require(try await db.enqueueJSON(full, "chat", payload: #"{"title": "S", "body": "b"}"#))
            try await db.exec(
                "UPDATE herald.outbox SET summary_key = 'k', run_at = now() + interval '1 hour' WHERE id = \(summary)"
            )

            let closed = try await Self.loops(in: 0, db)
            for (table, alias) in Self.gates { #expect(closed["\(table) \(alias)"] == 1, "gate \(alias): \(closed)") }
            for (table, alias) in Self.guarded {
                #expect((closed["\(table) \(alias)"] ?? 0) == 0, "\(alias) read: \(closed)")
            }

            let open = try await Self.loops(in: 1, db)
            for (table, alias) in Self.gates { #expect(open["\(table) \(alias)"] == 1, "gate \(alias): \(open)") }
            for (table, alias) in Self.guarded {
                #expect((open["\(table) \(alias)"] ?? 0) >= 1, "\(alias) not read: \(open)")
            }

            // And what bucket 1's claim hands the policy (claims rotate through the buckets).
            let outbox = db.outbox()
            var batch = ClaimedBatch()
            for _ in 0..<4 where batch.bucket != 1 {
                batch = try await outbox.claim(limit: 100, lease: .seconds(60), now: Date() + 5)
            }
            #expect(batch.bucket == 1)
            let recipient = try #require(batch.recipients[full])
            #expect(recipient.preferencesJSON != nil)
            #expect(recipient.presence == ["chat"])
            #expect(recipient.openSummaries.count == 1)
            #expect(recipient.retrying.map(\.id) == [retry])
            #expect(batch.recipients[busy[1]].map { $0.presence.isEmpty && $0.retrying.isEmpty } == true)
        }
    }
}
