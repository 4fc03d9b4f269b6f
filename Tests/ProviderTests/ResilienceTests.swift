import Clocks
import Foundation
import HeraldCore
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import Providers

/// A provider whose answer is switched by the test: healthy, down (503), or refusing credentials.
/// It sends one request per message through the shared driver, so the gate sees each one.
private final class Switchable: PushProvider, Sendable {
    enum Mode {
        case healthy, down
        case downAsking(Duration)
        case badCredentials
    }
    let name = "switchable"
    let mode = NIOLockedValueBox(Mode.healthy)
    let calls = NIOLockedValueBox(0)
    let concurrency: Int

    init(concurrency: Int = 1) { self.concurrency = concurrency }

    func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        await RequestDriver.sendEach(messages, concurrency: concurrency, gate: gate) { _ in
            self.calls.withLockedValue { $0 += 1 }
            // A real request takes a moment: siblings are in flight together.
            try? await Task.sleep(for: .milliseconds(2))
            switch self.mode.withLockedValue({ $0 }) {
            case .healthy: return .accepted
            case .down: return DeliveryOutcome(.retry, reason: .unavailable)
            case .downAsking(let after): return DeliveryOutcome(.retry, reason: .unavailable, retryAfter: after)
            case .badCredentials: return DeliveryOutcome(.credentialsBroken, reason: .invalidProviderToken)
            }
        }
    }
}

private func messages(_ n: Int, app: String = "default") -> [PushMessage] {
    (0..<n).map { i in
        PushMessage(
            jobID: Int64(i),
            device: Device(id: Int64(i), userID: "u\(i)", provider: .apns, token: "t\(i)", appID: app),
            title: "t",
            body: "b",
            collapseID: "c\(i)",
            expiresAt: Date() + 3600
        )
    }
}

/// Every breaker, bucket and pause here runs on a `TestClock`: time moves when a test advances
/// it, so no test sleeps and the default durations (5 s open, 30 s pause) are used as shipped.
@Suite struct ResilienceTests {
    let logger = Logger(label: "test")

    @Test func outageOpensCircuitAndRecoveryClosesIt() async throws {
        let inner = Switchable()
        var configuration = ResilientProvider.Configuration()
        configuration.circuit.failureThreshold = 5
        let clock = TestClock()
        let states = NIOLockedValueBox<[CircuitBreaker.State]>([])
        let provider = ResilientProvider(
            inner,
            configuration: configuration,
            observer: .init(circuitChanged: { _, s in states.withLockedValue { $0.append(s) } }),
            clock: AnyClock(clock)
        )

        inner.mode.withLockedValue { $0 = .down }
        let first = await provider.send(messages(10), logger: logger)
        // Once the circuit opens the rest of the batch is handed back with a Retry-After and never
        // reaches the provider; the threshold's failures, which opened it while this batch was
        // out, are handed back too (the open period's Retry-After: no attempt spent).
        #expect(
            first.prefix(5).allSatisfy {
                $0.disposition == .retry && $0.reason == .unavailable && $0.retryAfter == .seconds(5)
            }
        )
        #expect(first.dropFirst(5).allSatisfy { $0.reason == .circuitOpen && $0.retryAfter != nil })
        #expect(inner.calls.withLockedValue { $0 } == 5)
        #expect(provider.circuit.state == .open)

        // While open nothing reaches the provider, and every message carries a Retry-After.
        let callsBefore = inner.calls.withLockedValue { $0 }
        let rejected = await provider.send(messages(10), logger: logger)
        #expect(rejected.allSatisfy { $0.reason == .circuitOpen && $0.retryAfter != nil })
        #expect(inner.calls.withLockedValue { $0 } == callsBefore)

        // After the open period a single probe goes through; the provider is back, so it closes.
        inner.mode.withLockedValue { $0 = .healthy }
        await clock.advance(by: .seconds(4))
        #expect(await provider.send(messages(1), logger: logger)[0].retryAfter == .seconds(1))  // still open
        await clock.advance(by: .seconds(1))  // the default open period (5 s) is over
        // Requests go one at a time here: the first is the probe, and once it succeeds the circuit
        // is closed for the ones after it.
        let probed = await provider.send(messages(3), logger: logger)
        #expect(probed.allSatisfy { $0.disposition == .accepted })
        #expect(provider.circuit.state == .closed)
        let after = await provider.send(messages(10), logger: logger)
        #expect(after.allSatisfy { $0.disposition == .accepted })
        #expect(states.withLockedValue { $0 } == [.closed, .open, .halfOpen, .closed])
    }

    @Test func failedProbeReopensForLonger() async throws {
        let inner = Switchable()
        var configuration = ResilientProvider.Configuration()
        configuration.circuit.failureThreshold = 1
        let clock = TestClock()
        let provider = ResilientProvider(inner, configuration: configuration, clock: AnyClock(clock))
        inner.mode.withLockedValue { $0 = .down }
        _ = await provider.send(messages(1), logger: logger)
        await clock.advance(by: .seconds(5))
        let probe = await provider.send(messages(1), logger: logger)  // the probe fails
        #expect(provider.circuit.state == .open)
        // A failed probe spends no attempt, and comes back after the next probe's time: the
        // open period doubled (10 s) plus a second, so the next probe is another job.
        #expect(probe[0].reason == .probeFailed)
        #expect(probe[0].retryAfter == .seconds(11))
        let rejected = await provider.send(messages(1), logger: logger)
        #expect(rejected[0].retryAfter == .seconds(10))
        await clock.advance(by: .seconds(10))
        inner.mode.withLockedValue { $0 = .down }
        _ = await provider.send(messages(1), logger: logger)  // fails again: 20 s
        #expect(await provider.send(messages(1), logger: logger)[0].retryAfter == .seconds(20))
    }

    @Test("a circuit adopted from another worker hands everything back for the time left, then probes for itself")
    func adoptedCircuit() async throws {
        let inner = Switchable()
        let clock = TestClock()
        let states = NIOLockedValueBox<[CircuitBreaker.State]>([])
        let provider = ResilientProvider(
            inner,
            observer: .init(circuitChanged: { _, s in states.withLockedValue { $0.append(s) } }),
            clock: AnyClock(clock)
        )
        inner.mode.withLockedValue { $0 = .down }
        // Another worker's circuit is open for 7 s more: nothing reaches the provider, no
        // attempt is spent, and it is not this worker's own outage to share again.
        #expect(provider.circuit.adopt(openFor: .seconds(7)))
        #expect(provider.circuit.ownOpenRemaining() == nil)
        #expect(provider.circuit.isAdoptedOpen)
        #expect(provider.circuit.openRemaining() == .seconds(7))
        let handedBack = await provider.send(messages(30), logger: logger)
        #expect(handedBack.allSatisfy { $0.reason == .circuitOpen && $0.retryAfter == .seconds(7) })
        #expect(inner.calls.withLockedValue { $0 } == 0)
        // An open circuit keeps its own schedule: a later adoption does not lengthen it.
        #expect(!provider.circuit.adopt(openFor: .seconds(30)))
        #expect(!provider.circuit.adopt(openFor: .zero))
        // Its time up, it probes for itself; the provider is still down, so the probe fails and
        // the circuit is open on its own account, for the doubled period (10 s).
        await clock.advance(by: .seconds(7))
        let probe = await provider.send(messages(1), logger: logger)
        #expect(probe[0].reason == .probeFailed)
        #expect(inner.calls.withLockedValue { $0 } == 1)
        #expect(provider.circuit.ownOpenRemaining()?.remaining == .seconds(10))
        #expect(provider.circuit.ownOpenRemaining()?.opening == 1)
        #expect(!provider.circuit.isAdoptedOpen)
        // Its own period is not ended by the others'.
        provider.circuit.endAdoption()
        #expect(provider.circuit.openRemaining() == .seconds(10))
        // Back: the next probe closes it.
        inner.mode.withLockedValue { $0 = .healthy }
        await clock.advance(by: .seconds(10))
        #expect(await provider.send(messages(3), logger: logger).allSatisfy { $0.disposition == .accepted })
        #expect(provider.circuit.state == .closed)
        #expect(states.withLockedValue { $0 } == [.closed, .open, .halfOpen, .open, .halfOpen, .closed])
    }

    @Test("an adopted circuit whose shared period ended early probes at once; a good probe closes it")
    func adoptionEndedEarly() async throws {
        let inner = Switchable()
        let clock = TestClock()
        let provider = ResilientProvider(inner, clock: AnyClock(clock))
        #expect(provider.circuit.adopt(openFor: .seconds(40)))
        await clock.advance(by: .seconds(3))
        provider.circuit.endAdoption()  // another worker's probe found the provider back
        #expect(provider.circuit.openRemaining() == nil)
        #expect(await provider.send(messages(5), logger: logger).allSatisfy { $0.disposition == .accepted })
        #expect(provider.circuit.state == .closed)
        #expect(inner.calls.withLockedValue { $0 } == 5)
    }

    @Test func refusedCredentialIsPausedPerApp() async throws {
        let inner = Switchable()
        let paused = NIOLockedValueBox<[String]>([])
        let clock = TestClock()
        let provider = ResilientProvider(
            inner,
            observer: .init(credentialPaused: { _, app in paused.withLockedValue { $0.append(app) } }),
            clock: AnyClock(clock)
        )
        inner.mode.withLockedValue { $0 = .badCredentials }
        let refused = await provider.send(messages(2, app: "foodshare"), logger: logger)
        // The refusal itself spends no attempt: it carries the pause as its Retry-After.
        // The second message was not even tried: the credential was paused by then.
        #expect(refused[0].disposition == .credentialsBroken && refused[1].reason == .credentialPaused)
        #expect(refused.allSatisfy { $0.retryAfter == .seconds(30) })  // the default pause
        inner.mode.withLockedValue { $0 = .healthy }
        await clock.advance(by: .seconds(20))
        let again = await provider.send(messages(2, app: "foodshare"), logger: logger)
        #expect(again.allSatisfy { $0.reason == .credentialPaused && $0.retryAfter == .seconds(10) })
        let other = await provider.send(messages(2, app: "dsober"), logger: logger)
        #expect(other.allSatisfy { $0.disposition == .accepted })
        #expect(paused.withLockedValue { $0 } == ["foodshare"])
        #expect(provider.circuit.state == .closed)
        await clock.advance(by: .seconds(10))  // the pause is over: the fixed credential is used
        #expect(
            await provider.send(messages(2, app: "foodshare"), logger: logger).allSatisfy {
                $0.disposition == .accepted
            }
        )
    }

    @Test func pacingWaitsShortlyThenHandsBack() async throws {
        let inner = Switchable()
        var configuration = ResilientProvider.Configuration(ratePerSecond: 100)
        configuration.maxPacingWait = .milliseconds(300)
        let clock = TestClock()
        let provider = ResilientProvider(inner, configuration: configuration, clock: AnyClock(clock))
        let burst = await provider.send(messages(100), logger: logger)  // the burst allowance
        #expect(burst.allSatisfy { $0.disposition == .accepted })
        let paced = Task { await provider.send(messages(20), logger: logger) }  // 200 ms of tokens: waits
        var waiting = false
        // checkSuspension() throws while something sleeps on the clock.
        for _ in 0..<1000 where !waiting { waiting = (try? await clock.checkSuspension()) == nil }
        #expect(waiting, "the bucket waits on the clock for its tokens")
        #expect(inner.calls.withLockedValue { $0 } == 100)
        await clock.advance(by: .milliseconds(201))
        #expect(await paced.value.allSatisfy { $0.disposition == .accepted })
        let refused = await provider.send(messages(1000), logger: logger)  // would need ~10 s: handed back
        #expect(refused.allSatisfy { $0.reason == .paced && $0.retryAfter != nil })
        #expect(inner.calls.withLockedValue { $0 } == 120)
    }

    @Test("an outage during concurrent sends reaches the provider at most threshold times, then hands everything back")
    func concurrentOutageIsBounded() async throws {
        let inner = Switchable(concurrency: 64)
        let configuration = ResilientProvider.Configuration()  // the defaults (threshold 20, 5 s open)
        let provider = ResilientProvider(inner, configuration: configuration, clock: AnyClock(TestClock()))
        inner.mode.withLockedValue { $0 = .down }
        // Four batches in flight at once, as a worker runs them.
        let batches = await withTaskGroup(of: [DeliveryOutcome].self) { group in
            for _ in 0..<4 { group.addTask { await provider.send(messages(200), logger: self.logger) } }
            var all: [[DeliveryOutcome]] = []
            for await batch in group { all.append(batch) }
            return all
        }
        let outcomes = batches.flatMap { $0 }
        let threshold = configuration.circuit.failureThreshold
        #expect(inner.calls.withLockedValue { $0 } <= threshold)
        // The threshold's failures opened the circuit while all four batches were out: none of
        // them spends an attempt either.
        #expect(outcomes.allSatisfy { $0.retryAfter != nil })
        #expect(outcomes.filter { $0.reason == .circuitOpen }.count >= 800 - threshold)
        #expect(provider.circuit.state == .open)
        #expect(provider.circuit.inFlight == 0)
    }

    @Test(
        "a run's first failure stands; the failures after it, and those of a batch out when the circuit opened, are handed back"
    )
    func runOfFailures() async throws {
        let inner = Switchable()
        var configuration = ResilientProvider.Configuration()
        configuration.circuit.failureThreshold = 5
        let provider = ResilientProvider(inner, configuration: configuration, clock: AnyClock(TestClock()))
        inner.mode.withLockedValue { $0 = .down }
        // Three failures, below the threshold: the first spends its job's attempt (nothing yet
        // says the provider is down); the two after it, with no answer between, are a run's and
        // come back after a second without spending one.
        let early = await provider.send(messages(3), logger: logger)
        #expect(early.allSatisfy { $0.reason == .unavailable })
        #expect(early.map(\.retryAfter) == [nil, .seconds(1), .seconds(1)])
        #expect(provider.circuit.state == .closed)
        // Two more open the circuit while this batch is out: its failures are the outage's, handed
        // back for the open period like the requests after them.
        let opening = await provider.send(messages(4), logger: logger)
        #expect(provider.circuit.state == .open)
        #expect(opening.prefix(2).allSatisfy { $0.reason == .unavailable && $0.retryAfter == .seconds(5) })
        #expect(opening.dropFirst(2).allSatisfy { $0.reason == .circuitOpen && $0.retryAfter == .seconds(5) })
        #expect(inner.calls.withLockedValue { $0 } == 5)
        // An answer ends a run: the next failure stands again.
        let flaky = Switchable()
        let other = ResilientProvider(flaky, configuration: configuration, clock: AnyClock(TestClock()))
        flaky.mode.withLockedValue { $0 = .down }
        #expect(await other.send(messages(2), logger: logger).map(\.retryAfter) == [nil, .seconds(1)])
        flaky.mode.withLockedValue { $0 = .healthy }
        #expect(await other.send(messages(1), logger: logger).allSatisfy { $0.disposition == .accepted })
        flaky.mode.withLockedValue { $0 = .down }
        let blip = await other.send(messages(1), logger: logger)
        #expect(other.circuit.state == .closed)
        #expect(blip.allSatisfy { $0.reason == .unavailable && $0.retryAfter == nil })
        // A provider's own longer Retry-After (FCM's 503 may carry one) is kept when a run's
        // failure, or the failure that opens the circuit, is handed back.
        flaky.mode.withLockedValue { $0 = .downAsking(.seconds(30)) }
        let asked = await other.send(messages(4), logger: logger)  // the blip and these four open it
        #expect(other.circuit.state == .open)
        #expect(asked.allSatisfy { $0.reason == .unavailable && $0.retryAfter == .seconds(30) })
    }

    @Test("a failed request of several messages is a run by itself: handed back; one of a single message stands")
    func severalMessagesAreARun() {
        let breaker = CircuitBreaker(clock: AnyClock(TestClock()))
        #expect(breaker.record(.failure, probe: false, weight: 12) == .handBack(CircuitBreaker.probeWait))
        #expect(breaker.state == .closed)
        let other = CircuitBreaker(clock: AnyClock(TestClock()))
        #expect(other.record(.failure, probe: false, weight: 1) == .stands)
    }

    @Test("a healthy provider runs at full concurrency once it has answered threshold requests")
    func healthyProviderIsNotThrottled() async throws {
        let inner = Switchable(concurrency: 64)
        let provider = ResilientProvider(inner)
        let first = await provider.send(messages(300), logger: logger)
        #expect(first.allSatisfy { $0.disposition == .accepted })
        #expect(provider.circuit.state == .closed)
        #expect(provider.circuit.inFlight == 0)
    }
}
