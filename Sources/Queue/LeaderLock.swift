import Foundation

/// The maintenance leader's lock: a session-level advisory lock held on a dedicated connection,
/// so it goes with the connection when the leader dies. Its statements live here, with names,
/// like every other runtime statement of the storage layer.
package struct LeaderLock: Sendable {
    /// The leadership advisory lock key ("heraldmt").
    static let key: Int64 = 0x6865_7261_6C64_6D74

    /// The connection that holds the lock.
    package let connection: PostgresConnection

    /// Opens a dedicated connection named `herald-leader:<worker>` and tries the lock once;
    /// nil (connection closed) when another replica holds it.
    package static func tryAcquire(for outbox: Outbox) async throws -> LeaderLock? {
        var configuration = outbox.pool.connectionConfiguration
        configuration.applicationName = "herald-leader:" + outbox.workerID
        let connection = try await PostgresConnection.connect(
            configuration: configuration,
            threadPool: outbox.pool.blockingPool
        )
        do {
            let won = try await connection.simpleQuery("SELECT pg_try_advisory_lock(\(key))", name: "leader_lock")
            if won.scalar == "t" { return LeaderLock(connection: connection) }
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
        return nil
    }

    /// Whether the connection (and so the lock) is still there.
    package func isHeld() async -> Bool {
        (try? await connection.simpleQuery("SELECT 1", name: "leader_ping")) != nil
    }

    /// Releases the lock at once for the next leader.
    package func release() async {
        await connection.close()
    }

    /// Vacuums `herald.outbox` when its dead tuples pass `deadTuples`, on this connection
    /// (VACUUM cannot run inside a transaction; `SKIP_LOCKED` never waits on a concurrent
    /// vacuum). Needs the table's owner: for any other role (a least-privilege `herald_worker`)
    /// it does nothing and autovacuum keeps the table. Returns the dead tuples it vacuumed, or nil.
    package func vacuumOutbox(above deadTuples: Int) async throws -> Int? {
        let dead = try await connection.simpleQuery(
            """
            SELECT n_dead_tup FROM pg_stat_user_tables
            WHERE relid = 'herald.outbox'::regclass
              AND pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = 'herald.outbox'::regclass), 'USAGE')
            """,
            name: "outbox_dead_tuples"
        )
        guard let count = dead.scalar.flatMap({ Int($0) }), count > deadTuples else { return nil }
        try await connection.execute("VACUUM (SKIP_LOCKED, TRUNCATE false) herald.outbox", name: "outbox_vacuum")
        return count
    }
}
