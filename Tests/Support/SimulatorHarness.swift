import AsyncHTTPClient
import Foundation
import HeraldCore
import NIOCore
import NIOHTTP1
import Providers
import ProviderSimulator

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
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("herald-sim-\(UUID().uuidString)").path
        let simulator = ProviderSimulator(
            configuration: SimulatorConfiguration(stateDirectory: directory), services: services, context: context)
        try await simulator.start()
        let client: HTTPClient
        do {
            client = try ProviderHTTPConfiguration(
                extraCAFiles: [simulator.caCertificatePath], requestTimeout: requestTimeout
            ).makeClient()
        } catch {
            try? await simulator.shutdown()
            throw error
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(simulator, client))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        try? await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
        return try result.get()
    }

    /// A control-API call (`/_sim/...`) over `client`; returns the status and body text.
    @discardableResult
    package static func control(
        _ simulator: ProviderSimulator, client: HTTPClient, method: HTTPMethod = .GET, path: String, json: String? = nil
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
