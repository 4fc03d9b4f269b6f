import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import Providers

/// A provider whose answer is switched by the test: healthy, down (503), or refusing credentials.
private final class Switchable: PushProvider, Sendable {
    enum Mode { case healthy, down, badCredentials }
    let name = "switchable"
    let mode = NIOLockedValueBox(Mode.healthy)
    let calls = NIOLockedValueBox(0)

    func send(_ messages: [PushMessage], logger: Logger) async -> [DeliveryOutcome] {
        calls.withLockedValue { $0 += messages.count }
        switch mode.withLockedValue({ $0 }) {
        case .healthy: return messages.map { _ in .accepted }
        case .down: return messages.map { _ in DeliveryOutcome(.retry, reason: "unavailable") }
        case .badCredentials: return messages.map { _ in DeliveryOutcome(.credentialsBroken, reason: "invalid_provider_token") }
        }
    }
}

private func messages(_ n: Int, app: String = "default") -> [PushMessage] {
    (0..<n).map { i in
        PushMessage(
            jobID: Int64(i), device: Device(id: Int64(i), userID: "u\(i)", provider: .apns, token: "t\(i)", appID: app),
            title: "t", body: "b", collapseID: "c\(i)", expiresAt: Date().timeIntervalSince1970 + 3600)
    }
}

@Suite struct ResilienceTests {
    let logger = Logger(label: "test")

    @Test func outageOpensCircuitAndRecoveryClosesIt() async throws {
        let inner = Switchable()
        var configuration = ResilientProvider.Configuration()
        configuration.circuit.failureThreshold = 5
        configuration.circuit.openDuration = .milliseconds(200)
        let states = NIOLockedValueBox<[CircuitBreaker.State]>([])
        let provider = ResilientProvider(
            inner, configuration: configuration,
            observer: .init(circuitChanged: { _, s in states.withLockedValue { $0.append(s) } }))

        inner.mode.withLockedValue { $0 = .down }
        let first = await provider.send(messages(10), logger: logger)
        #expect(first.allSatisfy { $0.disposition == .retry && $0.reason == "unavailable" })
        #expect(provider.circuit.state == .open)

        // While open nothing reaches the provider, and every message carries a Retry-After.
        let callsBefore = inner.calls.withLockedValue { $0 }
        let rejected = await provider.send(messages(10), logger: logger)
        #expect(rejected.allSatisfy { $0.reason == "circuit_open" && $0.retryAfter != nil })
        #expect(inner.calls.withLockedValue { $0 } == callsBefore)

        // After the open period a single probe goes through; the provider is back, so it closes.
        inner.mode.withLockedValue { $0 = .healthy }
        try await Task.sleep(for: .milliseconds(250))
        let probed = await provider.send(messages(3), logger: logger)
        #expect(probed[0].disposition == .accepted)
        #expect(probed[1...].allSatisfy { $0.reason == "circuit_open" })
        #expect(provider.circuit.state == .closed)
        let after = await provider.send(messages(10), logger: logger)
        #expect(after.allSatisfy { $0.disposition == .accepted })
        #expect(states.withLockedValue { $0 } == [.closed, .open, .halfOpen, .closed])
    }

    @Test func failedProbeReopensForLonger() async throws {
        let inner = Switchable()
        var configuration = ResilientProvider.Configuration()
        configuration.circuit.failureThreshold = 1
        configuration.circuit.openDuration = .milliseconds(100)
        let provider = ResilientProvider(inner, configuration: configuration)
        inner.mode.withLockedValue { $0 = .down }
        _ = await provider.send(messages(1), logger: logger)
        try await Task.sleep(for: .milliseconds(150))
        _ = await provider.send(messages(1), logger: logger)  // the probe fails
        #expect(provider.circuit.state == .open)
        let rejected = await provider.send(messages(1), logger: logger)
        let wait = try #require(rejected[0].retryAfter)
        #expect(wait > .milliseconds(120) && wait <= .milliseconds(200))
    }

    @Test func refusedCredentialIsPausedPerApp() async throws {
        let inner = Switchable()
        let paused = NIOLockedValueBox<[String]>([])
        let provider = ResilientProvider(
            inner, observer: .init(credentialPaused: { _, app in paused.withLockedValue { $0.append(app) } }))
        inner.mode.withLockedValue { $0 = .badCredentials }
        _ = await provider.send(messages(2, app: "foodshare"), logger: logger)
        inner.mode.withLockedValue { $0 = .healthy }
        let again = await provider.send(messages(2, app: "foodshare"), logger: logger)
        #expect(again.allSatisfy { $0.reason == "credential_paused" && ($0.retryAfter ?? .zero) > .seconds(50) })
        let other = await provider.send(messages(2, app: "dsober"), logger: logger)
        #expect(other.allSatisfy { $0.disposition == .accepted })
        #expect(paused.withLockedValue { $0 } == ["foodshare"])
        #expect(provider.circuit.state == .closed)
    }

    @Test func pacingWaitsShortlyThenHandsBack() async throws {
        let inner = Switchable()
        var configuration = ResilientProvider.Configuration(ratePerSecond: 100)
        configuration.maxPacingWait = .milliseconds(300)
        let provider = ResilientProvider(inner, configuration: configuration)
        let clock = ContinuousClock()
        let start = clock.now
        let burst = await provider.send(messages(100), logger: logger)  // the burst allowance
        let paced = await provider.send(messages(20), logger: logger)  // ~200 ms of tokens: waits
        let elapsed = clock.now - start
        #expect(burst.allSatisfy { $0.disposition == .accepted })
        #expect(paced.allSatisfy { $0.disposition == .accepted })
        #expect(elapsed >= .milliseconds(150))  // load only makes it longer
        let refused = await provider.send(messages(1000), logger: logger)  // would need ~10 s: handed back
        #expect(refused.allSatisfy { $0.reason == "paced" && $0.retryAfter != nil })
        #expect(inner.calls.withLockedValue { $0 } == 120)
    }
}
