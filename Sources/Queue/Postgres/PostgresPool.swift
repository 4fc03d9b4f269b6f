import Foundation
import HeraldCore
import Logging
import NIOPosix

/// A small pool of libpq connections with lazy connect and replace-on-failure.
///
/// Connections are opened on demand up to `size`; a connection that fails with a transient
/// error is closed and replaced by the next lease, so a restarted server is picked up again.
package actor PostgresPool {
    package struct Configuration: Sendable {
        /// Connections kept at most. Default 4.
        package var size = 4
        package var connection = PostgresConnection.Configuration()
        package init() {}
    }

    private let configuration: Configuration
    private let threadPool: NIOThreadPool
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var waiters: [CheckedContinuation<PostgresConnection?, Never>] = []
    private var closed = false

    /// Creates a pool with its own thread pool: one thread per connection plus one for a listener.
    package init(configuration: Configuration) {
        self.configuration = configuration
        let pool = NIOThreadPool(numberOfThreads: max(2, configuration.size + 1))
        pool.start()
        self.threadPool = pool
    }

    package nonisolated var blockingPool: NIOThreadPool { threadPool }
    package nonisolated var connectionConfiguration: PostgresConnection.Configuration { configuration.connection }

    /// Leases a connection for `body`, returning it afterwards (or replacing it if it broke).
    package nonisolated func withConnection<T: Sendable>(
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await lease()
        do {
            let value = try await body(connection)
            await release(connection, broken: false)
            return value
        } catch let error as PostgresError {
            await release(connection, broken: error.isTransient || error.kind == .closed)
            throw error
        } catch {
            await release(connection, broken: !(await connection.isHealthy))
            throw error
        }
    }

    /// Runs one statement on a pooled connection.
    package nonisolated func query(_ statement: PostgresStatement, _ binds: [String?] = []) async throws -> PostgresRows
    {
        try await withConnection { try await $0.query(statement, binds) }
    }

    private func lease() async throws -> PostgresConnection {
        if closed { throw PostgresError(kind: .closed, message: "pool is closed") }
        if let c = idle.popLast() { return c }
        if open < configuration.size {
            open += 1
            do {
                return try await PostgresConnection.connect(
                    configuration: configuration.connection,
                    threadPool: threadPool
                )
            } catch {
                open -= 1
                throw error
            }
        }
        let waited = await withCheckedContinuation { waiters.append($0) }
        guard let waited else { throw PostgresError(kind: .closed, message: "pool is closed") }
        return waited
    }

    private func release(_ connection: PostgresConnection, broken: Bool) async {
        if broken || closed {
            await connection.close()
            open -= 1
            if !closed, !waiters.isEmpty {
                // Hand a fresh connection to the first waiter, or wake it to report the failure.
                open += 1
                let waiter = waiters.removeFirst()
                if let fresh = try? await PostgresConnection.connect(
                    configuration: configuration.connection,
                    threadPool: threadPool
                ) {
                    waiter.resume(returning: fresh)
                } else {
                    open -= 1
                    waiter.resume(returning: nil)
                }
            }
            return
        }
        if !waiters.isEmpty {
            waiters.removeFirst().resume(returning: connection)
        } else {
            idle.append(connection)
        }
    }

    /// Closes every idle connection and the thread pool; leased ones close when returned.
    package func shutdown() async {
        closed = true
        for w in waiters { w.resume(returning: nil) }
        waiters = []
        for c in idle { await c.close() }
        idle = []
        try? await threadPool.shutdownGracefully()
    }
}
