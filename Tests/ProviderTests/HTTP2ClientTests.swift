import Foundation
import HeraldTestSupport
import NIOCore
import NIOPosix
import ProviderSimulator
import Testing

@testable import Providers

/// The lean HTTP/2 client against a server that accepts TCP connections and never says a word
/// (no TLS handshake): a batch must end within its deadline, connecting included, and never hang.
@Suite struct HTTP2ClientTests {
    /// A TCP listener on loopback that accepts and stays silent.
    static func withSilentServer(_ body: (Int) async throws -> Void) async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0).get()
        do {
            try await body(server.localAddress?.port ?? 0)
        } catch {
            try? await server.close()
            throw error
        }
        try? await server.close()
    }

    static let requests = (0..<3).map { HTTP2Request(path: "/3/device/\($0)") }

    @Test func aSilentServerEndsTheBatchAtItsDeadline() async throws {
        try await Self.withSilentServer { port in
            let client = try HTTP2Client(configuration: ProviderHTTPConfiguration(connectTimeout: .seconds(30)))
            let endpoint = try HTTP2Endpoint(url: "https://127.0.0.1:\(port)", setting: "test")
            let started = ContinuousClock.now
            let results = await client.execute(Self.requests, to: endpoint, timeout: .milliseconds(400))
            let took = ContinuousClock.now - started
            #expect(results.count == 3)
            for result in results { #expect(result == .failure(.timeout)) }
            // Bounded by the request's deadline, not by the 30 s connect timeout.
            #expect(took < .seconds(10), "took \(took)")
            // The connection is still handshaking: shutting down does not wait for it.
            let stopping = ContinuousClock.now
            await client.shutdown()
            #expect(ContinuousClock.now - stopping < .seconds(5))
        }
    }

    /// A server that completes TLS without choosing `h2` (HTTP/1.1 only): the batch ends at once,
    /// nothing written, with the error that lets Web Push fall back.
    @Test func aServerWithoutHTTP2FailsTheBatchSoTheCallerCanFallBack() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-h1-\(UUID())").path
        var configuration = SimulatorConfiguration(stateDirectory: directory)
        configuration.applicationProtocols = ["http/1.1"]
        let simulator = ProviderSimulator(configuration: configuration, services: StandardServices.all())
        try await simulator.start()
        let client = try HTTP2Client(
            configuration: ProviderHTTPConfiguration(extraCAFiles: [simulator.caCertificatePath])
        )
        let endpoint = try HTTP2Endpoint(url: simulator.baseURL, setting: "test")
        var results = await client.execute(Self.requests, to: endpoint, timeout: .seconds(10))
        // What this checks is how a completed handshake without `h2` ends the batch. Once, in a CI
        // run's start-up burst, the connection itself failed first (`connectFailed` after 2.7 s;
        // the same test takes 25 ms alone): such a batch is tried once more before judging.
        if results.allSatisfy({ $0 == .failure(.connectFailed) }) {
            results = await client.execute(Self.requests, to: endpoint, timeout: .seconds(10))
        }
        for result in results { #expect(result == .failure(.http2NotNegotiated)) }
        #expect(simulator.context.recorder.records(provider: "apns").isEmpty)
        await client.shutdown()
        try? await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A connection with nothing in flight for the idle timeout is closed and forgotten; the
    /// next batch opens another and is answered.
    @Test func anIdleConnectionIsClosedAndTheNextBatchOpensAnother() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-idle-\(UUID())").path
        let simulator = ProviderSimulator(
            configuration: SimulatorConfiguration(stateDirectory: directory),
            services: StandardServices.all()
        )
        try await simulator.start()
        let client = try HTTP2Client(
            configuration: ProviderHTTPConfiguration(
                extraCAFiles: [simulator.caCertificatePath],
                idleTimeout: .seconds(2)
            )
        )
        let endpoint = try HTTP2Endpoint(url: simulator.baseURL, setting: "test")
        let requests = (0..<2).map { HTTP2Request(path: "/3/device/\(String(format: "%064x", $0 + 1))") }
        func answered(_ results: [Result<HTTP2Response, HTTP2RequestError>]) -> Bool {
            results.count == 2 && results.allSatisfy { if case .success = $0 { true } else { false } }
        }
        #expect(answered(await client.execute(requests, to: endpoint, timeout: .seconds(10))))
        #expect(client.connectionsOpened == 1)
        // Polled, up to 20 s: closing after 2 s idle is the behaviour, not a speed (and a loaded
        // machine may run this task late, after the connection already closed).
        let giveUp = ContinuousClock.now + .seconds(20)
        while client.connectionCount > 0 && ContinuousClock.now < giveUp {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(client.connectionCount == 0)
        #expect(answered(await client.execute(requests, to: endpoint, timeout: .seconds(10))))
        #expect(client.connectionsOpened == 2)
        await client.shutdown()
        try? await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test func aHandshakeThatNeverCompletesIsAConnectFailure() async throws {
        try await Self.withSilentServer { port in
            let client = try HTTP2Client(configuration: ProviderHTTPConfiguration(connectTimeout: .milliseconds(300)))
            let endpoint = try HTTP2Endpoint(url: "https://127.0.0.1:\(port)", setting: "test")
            let results = await client.execute(Self.requests, to: endpoint, timeout: .seconds(30))
            for result in results { #expect(result == .failure(.connectFailed)) }
            await client.shutdown()
        }
    }
}

extension HTTP2ClientTests {
    /// Cancelling the calling task (a worker past its shutdown deadline) ends the batch at once:
    /// while connecting nothing is written; written streams are reset.
    @Test func cancellingTheCallerEndsTheBatchAtOnce() async throws {
        try await Self.withSilentServer { port in
            let client = try HTTP2Client(configuration: ProviderHTTPConfiguration(connectTimeout: .seconds(30)))
            let endpoint = try HTTP2Endpoint(url: "https://127.0.0.1:\(port)", setting: "test")
            let started = ContinuousClock.now
            let batch = Task { await client.execute(Self.requests, to: endpoint, timeout: .seconds(30)) }
            try await Task.sleep(for: .milliseconds(200))
            batch.cancel()
            let results = await batch.value
            for result in results { #expect(result == .failure(.cancelled)) }
            #expect(ContinuousClock.now - started < .seconds(20))
            await client.shutdown()
        }
    }

    @Test func cancellingWrittenStreamsResetsThem() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            try simulator.faults.add(FaultRule(provider: "apns", latencyMs: 20_000))
            let endpoint = try HTTP2Endpoint(url: simulator.baseURL, setting: "test")
            let requests = (0..<3).map { HTTP2Request(path: "/3/device/\(String(format: "%064x", $0 + 1))") }
            let started = ContinuousClock.now
            let batch = Task { await clients.http2.execute(requests, to: endpoint, timeout: .seconds(30)) }
            try await Task.sleep(for: .milliseconds(500))
            batch.cancel()
            let results = await batch.value
            for result in results { #expect(result == .failure(.cancelled)) }
            #expect(ContinuousClock.now - started < .seconds(15))
        }
    }
}

@Suite struct HTTP2EndpointTests {
    @Test func anHTTPSBaseURLGivesHostPortAndPrefix() throws {
        let endpoint = try HTTP2Endpoint(url: "https://127.0.0.1:8443/push/", setting: "endpoints.fcm")
        #expect(endpoint.host == "127.0.0.1")
        #expect(endpoint.port == 8443)
        #expect(endpoint.pathPrefix == "/push")
        #expect(endpoint.authority == "127.0.0.1:8443")
        let apple = try HTTP2Endpoint(url: "https://api.push.apple.com", setting: "endpoints.apns_production")
        #expect(apple.port == 443 && apple.authority == "api.push.apple.com" && apple.pathPrefix == "")
    }

    @Test(arguments: [
        "http://api.push.apple.com", "api.push.apple.com", "https://", "https://[::1", "https://h:0", "https://h:99999",
    ])
    func aURLHTTP2CannotSpeakToIsRefusedNamingTheSetting(url: String) {
        #expect {
            try HTTP2Endpoint(url: url, setting: "endpoints.apns_production")
        } throws: { error in
            "\(error)".contains("endpoints.apns_production")
        }
    }
}

extension Result where Success == HTTP2Response, Failure == HTTP2RequestError {
    static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.failure(let a), .failure(let b)): a == b
        default: false
        }
    }
}
