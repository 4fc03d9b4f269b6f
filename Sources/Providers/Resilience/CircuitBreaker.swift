import Clocks
import Foundation
import HeraldCore
import NIOConcurrencyHelpers

/// Stops sending to a provider that is failing as a whole, so an outage costs time, not attempts.
///
/// It is consulted once per provider request, just before the request leaves, and told the
/// request's result as soon as it is known, so it sees failures as they happen rather than when
/// a whole batch is done.
///
/// Failures and the in-flight bound count messages, not requests, so a provider that carries
/// 100 messages per request (Expo) is judged like one that carries one.
///
/// - Closed: requests pass, with a bound on the messages in flight (a request over it waits for
///   one to finish; one request at a time at least). While the provider is *suspect* — its last
///   request failed — in-flight messages plus consecutive failures stay within
///   `failureThreshold`, so an outage reaches it at most `failureThreshold` times before the
///   circuit opens. Otherwise the bound is `max(failureThreshold, 2 × credit)`, where credit
///   counts the messages answered since start or since the circuit closed and is halved by each
///   failure: a slow start that doubles per round trip, so a provider that just came back (or
///   just started) is not hit by the whole backlog at once, and is unbounded in steady state.
/// - Open: nothing passes for `openDuration` (doubling after each failed probe, up to
///   `maxOpenDuration`); callers hand their messages back with `Retry-After` = the time left,
///   which does not use up an attempt. Failures that arrive after the circuit opened (requests
///   that were already in flight) are handed back the same way, and so are the failures that
///   opened it, by their caller (``ResilientProvider`` hands back the provider failures of every
///   batch that was out when ``openings`` grew).
/// - A run of failures: only its first failure stands (``Verdict/stands``); each failure after
///   another with no answer between is handed back after ``probeWait``, the one that opens the
///   circuit after the open period; a request of several messages that all failed is a run by
///   itself. An outage's first failures are such a run. Each worker counts its own, and a job
///   that failed on one worker can come due on another whose circuit is still closed: while a
///   run's failures spent attempts, outages that every circuit saw still dead-lettered jobs. An
///   isolated failure (the provider answered before and after) spends its attempt.
/// - Half-open: one probe request at a time. Success closes the circuit; failure re-opens it and
///   the probe too is handed back without spending an attempt, a little later than the others so
///   the next probe is another job.
package final class CircuitBreaker: Sendable {
    package enum State: Int, Sendable {
        case closed = 0
        case halfOpen = 1
        case open = 2
    }

    package struct Configuration: Sendable {
        /// Consecutive provider-level failures (failed messages) that open the circuit; also the
        /// bound on requests in flight while the provider is suspect. Default 20.
        package var failureThreshold = 20
        /// First open period. Default 5 s; doubles per failed probe.
        package var openDuration: Duration = .seconds(5)
        /// Longest open period. Default 60 s.
        package var maxOpenDuration: Duration = .seconds(60)
        package init() {}
    }

    /// What a caller may do with one request.
    package enum Permit: Sendable, Equatable {
        /// Send it; report its result with ``record(_:probe:)`` (`probe: false`).
        case pass
        /// Send it as the half-open probe; report with `probe: true`.
        case probe
        /// Do not send; hand it back to be tried after this long.
        case reject(Duration)
    }

    /// What a request's result means for the jobs it carried.
    package enum Verdict: Sendable, Equatable {
        /// The result stands (a success, or a failure that spends the job's attempt: one after an
        /// answer, the first of a run).
        case stands
        /// An outage answered it: hand the messages back after this long, spending no attempt.
        case handBack(Duration)
    }

    /// The result of one request as the breaker sees it.
    package enum Result: Sendable {
        /// The provider answered (even a per-token refusal).
        case success
        /// The provider failed as a whole (5xx, timeout, connection error).
        case failure
        /// Says nothing about the provider's health (rate limits, our credentials).
        case neutral
    }

    private struct Inner {
        var state: State = .closed
        var consecutiveFailures = 0
        /// Messages answered since the circuit last closed, halved by each failure: the in-flight
        /// bound grows with it (slow start), so a provider that just came back is not hit by the
        /// whole backlog at once.
        var credit = 0
        var inFlight = 0
        /// Messages carried by the requests in flight.
        var inFlightWeight = 0
        var openUntil: ProviderClock.Instant
        var currentOpen: Duration
        var probeInFlight = false
        /// Opened by ``adopt(openFor:)`` (another worker's outage), not by this worker's failures.
        var adopted = false
        /// How many times this worker's own failures have opened the circuit.
        var openings = 0
        var waiters: [Waiter] = []
    }

    private struct Waiter {
        var continuation: CheckedContinuation<Permit, Never>
        var weight: Int
    }

    /// How long a request refused because a probe is in flight waits before it asks again.
    static let probeWait: Duration = .seconds(1)
    /// How much later than the others a failed probe is handed back, so the next probe is another job.
    static let probeSpacing: Duration = .seconds(1)

    package let configuration: Configuration
    /// Open periods and probe waits are measured on it (tests pass a `TestClock`).
    private let clock: ProviderClock
    private let inner: NIOLockedValueBox<Inner>
    /// Called on every state change (metrics, logs).
    private let onChange: @Sendable (State) -> Void

    package init(
        configuration: Configuration = .init(),
        clock: ProviderClock = .continuous,
        onChange: @escaping @Sendable (State) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.clock = clock
        self.inner = NIOLockedValueBox(Inner(openUntil: clock.now, currentOpen: configuration.openDuration))
        self.onChange = onChange
    }

    package var state: State { inner.withLockedValue { $0.state } }

    /// Requests currently admitted and not yet recorded.
    package var inFlight: Int { inner.withLockedValue { $0.inFlight } }

    /// How many times this worker's own failures have opened the circuit (a run of
    /// `failureThreshold` failures, or a failed probe). A caller compares it before and after
    /// its requests to learn whether the circuit opened while they were out.
    package var openings: Int { inner.withLockedValue { $0.openings } }

    /// The time left while the circuit is open, without taking a permit; nil when requests may be tried.
    package func openRemaining() -> Duration? {
        inner.withLockedValue { s in
            let now = clock.now
            return s.state == .open && now < s.openUntil ? s.openUntil - now : nil
        }
    }

    /// ``openRemaining()`` for a circuit this worker's own failures opened, with which of its
    /// openings this is (a failed probe opens it again: a new period); nil for one it adopted
    /// (``adopt(openFor:)``), which is another worker's news, not this one's.
    package func ownOpenRemaining() -> (remaining: Duration, opening: Int)? {
        inner.withLockedValue { s in
            let now = clock.now
            return s.state == .open && !s.adopted && now < s.openUntil ? (s.openUntil - now, s.openings) : nil
        }
    }

    /// Whether the circuit is open because it adopted another worker's (``adopt(openFor:)``).
    package var isAdoptedOpen: Bool {
        inner.withLockedValue { s in s.state == .open && s.adopted && clock.now < s.openUntil }
    }

    /// Ends an adopted open period now, because the other workers' ended early (one of them
    /// probed and the provider answered): the next request is this worker's probe. A circuit its
    /// own failures opened keeps its schedule.
    package func endAdoption() {
        inner.withLockedValue { s in
            guard s.state == .open, s.adopted else { return }
            s.openUntil = min(s.openUntil, clock.now)
        }
    }

    /// Opens a closed circuit for `remaining`, because another worker's circuit for the same
    /// provider is open: this worker's requests would only find the same outage, each spending
    /// a job's attempt (a worker that starts during an outage would spend up to
    /// `failureThreshold` of them before its own circuit opened). Requests are handed back for
    /// the time left, as by an open circuit of its own; then this circuit probes for itself. A
    /// circuit that is already open or probing keeps its own schedule. Returns whether it opened.
    /// Herald calls it once, as the worker starts (`CircuitExchange.adoptOnce`): a running
    /// worker counts its own failures.
    @discardableResult
    package func adopt(openFor remaining: Duration) -> Bool {
        guard remaining > .zero else { return false }
        var changed: State?
        var resume: [(CheckedContinuation<Permit, Never>, Permit)] = []
        inner.withLockedValue { s in
            guard s.state == .closed else { return }
            s.state = .open
            s.adopted = true
            s.credit = 0
            s.consecutiveFailures = 0
            s.openUntil = clock.now + remaining
            changed = .open
            // Requests waiting for the in-flight bound are refused now, like any other.
            resume = Self.serveWaiters(&s, configuration, now: clock.now, changed: &changed)
        }
        if let changed { onChange(changed) }
        for (c, p) in resume { c.resume(returning: p) }
        return changed != nil
    }

    /// A permit for one request. While the provider is suspect and the in-flight bound is
    /// reached, waits until a request in flight finishes (requests always finish: every adapter
    /// has a request timeout).
    ///
    /// - Parameter weight: how many messages the request carries; while the provider is suspect,
    ///   the messages in flight plus the failures so far stay within `failureThreshold` (one
    ///   request at a time at least).
    package func permit(weight: Int = 1) async -> Permit {
        var changed: State?
        let weight = max(1, weight)
        let immediate: Permit? = inner.withLockedValue { s in
            guard s.waiters.isEmpty else { return nil }  // first come, first served
            return Self.grant(&s, configuration, weight: weight, now: clock.now, changed: &changed)
        }
        if let changed { onChange(changed) }
        if let immediate { return immediate }
        return await withCheckedContinuation { continuation in
            var resume: [(CheckedContinuation<Permit, Never>, Permit)] = []
            var changed: State?
            inner.withLockedValue { s in
                s.waiters.append(Waiter(continuation: continuation, weight: weight))
                resume = Self.serveWaiters(&s, configuration, now: clock.now, changed: &changed)
            }
            if let changed { onChange(changed) }
            for (c, p) in resume { c.resume(returning: p) }
        }
    }

    /// The permit ``permit(weight:)`` would give at once; nil when it would wait.
    package func permitNow(weight: Int = 1) -> Permit? {
        var changed: State?
        let weight = max(1, weight)
        let permit: Permit? = inner.withLockedValue { s in
            guard s.waiters.isEmpty else { return nil }
            return Self.grant(&s, configuration, weight: weight, now: clock.now, changed: &changed)
        }
        if let changed { onChange(changed) }
        return permit
    }

    /// Reports a permitted request's result and says whether it stands or is handed back.
    ///
    /// - Parameter weight: how many messages the request carried (an Expo request carries up to
    ///   100): a failed request counts that many failures, so a provider that batches opens the
    ///   circuit after as many failed messages as one that does not.
    @discardableResult
    package func record(_ result: Result, probe: Bool, weight: Int = 1) -> Verdict {
        var changed: State?
        var resume: [(CheckedContinuation<Permit, Never>, Permit)] = []
        let weight = max(1, weight)
        let verdict: Verdict = inner.withLockedValue { s in
            let now = clock.now
            s.inFlight = max(0, s.inFlight - 1)
            s.inFlightWeight = max(0, s.inFlightWeight - weight)
            var verdict = Verdict.stands
            if probe {
                s.probeInFlight = false
                s.adopted = false
                if case .failure = result {
                    s.currentOpen = min(s.currentOpen * 2, configuration.maxOpenDuration)
                    s.openings += 1
                    s.state = .open
                    s.openUntil = now + s.currentOpen
                    changed = .open
                    verdict = .handBack(s.currentOpen + Self.probeSpacing)
                } else {
                    s.state = .closed
                    s.consecutiveFailures = 0
                    s.credit = weight
                    s.currentOpen = configuration.openDuration
                    changed = .closed
                }
            } else {
                switch result {
                case .failure where s.state != .closed:
                    // Already open (or probing): this request was in flight when the outage was seen.
                    verdict = .handBack(s.state == .open && now < s.openUntil ? s.openUntil - now : Self.probeWait)
                case .failure:
                    // Another failure before it with no answer between: a run, which is how an
                    // outage begins, so it is handed back. Only a run's first failure stands. A
                    // request of several messages that all failed (Expo's) is a run by itself: the
                    // breaker counts messages, and one such request on each of two workers could
                    // otherwise spend two attempts of each of its jobs.
                    let inRun = s.consecutiveFailures > 0 || weight > 1
                    s.consecutiveFailures += weight
                    s.credit /= 2
                    if s.consecutiveFailures >= configuration.failureThreshold {
                        s.credit = 0
                        s.openings += 1
                        s.adopted = false
                        s.state = .open
                        s.currentOpen = configuration.openDuration
                        s.openUntil = now + s.currentOpen
                        changed = .open
                        verdict = .handBack(s.currentOpen)
                    } else if inRun {
                        verdict = .handBack(Self.probeWait)
                    }
                case .success:
                    s.consecutiveFailures = 0
                    s.credit = min(s.credit + weight, 1 << 30)
                case .neutral:
                    break
                }
            }
            resume = Self.serveWaiters(&s, configuration, now: clock.now, changed: &changed)
            return verdict
        }
        if let changed { onChange(changed) }
        for (c, p) in resume { c.resume(returning: p) }
        return verdict
    }

    /// Gives back a permit whose request was not sent after all.
    package func release(probe: Bool, weight: Int = 1) {
        var changed: State?
        let resume = inner.withLockedValue { s in
            s.inFlight = max(0, s.inFlight - 1)
            s.inFlightWeight = max(0, s.inFlightWeight - max(1, weight))
            if probe { s.probeInFlight = false }
            return Self.serveWaiters(&s, configuration, now: clock.now, changed: &changed)
        }
        if let changed { onChange(changed) }
        for (c, p) in resume { c.resume(returning: p) }
    }

    /// Grants a permit, or nil when the caller must wait for a request in flight.
    private static func grant(
        _ s: inout Inner,
        _ configuration: Configuration,
        weight: Int,
        now: ProviderClock.Instant,
        changed: inout State?
    ) -> Permit? {
        switch s.state {
        case .closed:
            // Suspect (its last requests failed): in flight plus failures stay within the threshold.
            // Otherwise the bound is twice what the provider answered since the circuit closed.
            let threshold = configuration.failureThreshold
            let limit =
                s.consecutiveFailures > 0
                ? threshold - s.consecutiveFailures : max(threshold, 2 * s.credit)
            guard s.inFlight == 0 || s.inFlightWeight + weight <= limit else { return nil }
            s.inFlight += 1
            s.inFlightWeight += weight
            return .pass
        case .open:
            if now < s.openUntil { return .reject(s.openUntil - now) }
            s.state = .halfOpen
            changed = .halfOpen
        case .halfOpen:
            if s.probeInFlight { return .reject(probeWait) }
        }
        s.probeInFlight = true
        s.inFlight += 1
        s.inFlightWeight += weight
        return .probe
    }

    /// Answers waiting requests in order for as long as permits are available.
    private static func serveWaiters(
        _ s: inout Inner,
        _ configuration: Configuration,
        now: ProviderClock.Instant,
        changed: inout State?
    ) -> [(CheckedContinuation<Permit, Never>, Permit)] {
        var resume: [(CheckedContinuation<Permit, Never>, Permit)] = []
        while let first = s.waiters.first,
            let permit = grant(&s, configuration, weight: first.weight, now: now, changed: &changed)
        {
            s.waiters.removeFirst()
            resume.append((first.continuation, permit))
        }
        return resume
    }
}
