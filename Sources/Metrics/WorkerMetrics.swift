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
        let key = Self.key(metric, values)
        return counters.withLock { cache in
            if let c = cache[key] { return c }
            let c = Counter(label: metric.name, dimensions: Self.dimensions(metric, values))
            cache[key] = c
            return c
        }
    }

    package func gauge(_ metric: MetricNames.Metric, _ values: String...) -> Gauge {
        let key = Self.key(metric, values)
        return gauges.withLock { cache in
            if let g = cache[key] { return g }
            let g = Gauge(label: metric.name, dimensions: Self.dimensions(metric, values))
            cache[key] = g
            return g
        }
    }

    package func timer(_ metric: MetricNames.Metric, _ values: String...) -> Timer {
        let key = Self.key(metric, values)
        return timers.withLock { cache in
            if let t = cache[key] { return t }
            let t = Timer(label: metric.name, dimensions: Self.dimensions(metric, values))
            cache[key] = t
            return t
        }
    }
}
