import Foundation
import HeraldCore
import Logging

/// Holds one dedicated connection in `LISTEN` and signals a ``Wakeup`` on every notification,
/// and `critical` too on a notification whose payload is `critical` (a critical job arrived).
///
/// On a broken connection it reconnects with capped exponential backoff and signals once after
/// reconnecting, because notifications sent while it was away are lost.
package struct PostgresListener: Sendable {
    let pool: PostgresPool
    let channel: String
    let wakeup: Wakeup
    let critical: Wakeup?
    let logger: Logger

    package init(pool: PostgresPool, channel: String, wakeup: Wakeup, critical: Wakeup? = nil, logger: Logger) {
        self.pool = pool
        self.channel = channel
        self.wakeup = wakeup
        self.critical = critical
        self.logger = logger
    }

    /// Listens until the task is cancelled.
    package func run() async {
        var backoff = Duration.milliseconds(100)
        while !Task.isCancelled {
            var held: PostgresConnection?
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: pool.connectionConfiguration,
                    threadPool: pool.blockingPool
                )
                held = connection
                try await connection.execute("LISTEN \(channel)", name: "listen")
                backoff = .milliseconds(100)
                await wakeup.signal()  // catch up on anything missed while disconnected
                await critical?.signal()
                while !Task.isCancelled {
                    let received = try await connection.waitForNotifications(timeout: .milliseconds(250))
                    if !received.isEmpty { await wakeup.signal() }
                    if let critical, received.contains(where: { $0.payload == "critical" }) { await critical.signal() }
                }
                await connection.close()
            } catch {
                await held?.close()
                logger.warning("Outbox listener disconnected", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }
}
