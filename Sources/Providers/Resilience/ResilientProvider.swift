import Clocks
import Foundation
import HeraldCore
import Logging
import NIOConcurrencyHelpers

/// Wraps an adapter with per-credential pacing, a circuit breaker for the provider, and a
/// pause for credentials the provider refused.
///
/// The breaker and the pause act on every provider request as it leaves and as it returns
/// (through the adapter's ``RequestGate``), not once per batch. The rule:
/// - a failure of one delivery while the provider otherwise answers (a 5xx for one message, a
///   timeout) stands and spends that job's attempt; a failure that follows another with no
///   answer between (a run: how an outage begins) is handed back after a second instead;
/// - an outage does not: once the circuit opens, the rest of the batch, every later job, the
///   requests that were still in flight and every failed probe are handed back with a
///   `Retry-After` and no attempt spent; so are the failures that opened it, in every batch that
///   was out when it opened (a batch that had already returned keeps its failures: they were
///   settled before the outage was known);
/// - a credential the provider refused pauses that app's credential; the refused messages and
///   everything for that app during the pause are handed back the same way.
///
/// A handed-back message is a `.retry` (or `.credentialsBroken`) outcome with a `retryAfter`,
/// which the dispatcher treats as a snooze that does not use up an attempt: such jobs are
/// dead-lettered only when their TTL runs out.
package struct ResilientProvider: PushProvider {
    package struct Configuration: Sendable {
        /// Sends per second per app credential; nil = unpaced. Expo documents 600/s.
        package var ratePerSecond: Double?
        /// Longest a batch waits for its pacing tokens before handing messages back. Default 2 s.
        package var maxPacingWait: Duration = .seconds(2)
        package var circuit = CircuitBreaker.Configuration()
        /// How long a credential the provider refused (bad key, revoked) is paused. Default 30 s.
        package var credentialPause: Duration = .seconds(30)
        package init(ratePerSecond: Double? = nil) { self.ratePerSecond = ratePerSecond }
    }

    package var name: String { inner.name }
    private let inner: any PushProvider
    private let configuration: Configuration
    package let circuit: CircuitBreaker
    private let buckets: NIOLockedValueBox<[String: TokenBucket]>
    private let paused: NIOLockedValueBox<[String: ProviderClock.Instant]>
    private let clock: ProviderClock
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

    /// - Parameter clock: the one clock of the breaker, the pacing buckets and credential pauses.
    package init(
        _ inner: any PushProvider,
        configuration: Configuration = .init(),
        observer: Observer = .init(),
        clock: ProviderClock = .continuous
    ) {
        self.inner = inner
        self.configuration = configuration
        self.observer = observer
        self.clock = clock
        let name = inner.name
        self.circuit = CircuitBreaker(configuration: configuration.circuit, clock: clock) {
            observer.circuitChanged(name, $0)
        }
        self.buckets = NIOLockedValueBox([:])
        self.paused = NIOLockedValueBox([:])
        observer.circuitChanged(name, .closed)
    }

    /// Sends through the adapter with this provider's own gate (an outer `gate` is not used:
    /// nothing wraps a `ResilientProvider`).
    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        guard !messages.isEmpty else { return [] }
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)

        // Paused credentials and an open circuit: hand back at once, before pacing.
        var eligible: [Int] = []
        let openingsBefore = circuit.openings
        let openFor = circuit.openRemaining()
        for (i, m) in messages.enumerated() {
            if let refusal = pauseRefusal(app: m.device.appID) {
                outcomes[i] = refusal
            } else if let openFor {
                outcomes[i] = DeliveryOutcome(.retry, reason: .circuitOpen, retryAfter: openFor)
            } else {
                eligible.append(i)
            }
        }

        // Pacing per app credential.
        if let rate = configuration.ratePerSecond, !eligible.isEmpty {
            var byApp: [String: [Int]] = [:]
            for i in eligible { byApp[messages[i].device.appID, default: []].append(i) }
            eligible = []
            for (app, indices) in byApp {
                let bucket = buckets.withLockedValue { b in
                    if let existing = b[app] { return existing }
                    let created = TokenBucket(rate: rate, clock: clock)
                    b[app] = created
                    return created
                }
                if await bucket.acquire(indices.count, maxWait: configuration.maxPacingWait) {
                    eligible += indices
                } else {
                    let after = bucket.delay(for: indices.count)
                    for i in indices { outcomes[i] = DeliveryOutcome(.retry, reason: .paced, retryAfter: after) }
                }
                observer.headroom(name, bucket.headroom)
            }
            eligible.sort()
        }

        if !eligible.isEmpty {
            let own = Gate(provider: self, logger: logger)
            let sent = await inner.send(eligible.map { messages[$0] }, gate: own, logger: logger)
            for (k, i) in eligible.enumerated() {
                outcomes[i] = k < sent.count ? sent[k] : DeliveryOutcome(.retry, reason: .noOutcome)
            }
            // The circuit opened while these requests were out: their provider failures were the
            // outage's first, not one delivery's, the run's first failure too (the breaker let it
            // stand). A job that failed on one worker can come due on another whose circuit has
            // not opened yet; with two attempts, one standing failure on each was a dead letter.
            if circuit.openings != openingsBefore {
                let after = circuit.openRemaining() ?? CircuitBreaker.probeWait
                for i in eligible { outcomes[i] = outcomes[i].map { Self.handedBack($0, after: after) } }
            }
        }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    /// The hand-back for an app whose credential is paused, nil when it is not.
    private func pauseRefusal(app: String) -> DeliveryOutcome? {
        let now = clock.now
        guard let until = paused.withLockedValue({ $0[app] }), until > now else { return nil }
        return DeliveryOutcome(.retry, reason: .credentialPaused, retryAfter: until - now)
    }

    /// Pauses `app`'s credential (once per refusal period) and returns the pause's length.
    private func pause(app: String, reason: DeliveryOutcome.Reason, logger: Logger) -> Duration {
        let now = clock.now
        let (first, until) = paused.withLockedValue { p -> (Bool, ProviderClock.Instant) in
            if let current = p[app], current > now { return (false, current) }
            p[app] = now + configuration.credentialPause
            return (true, now + configuration.credentialPause)
        }
        if first {
            observer.credentialPaused(name, app)
            logger.error(
                "Provider refused a credential; pausing it",
                metadata: [
                    "push.provider": "\(name)", "app.id": "\(app)", "error.reason": "\(reason)",
                    "pause.seconds": "\(configuration.credentialPause.components.seconds)",
                ]
            )
        }
        return until - now
    }

    /// The per-request side: the credential pause and the circuit breaker.
    private struct Gate: RequestGate {
        let provider: ResilientProvider
        let logger: Logger

        func admit(appID app: String, weight: Int) async -> RequestAdmission {
            if let refusal = provider.pauseRefusal(app: app) { return .handBack(refusal) }
            let probe: Bool
            switch await provider.circuit.permit(weight: weight) {
            case .pass: probe = false
            case .probe: probe = true
            case .reject(let after): return .handBack(DeliveryOutcome(.retry, reason: .circuitOpen, retryAfter: after))
            }
            // The credential may have been refused while this request waited for its permit.
            if let refusal = provider.pauseRefusal(app: app) {
                provider.circuit.release(probe: probe, weight: weight)
                return .handBack(refusal)
            }
            return .go(RequestTicket(probe: probe, appID: app, weight: weight))
        }

        func admitNow(appID app: String, weight: Int) -> RequestAdmission? {
            if let refusal = provider.pauseRefusal(app: app) { return .handBack(refusal) }
            switch provider.circuit.permitNow(weight: weight) {
            case nil: return nil
            case .pass: return .go(RequestTicket(probe: false, appID: app, weight: weight))
            case .probe: return .go(RequestTicket(probe: true, appID: app, weight: weight))
            case .reject(let after):
                return .handBack(DeliveryOutcome(.retry, reason: .circuitOpen, retryAfter: after))
            }
        }

        func complete(_ ticket: RequestTicket, _ outcomes: [DeliveryOutcome]) -> [DeliveryOutcome] {
            var outcomes = outcomes
            // Our credential refused: pause it; these messages spend no attempt.
            for (k, outcome) in outcomes.enumerated() where ResilientProvider.isCredentialRefusal(outcome) {
                outcomes[k].retryAfter = provider.pause(app: ticket.appID, reason: outcome.reason, logger: logger)
            }
            switch provider.circuit.record(Self.health(of: outcomes), probe: ticket.probe, weight: ticket.weight) {
            case .stands:
                return outcomes
            case .handBack(let after):
                return outcomes.map {
                    ResilientProvider.handedBack($0, after: after, reason: ticket.probe ? .probeFailed : nil)
                }
            }
        }

        /// A request failed when every message in it failed at the provider level; credential and
        /// rate-limit answers say nothing about the provider's health.
        static func health(of outcomes: [DeliveryOutcome]) -> CircuitBreaker.Result {
            if !outcomes.isEmpty && outcomes.allSatisfy(ResilientProvider.isProviderFailure) { return .failure }
            if outcomes.contains(where: { $0.disposition != .retry && $0.disposition != .credentialsBroken }) {
                return .success
            }
            return .neutral
        }
    }

    /// A credential the provider refused (not a message or token problem, not a missing app).
    static func isCredentialRefusal(_ outcome: DeliveryOutcome) -> Bool {
        outcome.disposition == .credentialsBroken && outcome.reason != .appNotConfigured
    }

    /// `outcome` handed back when it is a provider failure: due again after `after` with no
    /// attempt spent (optionally under another reason), or after the longer `Retry-After` it
    /// already carries (the provider's own, as FCM's 503 may send; a failed probe's spacing).
    static func handedBack(
        _ outcome: DeliveryOutcome,
        after: Duration,
        reason: DeliveryOutcome.Reason? = nil
    ) -> DeliveryOutcome {
        guard isProviderFailure(outcome) else { return outcome }
        var handed = outcome
        handed.retryAfter = max(outcome.retryAfter ?? .zero, after)
        if let reason { handed.reason = reason }
        return handed
    }

    /// Failures that say the provider (not one token or message) is unwell.
    static func isProviderFailure(_ outcome: DeliveryOutcome) -> Bool {
        guard outcome.disposition == .retry else { return false }
        switch outcome.reason {
        case .rateLimited, .quotaExceeded, .paced, .circuitOpen, .credentialPaused:
            return false
        default:
            return true
        }
    }
}
