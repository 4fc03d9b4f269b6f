import AsyncHTTPClient
import Delivery
import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import ProviderSimulator
import Providers
import Queue

/// A provider simulator on a loopback port with generated credentials (app id `default`, what devices get without an `appId`), and the
/// settings a worker needs to deliver through it: in-process adapters for tests that drive a
/// consumer, or `HERALD_*` variables for tests that start `herald run`.
package struct LiveSimulator: Sendable {
    package let simulator: ProviderSimulator
    package let directory: String
    package let manifest: SimulatorCredentials.Manifest

    package static func with<T: Sendable>(_ body: (LiveSimulator) async throws -> T) async throws -> T {
        try await SimulatorHarness.with { simulator, _ in
            let directory = simulator.configuration.stateDirectory
            let manifest = try SimulatorCredentials.generate(into: directory, context: simulator.context)
            return try await body(LiveSimulator(simulator: simulator, directory: directory, manifest: manifest))
        }
    }

    package var records: SimulatorRecorder { simulator.context.recorder }

    /// `HERALD_*` settings for a `herald run` process delivering every provider through the simulator.
    package var workerEnvironment: [String: String] {
        Dictionary(manifest.heraldEnvironment.map { ($0.key, $0.value) }) { _, last in last }
    }

    /// Live adapters (wrapped with the circuit breaker and pacing) plus the local recorder, for
    /// an in-process consumer. The caller shuts the returned clients down.
    package func registry(
        pool: PostgresPool,
        resilience: ResilientProvider.Configuration = .init(),
        requestTimeout: Duration = .seconds(5)
    ) throws -> (ProviderRegistry, SimulatorClients) {
        let http = ProviderHTTPConfiguration(
            extraCAFiles: [simulator.caCertificatePath],
            requestTimeout: requestTimeout
        )
        let client = try http.makeClient()
        let http2 = try HTTP2Client(configuration: http)
        let apnsKey = try String(contentsOfFile: manifest.apns.keyFile, encoding: .utf8)
        let account = try FCMServiceAccount.parse(
            json: Secret(try String(contentsOfFile: manifest.fcm.serviceAccountFile, encoding: .utf8))
        )
        let vapidKey = try String(contentsOfFile: manifest.webpush.privateKeyFile, encoding: .utf8)
        let base = simulator.baseURL
        var registry = ProviderRegistry()
        registry[.apns] = ResilientProvider(
            try APNsProvider(
                configuration: APNsConfiguration(
                    apps: [
                        "default": APNsCredentials(
                            teamID: manifest.apns.teamID,
                            keyID: manifest.apns.keyID,
                            privateKeyPEM: Secret(apnsKey),
                            topic: manifest.apns.topic
                        )
                    ],
                    productionURL: base,
                    sandboxURL: base
                ),
                client: http2,
                requestTimeout: requestTimeout
            ),
            configuration: resilience
        )
        registry[.fcm] = ResilientProvider(
            try FCMProvider(
                configuration: FCMConfiguration(baseURL: base, apps: ["default": account]),
                client: client,
                http2: http2,
                requestTimeout: requestTimeout
            ),
            configuration: resilience
        )
        registry[.expo] = ResilientProvider(
            ExpoProvider(
                configuration: ExpoConfiguration(baseURL: base),
                client: client,
                requestTimeout: requestTimeout,
                receipts: PostgresExpoReceiptStore(pool: pool)
            ),
            configuration: resilience
        )
        registry[.webpush] = ResilientProvider(
            try WebPushProvider(
                configuration: WebPushConfiguration(apps: [
                    "default": VAPIDCredentials(
                        subject: manifest.webpush.subject,
                        publicKey: manifest.webpush.publicKey,
                        privateKey: Secret(vapidKey)
                    )
                ]),
                client: client,
                http2: http2,
                requestTimeout: requestTimeout
            ),
            configuration: resilience
        )
        registry[.local] = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: pool))
        return (registry, SimulatorClients(http: client, http2: http2))
    }

    /// A 64-hex-digit APNs device token, distinct per `n`.
    package static func apnsToken(_ n: Int) -> String {
        let hex = String(n, radix: 16)
        return String(repeating: "a", count: 64 - hex.count) + hex
    }
}
