import Foundation
import NIOConcurrencyHelpers

/// Stops sending to a provider that is failing as a whole, so an outage costs no attempts.
///
/// Closed: everything passes; `failureThreshold` consecutive provider-level failures (5xx,
/// timeouts, connection errors — not per-token answers) open it. Open: nothing passes for
/// `openDuration` (doubling on each failed probe, up to `maxOpenDuration`); callers hand their
/// messages back with `Retry-After` = the time left, which the dispatcher treats as a snooze
/// that does not use up an attempt. Half-open: one probe request at a time; success closes,
/// failure re-opens.
package final class CircuitBreaker: Sendable {
    package enum State: Int, Sendable {
        case closed = 0, halfOpen = 1, open = 2
    }

    package struct Configuration: Sendable {
        /// Consecutive provider-level failures that open the circuit. Default 20.
        package var failureThreshold = 20
        /// First open period. Default 5 s; doubles per failed probe.
        package var openDuration: Duration = .seconds(5)
        /// Longest open period. Default 60 s.
        package var maxOpenDuration: Duration = .seconds(60)
        package init() {}
    }

    private struct Inner {
        var state: State = .closed
        var consecutiveFailures = 0
        var openUntil: ContinuousClock.Instant = .now
        var currentOpen: Duration
        var probeInFlight = false
    }

    package let configuration: Configuration
    private let inner: NIOLockedValueBox<Inner>
    /// Called on every state change (metrics, logs).
    private let onChange: @Sendable (State) -> Void

    package init(configuration: Configuration = .init(), onChange: @escaping @Sendable (State) -> Void = { _ in }) {
        self.configuration = configuration
        self.inner = NIOLockedValueBox(Inner(currentOpen: configuration.openDuration))
        self.onChange = onChange
    }

    package var state: State { inner.withLockedValue { $0.state } }

    /// What a caller may do now.
    package enum Permit: Sendable, Equatable {
        /// Send normally.
        case pass
        /// Send one probe (the circuit is half-open); report its result with `probe: true`.
        case probe
        /// Do not send; try again after this long.
        case reject(Duration)
    }

    package func permit() -> Permit {
        var changed: State?
        let permit: Permit = inner.withLockedValue { s in
            switch s.state {
            case .closed:
                return .pass
            case .open:
                let now = ContinuousClock.now
                if now < s.openUntil { return .reject(s.openUntil - now) }
                s.state = .halfOpen
                changed = .halfOpen
                s.probeInFlight = true
                return .probe
            case .halfOpen:
                if s.probeInFlight { return .reject(.milliseconds(500)) }
                s.probeInFlight = true
                return .probe
            }
        }
        if let changed { onChange(changed) }
        return permit
    }

    /// Reports a send's result: `failures` provider-level failures in a row (0 = it went well).
    package func record(failures: Int, probe: Bool) {
        var changed: State?
        inner.withLockedValue { s in
            if probe { s.probeInFlight = false }
            if failures > 0 {
                s.consecutiveFailures += failures
                if s.state == .halfOpen && probe {
                    s.currentOpen = min(s.currentOpen * 2, configuration.maxOpenDuration)
                    s.state = .open
                    s.openUntil = .now + s.currentOpen
                    changed = .open
                } else if s.state == .closed && s.consecutiveFailures >= configuration.failureThreshold {
                    s.state = .open
                    s.currentOpen = configuration.openDuration
                    s.openUntil = .now + s.currentOpen
                    changed = .open
                }
            } else {
                s.consecutiveFailures = 0
                if s.state != .closed && (probe || s.state == .halfOpen) {
                    s.state = .closed
                    s.currentOpen = configuration.openDuration
                    changed = .closed
                }
            }
        }
        if let changed { onChange(changed) }
    }
}
