import Foundation
import HeraldCore

// MARK: - Open circuits recorded for starting workers (migration 0024)

extension OutboxStatements {
    /// Records provider `$1`'s circuit as open for `$2` more seconds (the longer of this and what
    /// the row says), or as closed when `$2` is 0 (ends the row's period now); `$3` the worker.
    static let publishCircuit = PostgresStatement(
        name: "herald_circuit_publish_v1",
        sql: """
            INSERT INTO herald.provider_circuits AS c (provider, open_until, worker)
            VALUES ($1, now() + make_interval(secs => $2::float8), $3)
            ON CONFLICT (provider) DO UPDATE
            SET open_until = CASE WHEN $2::float8 > 0 THEN greatest(c.open_until, EXCLUDED.open_until)
                                  ELSE least(c.open_until, now()) END,
                worker = EXCLUDED.worker, updated_at = now()
            """
    )

    /// The providers whose shared circuit is open, with the seconds left.
    static let openCircuits = PostgresStatement(
        name: "herald_circuits_open_v1",
        sql: """
            SELECT provider, extract(epoch FROM open_until - now())::float8 AS remaining
            FROM herald.provider_circuits WHERE open_until > now()
            """
    )
}

extension Outbox {
    /// Records provider `provider`'s circuit for the workers that start: open for `remaining`
    /// more (nil: closed again, which ends the recorded period).
    package func publishCircuit(_ provider: String, openFor remaining: Duration?) async throws {
        let seconds = remaining.map { max(0.001, $0.seconds) } ?? 0
        _ = try await pool.query(OutboxStatements.publishCircuit, [provider, String(seconds), workerID])
    }

    /// The providers whose recorded circuit is open, with the time left.
    package func openCircuits() async throws -> [String: Duration] {
        var open: [String: Duration] = [:]
        for r in try await pool.query(OutboxStatements.openCircuits).readers {
            if let provider = r.string("provider"), let remaining = r.duration("remaining") {
                open[provider] = remaining
            }
        }
        return open
    }
}
