import Foundation
import Logging
import NIOConcurrencyHelpers

/// Wraps an adapter with per-credential pacing, a circuit breaker for the provider, and a
/// pause for credentials the provider refused.
///
/// Everything it refuses comes back as `.retry` with a `Retry-After`, which the dispatcher
/// treats as a snooze that does not use up an attempt: an outage or a paused credential costs
/// jobs time, never attempts, and they are dead-lettered only when their TTL runs out.
package struct ResilientProvider: PushProvider {
    package struct Configuration: Sendable {
        /// Sends per second per app credential; nil = unpaced. Expo documents 600/s.
        package var ratePerSecond: Double?
        /// Longest a batch waits for its pacing tokens before handing messages back. Default 2 s.
        package var maxPacingWait: Duration = .seconds(2)
        package var circuit = CircuitBreaker.Configuration()
        /// How long a credential the provider refused (bad key, revoked) is paused. Default 60 s.
        package var credentialPause: Duration = .seconds(60)
        package init(ratePerSecond: Double? = nil) { self.ratePerSecond = ratePerSecond }
    }

    package var name: String { inner.name }
    private let inner: any PushProvider
    private let configuration: Configuration
    package let circuit: CircuitBreaker
    private let buckets: NIOLockedValueBox<[String: TokenBucket]>
    private let paused: NIOLockedValueBox<[String: ContinuousClock.Instant]>
    private let observer: Observer

    /// Hooks for metrics; the Providers target does not link the metrics backend.
    package struct Observer: Sendable {
        package var circuitChanged: @Sendable (_ provider: String, _ state: CircuitBreaker.State) -> Void
        package var headroom: @Sendable (_ provider: String, _ tokens: Double) -> Void
        package var credentialPaused: @Sendable (_ provider: String, _ app: String) -> Void
        package init(
            circuitChanged: @escaping @Sendable (String, CircuitBreaker.State) -> Void = { _, _ in },
            headroom: @escaping @Sendable (String, Double) -> Void = { _, _ in },
            credentialPaused: @escaping @Sendable (String, String) -> Void = { _, _ in }
        ) {
            self.circuitChanged = circuitChanged
            self.headroom = headroom
            self.credentialPaused = credentialPaused
        }
    }

    package init(_ inner: any PushProvider, configuration: Configuration = .init(), observer: Observer = .init()) {
        self.inner = inner
        self.configuration = configuration
        self.observer = observer
        let name = inner.name
        self.circuit = CircuitBreaker(configuration: configuration.circuit) { observer.circuitChanged(name, $0) }
        self.buckets = NIOLockedValueBox([:])
        self.paused = NIOLockedValueBox([:])
        observer.circuitChanged(name, .closed)
    }

    package func send(_ messages: [PushMessage], logger: Logger) async -> [DeliveryOutcome] {
        guard !messages.isEmpty else { return [] }
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)

        // Paused credentials: hand back with the pause's remaining time.
        let now = ContinuousClock.now
        let pauses = paused.withLockedValue { p in p.filter { $0.value > now } }
        var eligible: [Int] = []
        for (i, m) in messages.enumerated() {
            if let until = pauses[m.device.appID] {
                outcomes[i] = DeliveryOutcome(.retry, reason: "credential_paused", retryAfter: until - now)
            } else {
                eligible.append(i)
            }
        }

        // Circuit: closed passes all; half-open sends one message as the probe.
        let permit = eligible.isEmpty ? .pass : circuit.permit()
        var probeIndex: Int?
        switch permit {
        case .pass: break
        case .probe:
            probeIndex = eligible.first
            for i in eligible.dropFirst() {
                outcomes[i] = DeliveryOutcome(.retry, reason: "circuit_open", retryAfter: .seconds(1))
            }
            eligible = probeIndex.map { [$0] } ?? []
        case .reject(let after):
            for i in eligible { outcomes[i] = DeliveryOutcome(.retry, reason: "circuit_open", retryAfter: after) }
            eligible = []
        }

        // Pacing per app credential.
        if let rate = configuration.ratePerSecond, !eligible.isEmpty {
            var byApp: [String: [Int]] = [:]
            for i in eligible { byApp[messages[i].device.appID, default: []].append(i) }
            eligible = []
            for (app, indices) in byApp {
                let bucket = buckets.withLockedValue { b in
                    if let existing = b[app] { return existing }
                    let created = TokenBucket(rate: rate)
                    b[app] = created
                    return created
                }
                if await bucket.acquire(indices.count, maxWait: configuration.maxPacingWait) {
                    eligible += indices
                } else {
                    let after = bucket.delay(for: indices.count)
                    for i in indices { outcomes[i] = DeliveryOutcome(.retry, reason: "paced", retryAfter: after) }
                }
                observer.headroom(name, bucket.headroom)
            }
            eligible.sort()
        }

        if !eligible.isEmpty {
            let sent = await inner.send(eligible.map { messages[$0] }, logger: logger)
            var failures = 0
            var successes = 0
            for (k, i) in eligible.enumerated() {
                let outcome = k < sent.count ? sent[k] : DeliveryOutcome(.retry, reason: "no_outcome")
                outcomes[i] = outcome
                if Self.isProviderFailure(outcome) { failures += 1 } else { successes += 1 }
                if outcome.disposition == .credentialsBroken {
                    let app = messages[i].device.appID
                    let until = ContinuousClock.now + configuration.credentialPause
                    let first = paused.withLockedValue { p in
                        defer { p[app] = until }
                        return (p[app].map { $0 < ContinuousClock.now } ?? true)
                    }
                    if first {
                        observer.credentialPaused(name, app)
                        logger.error(
                            "Provider refused a credential; pausing it",
                            metadata: ["push.provider": "\(name)", "app.id": "\(app)", "error.reason": "\(outcome.reason)",
                                       "pause.seconds": "\(configuration.credentialPause.components.seconds)"])
                    }
                }
            }
            // One verdict per request batch: a mixed batch (some 5xx, some ok) counts as success
            // unless failures dominate, so per-token noise never opens the circuit.
            circuit.record(failures: failures >= successes ? failures : 0, probe: probeIndex != nil)
        }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: "no_outcome") }
    }

    /// Failures that say the provider (not one token or message) is unwell.
    static func isProviderFailure(_ outcome: DeliveryOutcome) -> Bool {
        guard outcome.disposition == .retry else { return false }
        switch outcome.reason {
        case "rate_limited", "too_many_requests", "quota_exceeded", "paced", "circuit_open", "credential_paused":
            return false
        default:
            return true
        }
    }
}
