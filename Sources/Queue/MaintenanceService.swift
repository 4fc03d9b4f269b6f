import Dispatcher
import Logging
import ServiceLifecycle

/// Periodic upkeep every replica runs: returns expired leases to the queue and prunes history.
///
/// Safe to run on every replica at once: the reaper claims with `SKIP LOCKED` and retention
/// takes a transaction-scoped advisory lock, so one replica prunes at a time.
package struct MaintenanceService: Service {
    package struct Configuration: Sendable {
        /// How often expired leases are looked for. Default 5 s.
        package var reapInterval: Duration = .seconds(5)
        /// How often history is pruned. Default 60 s.
        package var pruneInterval: Duration = .seconds(60)
        /// Delivery log retention, seconds. Default 30 days.
        package var deliveryLogRetention: Double = 30 * 86_400
        /// Inbox retention, seconds. Default 30 days.
        package var inboxRetention: Double = 30 * 86_400
        /// Local-fallback recordings retention, seconds. Default 30 days.
        package var localRetention: Double = 30 * 86_400
        /// Dead letters retention, seconds. Default 30 days.
        package var deadLetterRetention: Double = 30 * 86_400
        /// Rows deleted per table per pass. Default 10,000.
        package var pruneBatch = 10_000
        package init() {}
    }

    let outbox: Outbox
    let clock: any WallClock
    let configuration: Configuration
    let logger: Logger

    package init(outbox: Outbox, clock: any WallClock = SystemClock(), configuration: Configuration, logger: Logger) {
        self.outbox = outbox
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    package func run() async throws {
        var sincePrune = Duration.zero
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await reap()
            if sincePrune >= configuration.pruneInterval || sincePrune == .zero {
                await prune()
                sincePrune = .zero
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.configuration.reapInterval) }
            sincePrune += configuration.reapInterval
        }
    }

    package func reap() async {
        do {
            let (released, dead) = try await outbox.reapExpiredLeases(now: clock.now())
            if released + dead > 0 {
                logger.info("Expired leases returned", metadata: ["released": "\(released)", "dead": "\(dead)"])
            }
        } catch {
            logger.warning("Lease reaper failed", metadata: ["error": "\(error)"])
        }
    }

    package func prune() async {
        do {
            let result = try await outbox.pruneHistory(
                deliveryLog: configuration.deliveryLogRetention, inbox: configuration.inboxRetention,
                localNotifications: configuration.localRetention, deadLetters: configuration.deadLetterRetention,
                limit: configuration.pruneBatch)
            if result.total > 0 { logger.info("History pruned", metadata: ["rows": "\(result.total)"]) }
        } catch {
            logger.warning("Retention pass failed", metadata: ["error": "\(error)"])
        }
    }
}
