import AsyncHTTPClient
import Foundation
import HeraldCore
import NIOCore
import NIOHTTP1
import ProviderSimulator
import Providers

/// The one simulator harness of the test targets: a provider simulator on `127.0.0.1:0` in a
/// temporary directory with an HTTP client that trusts its CA, both shut down afterwards.
///
/// ```swift
/// try await SimulatorHarness.with { simulator, client in
///     try simulator.faults.add(FaultRule(provider: "apns", status: 503))
///     let provider = try APNsProvider(configuration: …, client: client, requestTimeout: .seconds(5))
/// }
/// ```
package enum SimulatorHarness {
    package static func with<T>(
        services: [any SimulatedService] = StandardServices.all(),
        context: SimulatorContext? = nil,
        requestTimeout: Duration = .seconds(10),
        _ body: (ProviderSimulator, HTTPClient) async throws -> T
    ) async throws -> T {
        try await withClients(services: services, context: context, requestTimeout: requestTimeout) {
            simulator,
            clients in
            try await body(simulator, clients.http)
        }
    }

    /// The same with both clients: async-http-client and the lean HTTP/2 client of the APNs send path.
    package static func withClients<T>(
        services: [any SimulatedService] = StandardServices.all(),
        context: SimulatorContext? = nil,
        requestTimeout: Duration = .seconds(10),
        _ body: (ProviderSimulator, SimulatorClients) async throws -> T
    ) async throws -> T {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("herald-sim-\(UUID().uuidString)").path
        let simulator = ProviderSimulator(
            configuration: SimulatorConfiguration(stateDirectory: directory),
            services: services,
            context: context
        )
        try await simulator.start()
        let clients: SimulatorClients
        do {
            let http = ProviderHTTPConfiguration(
                extraCAFiles: [simulator.caCertificatePath],
                requestTimeout: requestTimeout
            )
            clients = SimulatorClients(http: try http.makeClient(), http2: try HTTP2Client(configuration: http))
        } catch {
            try? await simulator.shutdown()
            throw error
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(simulator, clients))
        } catch {
            result = .failure(error)
        }
        await clients.shutdown()
        try? await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
        return try result.get()
    }

    /// A control-API call (`/_sim/...`) over `client`; returns the status and body text.
    @discardableResult
    package static func control(
        _ simulator: ProviderSimulator,
        client: HTTPClient,
        method: HTTPMethod = .GET,
        path: String,
        json: String? = nil
    ) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: simulator.baseURL + path)
        request.method = method
        if let json {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 16 * 1024 * 1024)
        return (Int(response.status.code), String(buffer: body))
    }
}

/// The two provider clients a test talks to the simulator with; shut down together.
package struct SimulatorClients: Sendable {
    package let http: HTTPClient
    package let http2: HTTP2Client

    package init(http: HTTPClient, http2: HTTP2Client) {
        self.http = http
        self.http2 = http2
    }

    package func shutdown() async {
        await http2.shutdown()
        try? await http.shutdown()
    }
}
