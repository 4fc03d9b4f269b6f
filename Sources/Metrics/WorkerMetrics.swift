import CoreMetrics
import Synchronization

/// Herald's metric names and handles, created once and cached per label set.
///
/// Names and label values come from closed vocabularies (see STYLE.md §2), so the Prometheus
/// exporter (added with the operations work) never sees one name used two ways.
package final class WorkerMetrics: Sendable {
    package static let shared = WorkerMetrics()

    package let jobsClaimed = Counter(label: "herald_jobs_claimed_total")
    package let claimDuration = Timer(label: "herald_claim_duration_seconds")
    package let ackDuration = Timer(label: "herald_ack_duration_seconds")
    package let inFlightBatches = Gauge(label: "herald_in_flight")
    package let outboxLag = Gauge(label: "herald_outbox_lag_seconds")
    private let completed = Mutex<[String: Counter]>([:])
    private let attempts = Mutex<[String: Counter]>([:])

    /// `herald_jobs_completed_total{state}`: jobs settled, by final or next state.
    package func jobsCompleted(state: String) -> Counter {
        completed.withLock { cache in
            if let c = cache[state] { return c }
            let c = Counter(label: "herald_jobs_completed_total", dimensions: [("state", state)])
            cache[state] = c
            return c
        }
    }

    /// `herald_delivery_attempts_total{provider,outcome}`.
    package func deliveryAttempts(provider: String, outcome: String) -> Counter {
        let key = provider + "|" + outcome
        return attempts.withLock { cache in
            if let c = cache[key] { return c }
            let c = Counter(
                label: "herald_delivery_attempts_total", dimensions: [("provider", provider), ("outcome", outcome)])
            cache[key] = c
            return c
        }
    }
}
