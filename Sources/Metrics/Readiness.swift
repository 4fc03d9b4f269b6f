import CoreMetrics
import Synchronization

/// Whether this replica should receive work: not draining, and its check (database reachable,
/// schema current) passing. The check result is cached for `interval` seconds so a probe
/// storm never becomes a database storm.
package final class Readiness: Sendable {
    package typealias Check = @Sendable () async -> String?

    private struct State {
        var draining = false
        var lastCheck: ContinuousClock.Instant?
        var lastFailure: String?
    }

    private let state = Mutex(State())
    private let check: Check
    private let interval: Duration
    private let ready: Gauge

    /// - Parameters:
    ///   - metrics: where `herald_ready` is recorded.
    ///   - check: returns nil when ready, else a short reason.
    package init(interval: Duration = .seconds(1), metrics: WorkerMetrics = .disabled(), check: @escaping Check) {
        self.check = check
        self.interval = interval
        self.ready = metrics.gauge(MetricNames.ready)
    }

    /// Called when graceful shutdown begins: the replica stops being ready at once.
    package func beginDraining() {
        state.withLock { $0.draining = true }
        ready.record(0)
    }

    package var isDraining: Bool { state.withLock { $0.draining } }

    /// nil when ready, else why not.
    package func status() async -> String? {
        let (draining, fresh, cached) = state.withLock { s -> (Bool, Bool, String?) in
            let fresh = s.lastCheck.map { ContinuousClock.now - $0 < interval } ?? false
            return (s.draining, fresh, s.lastFailure)
        }
        if draining { return "draining" }
        if fresh { return cached }
        let failure = await check()
        state.withLock {
            $0.lastCheck = .now
            $0.lastFailure = failure
        }
        ready.record(failure == nil && !isDraining ? 1 : 0)
        return isDraining ? "draining" : failure
    }
}
