import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import NIOSSL
import ProviderSimulator
import Providers
import Testing

/// A minimal service for exercising the server core: `/echo/<token>` answers what it saw.
struct EchoService: SimulatedService {
    var provider: String { "echo" }

    func matches(_ request: SimulatorRequest) -> Bool { request.path.hasPrefix("/echo") }

    func targetToken(_ request: SimulatorRequest) -> String? {
        let token = request.path.dropFirst("/echo/".count)
        return token.isEmpty ? nil : String(token)
    }

    func handle(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
    {
        if let fault {
            var headers: [(name: String, value: String)] = []
            if let retryAfter = fault.retryAfter { headers.append((name: "retry-after", value: String(retryAfter))) }
            return .json(status: fault.status, ["reason": fault.reason ?? "injected"], headers: headers)
        }
        context.recorder.record(
            SimulatorRecord(
                provider: provider,
                token: targetToken(request) ?? "",
                headers: ["x-test": request.header("x-test") ?? ""],
                payload: String(decoding: request.body, as: UTF8.self),
                receivedAt: request.receivedAt
            )
        )
        return .json(
            status: 200,
            [
                "httpVersion": request.httpVersion, "method": request.method, "path": request.path,
                "query": request.query, "bodyBytes": request.body.count,
            ]
        )
    }
}

@Suite struct SimulatorTests {
    static let services: [any SimulatedService] = [EchoService()] + StandardServices.all()

    /// POSTs to `/echo/<token>`; the status and JSON body.
    static func echo(
        _ simulator: ProviderSimulator,
        _ client: HTTPClient,
        token: String = "t1",
        body: String = "hello"
    ) async throws -> (status: Int, json: [String: Any], version: HTTPVersion) {
        var request = HTTPClientRequest(url: simulator.baseURL + "/echo/" + token + "?a=1&b=x%20y")
        request.method = .POST
        request.headers.add(name: "x-test", value: "yes")
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await client.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(Array(buffer: bytes)))) as? [String: Any] ?? [:]
        return (Int(response.status.code), json, response.version)
    }

    static func addFault(_ simulator: ProviderSimulator, _ client: HTTPClient, _ json: String) async throws {
        let (status, body) = try await SimulatorHarness.control(
            simulator,
            client: client,
            method: .POST,
            path: "/_sim/faults",
            json: json
        )
        #expect(status == 201, "\(body)")
    }

    @Test func negotiatesHTTP2AndWritesTheCA() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            #expect(simulator.port > 0)
            #expect(simulator.baseURL == "https://127.0.0.1:\(simulator.port)")
            #expect(simulator.context.baseURL == simulator.baseURL)
            let pem = try String(contentsOfFile: simulator.caCertificatePath, encoding: .utf8)
            #expect(pem.hasPrefix("-----BEGIN CERTIFICATE-----"))
            let (status, json, version) = try await Self.echo(simulator, client)
            #expect(status == 200)
            #expect(version == .http2)
            #expect(json["httpVersion"] as? String == "h2")
            #expect(json["path"] as? String == "/echo/t1")
            #expect(json["query"] as? [String: String] == ["a": "1", "b": "x y"])
            #expect(json["bodyBytes"] as? Int == 5)
        }
    }

    @Test func servesHTTP1() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, _ in
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.file(simulator.caCertificatePath)]
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
            configuration.httpVersion = .http1Only
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            do {
                for _ in 0..<3 {  // keep-alive: several requests on one connection
                    let (status, json, version) = try await Self.echo(simulator, client)
                    #expect(status == 200)
                    #expect(version == .http1_1)
                    #expect(json["httpVersion"] as? String == "http/1.1")
                }
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
        }
    }

    @Test func unknownPathsAre404() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            let (status, _) = try await SimulatorHarness.control(simulator, client: client, path: "/nowhere")
            #expect(status == 404)
            let (controlStatus, _) = try await SimulatorHarness.control(
                simulator,
                client: client,
                path: "/_sim/nothing"
            )
            #expect(controlStatus == 404)
        }
    }

    @Test func controlAPIFaultsApplyAndCount() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            try await Self.addFault(
                simulator,
                client,
                #"{"provider":"echo","status":503,"reason":"Down","retryAfter":7,"remaining":1}"#
            )
            let first = try await Self.echo(simulator, client)
            #expect(first.status == 503)
            #expect(first.json["reason"] as? String == "Down")
            #expect(try await Self.echo(simulator, client).status == 200)  // remaining used up

            try await Self.addFault(
                simulator,
                client,
                #"{"provider":"echo","token":"dead","status":410,"reason":"Gone"}"#
            )
            #expect(try await Self.echo(simulator, client, token: "dead").status == 410)
            #expect(try await Self.echo(simulator, client, token: "dead").status == 410)
            #expect(try await Self.echo(simulator, client, token: "alive").status == 200)

            let (_, faults) = try await SimulatorHarness.control(simulator, client: client, path: "/_sim/faults")
            #expect(faults.contains("\"dead\""))
            let (deleted, _) = try await SimulatorHarness.control(
                simulator,
                client: client,
                method: .DELETE,
                path: "/_sim/faults"
            )
            #expect(deleted == 200)
            #expect(try await Self.echo(simulator, client, token: "dead").status == 200)

            let (_, statsText) = try await SimulatorHarness.control(simulator, client: client, path: "/_sim/stats")
            let stats = try #require(
                try JSONSerialization.jsonObject(with: Data(statsText.utf8)) as? [String: [String: Int]]
            )
            #expect(stats["echo"] == ["accepted": 3, "rejected": 3])
            #expect(stats["apns"] == ["accepted": 0, "rejected": 0])
        }
    }

    @Test func rejectsBadRules() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            for body in [
                #"{"provider":"echo"}"#, #"{"status":503,"probability":2}"#, "not json",
                #"{"status":503,"goaway":true}"#,
            ] {
                let (status, _) = try await SimulatorHarness.control(
                    simulator,
                    client: client,
                    method: .POST,
                    path: "/_sim/faults",
                    json: body
                )
                #expect(status == 400, "\(body)")
            }
        }
    }

    @Test func outageAnswers503ForEveryProvider() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            try await Self.addFault(simulator, client, #"{"provider":"*","outageSeconds":60}"#)
            #expect(try await Self.echo(simulator, client, token: "a").status == 503)
            #expect(try await Self.echo(simulator, client, token: "b").status == 503)
            // The control API is never subject to faults.
            let (reset, _) = try await SimulatorHarness.control(
                simulator,
                client: client,
                method: .POST,
                path: "/_sim/reset"
            )
            #expect(reset == 200)
            #expect(try await Self.echo(simulator, client).status == 200)
        }
    }

    @Test func probabilityAffectsSomeRequests() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            try await Self.addFault(simulator, client, #"{"provider":"echo","status":429,"probability":0.5}"#)
            var limited = 0
            for _ in 0..<40 {
                if try await Self.echo(simulator, client).status == 429 { limited += 1 }
            }
            #expect((5...35).contains(limited))
        }
    }

    @Test func latencyDelaysTheAnswer() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            try await Self.addFault(simulator, client, #"{"provider":"echo","latencyMs":300}"#)
            let start = ContinuousClock.now
            #expect(try await Self.echo(simulator, client).status == 200)
            #expect(ContinuousClock.now - start >= .milliseconds(300))
        }
    }

    @Test func recordsAreReturned() async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            _ = try await Self.echo(simulator, client, token: "r1", body: #"{"n":1}"#)
            _ = try await Self.echo(simulator, client, token: "r2", body: #"{"n":2}"#)
            let (status, text) = try await SimulatorHarness.control(
                simulator,
                client: client,
                path: "/_sim/records?provider=echo"
            )
            #expect(status == 200)
            let records = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
            #expect(records.map { $0["token"] as? String } == ["r1", "r2"])
            #expect(records.first?["payload"] as? String == #"{"n":1}"#)
            #expect((records.first?["headers"] as? [String: String])?["x-test"] == "yes")
            #expect(records.first?["receivedAt"] is String)
            let (_, none) = try await SimulatorHarness.control(
                simulator,
                client: client,
                path: "/_sim/records?provider=apns"
            )
            #expect(none == "[]")
        }
    }

    @Test(arguments: [
        #"{"provider":"echo","dropConnection":true,"remaining":1}"#,
        #"{"provider":"echo","goaway":true,"remaining":1}"#,
    ])
    func connectionFaultsAreConnectionErrors(rule: String) async throws {
        try await SimulatorHarness.with(services: Self.services) { simulator, client in
            try await Self.addFault(simulator, client, rule)
            await #expect(throws: (any Error).self) { try await Self.echo(simulator, client) }
            #expect(simulator.context.recorder.rejectedCount(provider: "echo") == 1)
            // The client reconnects and the next request is answered (once the client has
            // seen the close; a request racing it fails with "I/O on closed channel").
            // On a loaded machine the close can take longer to be seen: allow a few tries.
            var status = 0
            for _ in 0..<5 where status != 200 {
                try await Task.sleep(for: .milliseconds(200))
                status = (try? await Self.echo(simulator, client).status) ?? 0
            }
            #expect(status == 200)
        }
    }
}
