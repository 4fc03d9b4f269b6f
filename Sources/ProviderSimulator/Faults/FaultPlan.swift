import Foundation
import HeraldCore
import NIOConcurrencyHelpers
import Providers

/// What the fault plan chose for one request: an optional delay, then at most one effect.
package struct FaultDecision: Sendable, Hashable {
    package enum Effect: Sendable, Hashable {
        /// Answer normally (a latency-only rule).
        case none
        /// The service renders this error in its wire format.
        case inject(InjectedFault)
        /// Close the connection without answering.
        case dropConnection
        /// HTTP/2 GOAWAY with `{"reason":"Shutdown"}`, then close.
        case goaway
    }

    package var latency: Duration?
    package var effect: Effect
}

/// The simulator's fault rules, shared by the server core and the control API.
///
/// Rules are tried in the order they were added; the first one that matches the request (and
/// wins its probability roll) is the only one applied. A rule with `remaining` is removed once
/// used up; an outage rule is removed once its window has passed.
///
/// - Important: All state sits behind one lock because requests on every connection and the
///   control API consult it concurrently; nothing slow happens under the lock.
package final class FaultPlan: Sendable {
    /// A rule with its control-API id and, for outages, its end.
    package struct Entry: Sendable, Hashable {
        package var id: Int
        package var rule: FaultRule
        package var outageUntil: Date?
    }

    private struct State {
        var entries: [Entry] = []
        var nextID = 1
        var random: SplitMix64
    }

    private let state: NIOLockedValueBox<State>
    private let now: @Sendable () -> Date

    /// - Parameters:
    ///   - seed: Seed of the generator behind `probability` rolls, so a run is reproducible.
    ///   - now: The clock outage windows are measured on.
    package init(seed: UInt64 = 0x5eed, now: @escaping @Sendable () -> Date = { Date() }) {
        self.state = NIOLockedValueBox(State(random: SplitMix64(seed: seed)))
        self.now = now
    }

    /// Adds a rule after validating it and returns its id.
    @discardableResult
    package func add(_ rule: FaultRule) throws -> Int {
        try rule.validate()
        let until = rule.outageSeconds.map { now().addingTimeInterval($0) }
        return state.withLockedValue { s in
            let id = s.nextID
            s.nextID += 1
            s.entries.append(Entry(id: id, rule: rule, outageUntil: until))
            return id
        }
    }

    /// Removes every rule.
    package func clear() { state.withLockedValue { $0.entries.removeAll() } }

    /// The rules in force, oldest first.
    package var entries: [Entry] {
        let date = now()
        return state.withLockedValue { s in s.entries.filter { $0.outageUntil.map { $0 > date } ?? true } }
    }

    /// Chooses what happens to one request of `provider` targeting `token` (nil when it has none).
    package func decide(provider: String, token: String?) -> FaultDecision? {
        let date = now()
        return state.withLockedValue { s -> FaultDecision? in
            s.entries.removeAll { entry in entry.outageUntil.map { $0 <= date } ?? false }
            for index in s.entries.indices {
                let rule = s.entries[index].rule
                guard rule.provider == "*" || rule.provider == provider else { continue }
                if let wanted = rule.token, wanted != token { continue }
                if rule.probability < 1, s.random.nextUnit() >= rule.probability { continue }
                if let remaining = rule.remaining {
                    if remaining <= 1 {
                        s.entries.remove(at: index)
                    } else {
                        s.entries[index].rule.remaining = remaining - 1
                    }
                }
                return Self.decision(for: rule)
            }
            return nil
        }
    }

    private static func decision(for rule: FaultRule) -> FaultDecision {
        let latency = rule.latencyMs.map { Duration.milliseconds($0) }
        let effect: FaultDecision.Effect
        if rule.dropConnection {
            effect = .dropConnection
        } else if rule.goaway {
            effect = .goaway
        } else if rule.outageSeconds != nil {
            effect = .inject(InjectedFault(status: 503, reason: rule.reason, retryAfter: rule.retryAfter))
        } else if let status = rule.status {
            effect = .inject(InjectedFault(status: status, reason: rule.reason, retryAfter: rule.retryAfter))
        } else {
            effect = .none
        }
        return FaultDecision(latency: latency, effect: effect)
    }
}
