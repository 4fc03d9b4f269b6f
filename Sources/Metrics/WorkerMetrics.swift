import CoreMetrics
import Synchronization

/// Herald's metric handles, created once per label set and cached (STYLE.md §7).
///
/// Names, types and labels come from ``MetricNames``; label values come from closed
/// vocabularies (job states, rule and reason names, provider names). Without a bootstrapped
/// metrics backend (tests, tools) every handle is a no-op.
package final class WorkerMetrics: Sendable {
    package static let shared = WorkerMetrics()

    private let counters = Mutex<[String: Counter]>([:])
    private let gauges = Mutex<[String: Gauge]>([:])
    private let timers = Mutex<[String: Timer]>([:])

    package init() {}

    private static func key(_ metric: MetricNames.Metric, _ values: [String]) -> String {
        ([metric.name] + values).joined(separator: "\u{1F}")
    }

    private static func dimensions(_ metric: MetricNames.Metric, _ values: [String]) -> [(String, String)] {
        precondition(values.count == metric.labels.count, "label values must match \(metric.name)'s labels")
        return Array(zip(metric.labels, values))
    }

    /// The counter for `metric` with these label values (in `metric.labels` order).
    package func counter(_ metric: MetricNames.Metric, _ values: String...) -> Counter {
        Self.cached(counters, metric, values) { Counter(label: metric.name, dimensions: $0) }
    }

    package func gauge(_ metric: MetricNames.Metric, _ values: String...) -> Gauge {
        Self.cached(gauges, metric, values) { Gauge(label: metric.name, dimensions: $0) }
    }

    package func timer(_ metric: MetricNames.Metric, _ values: String...) -> Timer {
        Self.cached(timers, metric, values) { Timer(label: metric.name, dimensions: $0) }
    }

    private static func cached<Handle: Sendable>(
        _ cache: borrowing Mutex<[String: Handle]>, _ metric: MetricNames.Metric, _ values: [String],
        _ make: ([(String, String)]) -> Handle
    ) -> Handle {
        let key = Self.key(metric, values)
        return cache.withLock { handles in
            if let handle = handles[key] { return handle }
            let handle = make(Self.dimensions(metric, values))
            handles[key] = handle
            return handle
        }
    }
}
