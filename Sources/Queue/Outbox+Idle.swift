import Foundation
import HeraldCore

// MARK: - The wake-up only while a worker waits (migration 0023)

extension OutboxStatements {
    /// Records (or refreshes) worker `$1` as waiting for the wake-up; drops rows of workers that
    /// stopped waiting an hour ago and never said so (killed).
    static let markIdle = PostgresStatement(
        name: "herald_idle_mark_v1",
        sql: """
            WITH gone AS (
                DELETE FROM herald.idle_workers WHERE since < now() - interval '1 hour' AND worker <> $1
            )
            INSERT INTO herald.idle_workers (worker, since) VALUES ($1, now())
            ON CONFLICT (worker) DO UPDATE SET since = now()
            """,
        genericPlan: true
    )

    /// Whether no producer is between its look at `herald.idle_workers` and its commit (each holds
    /// the wake gate shared for that long, `herald.outbox_recipients`): then every job a producer
    /// committed without waking anyone is visible to the next claim.
    static let idleConfirmed = PostgresStatement(
        name: "herald_idle_confirmed_v2",
        sql: "SELECT pg_try_advisory_xact_lock(herald.wake_gate_key()) AS confirmed",
        genericPlan: true
    )

    /// Worker `$1` no longer waits (its claim found work, or it stops).
    static let markBusy = PostgresStatement(
        name: "herald_idle_unmark_v1",
        sql: "DELETE FROM herald.idle_workers WHERE worker = $1",
        genericPlan: true
    )
}

extension Outbox {
    /// Records this worker (its lease owner, unique per consumer) as waiting for the wake-up
    /// (``OutboxStatements/markIdle``) and returns whether every producer that may have looked
    /// before the record has committed: when it has, one more claim sees all their jobs, and
    /// every later job wakes this worker.
    package func markIdle() async throws -> Bool {
        _ = try await pool.query(OutboxStatements.markIdle, [workerID])
        return try await pool.query(OutboxStatements.idleConfirmed).scalar == "t"
    }

    /// Refreshes this worker's record of waiting (a record not refreshed for a minute is ignored).
    package func refreshIdle() async throws {
        _ = try await pool.query(OutboxStatements.markIdle, [workerID])
    }

    /// This worker no longer waits: producers stop waking it.
    package func markBusy() async throws {
        _ = try await pool.query(OutboxStatements.markBusy, [workerID])
    }
}
