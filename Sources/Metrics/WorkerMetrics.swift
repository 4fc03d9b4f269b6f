import CoreMetrics
import Synchronization

/// Herald's metric handles for one process, created once per label set and cached.
///
/// One instance is made at start-up with the backend's factory and handed to every component
/// (consumers, maintenance, readiness, provider observers); nothing reads a global, so a test
/// passes swift-metrics' `TestMetrics` and reads what a component recorded. Names, types and
/// labels come from ``MetricNames``; label values come from closed vocabularies (job states,
/// rule and reason names, provider names).
package final class WorkerMetrics: Sendable {
    private let factory: any MetricsFactory
    private let counters = Mutex<[MetricKey: Counter]>([:])
    private let gauges = Mutex<[MetricKey: Gauge]>([:])
    private let timers = Mutex<[MetricKey: Timer]>([:])
    /// Jobs being delivered by all of this process's consumers (`herald_in_flight_jobs`).
    package let inFlightJobs = Atomic<Int>(0)
    /// The last circuit state each provider reported (`herald_provider_circuit_state`), for the
    /// console: 0 closed, 1 half-open, 2 open. A provider never reported is closed.
    private let circuits = Mutex<[String: Int]>([:])

    /// - Parameter factory: where handles are made (Prometheus in `herald run`, `TestMetrics`
    ///   in tests); `NOOPMetricsHandler.instance` records nothing.
    package init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// Handles that record nothing (tools, benchmarks and tests that do not read metrics).
    package static func disabled() -> WorkerMetrics { WorkerMetrics(factory: NOOPMetricsHandler.instance) }

    package func recordCircuit(_ provider: String, state: Int) {
        circuits.withLock { $0[provider] = state }
        gauge(MetricNames.circuitState, provider).record(state)
    }

    /// Each provider's last reported circuit state (0 closed, 1 half-open, 2 open).
    package func circuitStates() -> [String: Int] { circuits.withLock { $0 } }

    private static func dimensions(_ metric: MetricNames.Metric, _ values: [String]) -> [(String, String)] {
        precondition(values.count == metric.labels.count, "label values must match \(metric.name)'s labels")
        return Array(zip(metric.labels, values))
    }

    /// The counter for `metric` with these label values (in `metric.labels` order).
    package func counter(_ metric: MetricNames.Metric, _ values: String...) -> Counter {
        counter(metric, values: values)
    }

    package func counter(_ metric: MetricNames.Metric, values: [String]) -> Counter {
        Self.cached(counters, metric, values) { Counter(label: metric.name, dimensions: $0, factory: factory) }
    }

    /// Adds what `tally` gathered: one handle lookup and one increment per label set.
    package func record(_ tally: CounterTally) {
        for (key, entry) in tally.counts { counter(entry.metric, values: key.values).increment(by: entry.count) }
    }

    package func gauge(_ metric: MetricNames.Metric, _ values: String...) -> Gauge {
        Self.cached(gauges, metric, values) { Gauge(label: metric.name, dimensions: $0, factory: factory) }
    }

    package func timer(_ metric: MetricNames.Metric, _ values: String...) -> Timer {
        Self.cached(timers, metric, values) { Timer(label: metric.name, dimensions: $0, factory: factory) }
    }

    private static func cached<Handle: Sendable>(
        _ cache: borrowing Mutex<[MetricKey: Handle]>,
        _ metric: MetricNames.Metric,
        _ values: [String],
        _ make: ([(String, String)]) -> Handle
    ) -> Handle {
        let key = MetricKey(name: metric.name, values: values)
        return cache.withLock { handles in
            if let handle = handles[key] { return handle }
            let handle = make(Self.dimensions(metric, values))
            handles[key] = handle
            return handle
        }
    }
}

/// A metric's name and label values: what one handle is cached under.
private struct MetricKey: Hashable {
    var name: String
    var values: [String]
}

/// Counter increments gathered over a batch and added at once (``WorkerMetrics/record(_:)``), so
/// a batch of 500 jobs looks up each label set's handle once instead of once per job.
package struct CounterTally {
    fileprivate private(set) var counts: [MetricKey: (metric: MetricNames.Metric, count: Int)] = [:]

    package init() {}

    /// One more of `metric` with these label values (in `metric.labels` order).
    package mutating func add(_ metric: MetricNames.Metric, _ values: String..., count: Int = 1) {
        guard count > 0 else { return }
        counts[MetricKey(name: metric.name, values: values), default: (metric, 0)].count += count
    }
}
