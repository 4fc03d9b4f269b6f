import CoreMetrics
import Dispatcher
import Foundation
import HeraldCore
import HeraldMetrics
import Logging
import Queue
import ServiceLifecycle

/// Periodic upkeep run by one replica at a time: it returns expired leases to the queue,
/// prunes history in bounded batches, and measures the queue-wide gauges (depth, lag, dead
/// letters) so that replicas do not each scan the outbox.
///
/// - Important: leadership is a session-level advisory lock held on a dedicated connection.
///   If the leader dies, PostgreSQL drops its connection and the lock with it, and another
///   replica takes over within one `reapInterval`. Every replica runs this service; followers
///   only retry the lock.
package struct MaintenanceService: Service {
    package struct Configuration: Sendable {
        /// How often the leader rescues expired leases and refreshes the gauges; followers try
        /// the leadership lock as often. Default 5 s.
        package var reapInterval: Duration = .seconds(5)
        /// How often history is pruned. Default 60 s.
        package var pruneInterval: Duration = .seconds(60)
        /// Delivery log retention. Default 30 days.
        package var deliveryLogRetention: Duration = .seconds(30 * 86_400)
        /// Inbox retention. Default 30 days.
        package var inboxRetention: Duration = .seconds(30 * 86_400)
        /// Local-fallback recordings retention. Default 30 days.
        package var localRetention: Duration = .seconds(30 * 86_400)
        /// Dead letters retention. Default 30 days.
        package var deadLetterRetention: Duration = .seconds(30 * 86_400)
        /// Rows deleted per table per pass. Default 10,000.
        package var pruneBatch = 10_000
        /// Dead tuples in `herald.outbox` above which the leader vacuums it itself, so claims
        /// never walk long runs of dead index entries while autovacuum sleeps
        /// (`autovacuum_naptime` defaults to 60 s). 0 disables. Default 100,000 (50,000 drained
        /// jobs): at 20,000 a 300,000-job drain vacuumed almost back to back (five VACUUMs of
        /// 1.3–1.5 s each, and every connection plans its statements again after each), while a
        /// claim reads as many buffers with 100,000 dead tuples behind it (docs/benchmarks.md,
        /// "The leader's vacuum threshold").
        package var vacuumDeadTuples = 100_000
        /// Live rows in `herald.outbox` from which the leader analyzes it itself once its planner
        /// statistics say a quarter or less of them: after a drain they say the queue is empty,
        /// and a burst planned as if it were made claims of seconds until autovacuum's next
        /// ANALYZE (`herald.refresh_queue_statistics`). 0 disables. Default 1,000.
        package var statisticsFloor = 1_000
        package init() {}
    }

    /// Work only the leader does, every `interval` (e.g. the Expo receipts poller).
    package struct LeaderTask: Sendable {
        package var name: String
        package var interval: Duration
        package var run: @Sendable () async -> Void
        package init(name: String, interval: Duration, run: @escaping @Sendable () async -> Void) {
            self.name = name
            self.interval = interval
            self.run = run
        }
    }

    let outbox: Outbox
    let clock: any WallClock
    let configuration: Configuration
    let logger: Logger
    let tasks: [LeaderTask]
    let metrics: WorkerMetrics

    package init(
        outbox: Outbox,
        clock: any WallClock = SystemClock(),
        configuration: Configuration,
        logger: Logger,
        metrics: WorkerMetrics = .disabled(),
        tasks: [LeaderTask] = []
    ) {
        self.metrics = metrics
        self.outbox = outbox
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        self.tasks = tasks
    }

    package func run() async throws {
        var lock: LeaderLock?
        var sincePrune: Duration?
        var sinceTask: [Duration?] = tasks.map { _ in nil }
        let leaderGauge = metrics.gauge(MetricNames.maintenanceLeader)
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let wasLeader = lock != nil
            lock = await holdLeadership(lock)
            leaderGauge.record(lock == nil ? 0 : 1)
            if lock != nil {
                if !wasLeader {
                    logger.info("Maintenance leadership acquired", metadata: ["worker.id": "\(outbox.workerID)"])
                }
                await reap()
                await sweepPauses()
                if let lock { await vacuumIfNeeded(on: lock) }
                await refreshStatistics()
                await measure()
                if sincePrune.map({ $0 >= configuration.pruneInterval }) ?? true {
                    await prune()
                    sincePrune = .zero
                }
                for (i, task) in tasks.enumerated() where sinceTask[i].map({ $0 >= task.interval }) ?? true {
                    await task.run()
                    sinceTask[i] = .zero
                }
            } else if wasLeader {
                logger.warning("Maintenance leadership lost", metadata: ["worker.id": "\(outbox.workerID)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.configuration.reapInterval) }
            sincePrune = sincePrune.map { $0 + configuration.reapInterval }
            sinceTask = sinceTask.map { $0.map { $0 + configuration.reapInterval } }
        }
        await lock?.release()  // at once, for the next leader
        leaderGauge.record(0)
    }

    /// Keeps (or tries to take) the leadership lock; nil when another replica leads.
    private func holdLeadership(_ held: LeaderLock?) async -> LeaderLock? {
        if let held {
            if await held.isHeld() { return held }
            await held.release()
            return nil
        }
        do {
            return try await LeaderLock.tryAcquire(for: outbox)
        } catch {
            logger.debug("Leadership attempt failed", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Vacuums the outbox when dead tuples pile up (`vacuumDeadTuples`), on the leader's own
    /// connection; a least-privilege worker that does not own the table leaves it to autovacuum.
    private func vacuumIfNeeded(on lock: LeaderLock) async {
        guard configuration.vacuumDeadTuples > 0 else { return }
        do {
            if let count = try await lock.vacuumOutbox(above: configuration.vacuumDeadTuples) {
                logger.debug("Outbox vacuumed", metadata: ["dead_tuples": "\(count)"])
            }
        } catch {
            logger.debug("Outbox vacuum skipped", metadata: ["error": "\(error)"])
        }
    }

    /// Analyzes the outbox when a burst has outgrown its planner statistics (`statisticsFloor`).
    package func refreshStatistics() async {
        guard configuration.statisticsFloor > 0 else { return }
        await step("Outbox statistics refresh failed") {
            if try await outbox.refreshQueueStatistics(floor: configuration.statisticsFloor) {
                logger.info("Outbox statistics refreshed (a burst outgrew them)")
            }
        }
    }

    /// Queue-wide gauges, measured once per interval by the leader only.
    package func measure() async {
        guard let status = try? await outbox.depth() else { return }
        metrics.gauge(MetricNames.outboxJobs, "pending_due").record(status.pendingDue)
        metrics.gauge(MetricNames.outboxJobs, "pending_scheduled").record(status.pendingScheduled)
        metrics.gauge(MetricNames.outboxJobs, "running").record(status.running)
        metrics.gauge(MetricNames.outboxJobs, "paused").record(status.paused)
        metrics.gauge(MetricNames.pauses).record(status.activePauses)
        metrics.gauge(MetricNames.outboxLag).record(status.oldestPendingAge.seconds)
        metrics.gauge(MetricNames.deadLetters).record(status.deadLetters)
    }

    package func reap() async {
        await step("Lease reaper failed") {
            let (released, dead) = try await outbox.reapExpiredLeases(now: clock.now())
            if released + dead > 0 {
                logger.info("Expired leases returned", metadata: ["released": "\(released)", "dead": "\(dead)"])
            }
        }
    }

    /// Holds the jobs of paused categories that turned pending since the last pass (retries,
    /// reaped leases, summaries) and releases those no pause holds any more (`until` passed).
    package func sweepPauses() async {
        await step("Pause sweep failed") {
            let (held, released) = try await outbox.sweepPauses()
            if held + released > 0 {
                logger.info("Pauses swept", metadata: ["held": "\(held)", "released": "\(released)"])
            }
        }
    }

    package func prune() async {
        await step("Recipient sweep failed") {
            // The recipients' safety net rides on the (rare) retention pass: it reads the table.
            let stray = try await outbox.freeStrayRecipients()
            if stray > 0 {
                logger.warning("Freed recipients held with no running job", metadata: ["recipients": "\(stray)"])
            }
        }
        await step("Retention pass failed") {
            let result = try await outbox.pruneHistory(
                deliveryLog: configuration.deliveryLogRetention,
                inbox: configuration.inboxRetention,
                localNotifications: configuration.localRetention,
                deadLetters: configuration.deadLetterRetention,
                limit: configuration.pruneBatch
            )
            if result.total + result.partitionsDropped + result.partitionsCreated > 0 {
                logger.info(
                    "History pruned",
                    metadata: [
                        "rows": "\(result.total)", "partitions.dropped": "\(result.partitionsDropped)",
                        "partitions.created": "\(result.partitionsCreated)",
                    ]
                )
            }
        }
    }

    /// Runs one maintenance step, logging its failure as a warning, except a shutdown's
    /// cancellation: nothing failed, and the next leader runs the step again.
    private func step(_ failure: Logger.Message, _ body: () async throws -> Void) async {
        do {
            try await body()
        } catch is CancellationError {
        } catch {
            logger.warning(failure, metadata: ["error": "\(error)"])
        }
    }
}
