import AsyncHTTPClient
import CoreMetrics
import Delivery
import Foundation
import HeraldCore
import HeraldMetrics
import Logging
import Providers
import Queue
import Settings

/// The adapters of one process, the HTTP client they share, and the leader's provider chores.
package struct LiveProviders: Sendable {
    package let registry: ProviderRegistry
    /// Owned here: one connection pool (HTTP/2 where offered) for the network adapters' other calls.
    package let client: HTTPClient?
    /// Owned here: the lean HTTP/2 connections of the APNs and FCM send paths.
    package let http2: HTTP2Client?
    /// Work only the maintenance leader does (the Expo receipts poller).
    package let leaderTasks: [MaintenanceService.LeaderTask]

    package func shutdown() async {
        await http2?.shutdown()
        try? await client?.shutdown()
    }
}

extension Runtime {
    /// Builds the configured adapter for every provider kind (`providers.<kind>` = live | sink |
    /// local | off). Live network adapters are wrapped with pacing, a circuit breaker and a
    /// credential pause, and report their state as metrics.
    ///
    /// - Parameter metrics: where the adapters' circuit and bucket gauges are recorded.
    package func liveProviders(metrics: WorkerMetrics = .disabled()) throws -> LiveProviders {
        let settings = configuration.delivery
        var registry = ProviderRegistry()
        let local = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: pool))
        let needsClient = configuration.providers.contains { $0.key != .local && $0.value == "live" }
        let http = ProviderHTTPConfiguration(
            extraCAFiles: settings.extraCAFiles,
            requestTimeout: settings.requestTimeout
        )
        let client = try needsClient ? http.makeClient() : nil
        let http2 = try needsClient ? HTTP2Client(configuration: http) : nil
        var tasks: [MaintenanceService.LeaderTask] = []
        do {
            for (kind, name) in configuration.providers {
                switch name {
                case "local": registry[kind] = local
                case "sink": registry[kind] = SinkProvider()
                case "live":
                    guard let client else { continue }
                    let adapter = try makeAdapter(
                        kind,
                        client: client,
                        http2: http2,
                        settings: settings,
                        local: local,
                        tasks: &tasks
                    )
                    registry[kind] = ResilientProvider(
                        adapter,
                        configuration: resilience(kind, settings),
                        observer: Self.metricsObserver(metrics, logger)
                    )
                default: registry[kind] = nil
                }
            }
        } catch {
            try? client?.syncShutdown()
            if let http2 { Task { await http2.shutdown() } }
            throw error
        }
        return LiveProviders(registry: registry, client: client, http2: http2, leaderTasks: tasks)
    }

    private func makeAdapter(
        _ kind: ProviderKind,
        client: HTTPClient,
        http2: HTTP2Client?,
        settings: ProviderSettings,
        local: LocalFallbackProvider,
        tasks: inout [MaintenanceService.LeaderTask]
    ) throws -> any PushProvider {
        let timeout = settings.requestTimeout
        switch kind {
        case .apns:
            var apps: [String: APNsCredentials] = [:]
            for app in settings.apps {
                if let a = app.apns {
                    apps[app.id] = APNsCredentials(
                        teamID: a.teamID,
                        keyID: a.keyID,
                        privateKeyPEM: a.privateKey,
                        topic: a.topic
                    )
                }
            }
            try Self.requireCredentials(kind, apps.isEmpty)
            guard let http2 else { throw ConfigurationError(key: "providers.apns", reason: "has no HTTP/2 client") }
            return try APNsProvider(
                configuration: APNsConfiguration(
                    apps: apps,
                    productionURL: settings.apnsProductionURL,
                    sandboxURL: settings.apnsSandboxURL
                ),
                client: http2,
                requestTimeout: timeout
            )
        case .fcm:
            var apps: [String: FCMServiceAccount] = [:]
            for app in settings.apps {
                guard let json = app.fcm else { continue }
                do {
                    apps[app.id] = try FCMServiceAccount.parse(json: json)
                } catch {
                    throw ConfigurationError(key: "app.\(app.id).fcm.service_account", reason: "\(error)")
                }
            }
            try Self.requireCredentials(kind, apps.isEmpty)
            guard let http2 else { throw ConfigurationError(key: "providers.fcm", reason: "has no HTTP/2 client") }
            return try FCMProvider(
                configuration: FCMConfiguration(baseURL: settings.fcmURL, tokenURL: settings.fcmTokenURL, apps: apps),
                client: client,
                http2: http2,
                requestTimeout: timeout
            )
        case .expo:
            var tokens: [String: Secret] = [:]
            for app in settings.apps { if let token = app.expoAccessToken { tokens[app.id] = token } }
            let expo = ExpoConfiguration(
                baseURL: settings.expoURL,
                accessTokens: tokens,
                receiptDelay: settings.expoReceiptDelay
            )
            let store = PostgresExpoReceiptStore(pool: pool)
            let poller = ExpoReceiptPoller(configuration: expo, client: client, requestTimeout: timeout, store: store)
            let logger = self.logger
            tasks.append(
                .init(name: "expo_receipts", interval: settings.expoReceiptPoll) {
                    // Drain what is due, a thousand receipts per call, a bounded number of calls.
                    for _ in 0..<20 {
                        let pass = await poller.pollOnce(logger: logger)
                        if pass.checked > 0 {
                            logger.info(
                                "Expo receipts checked",
                                metadata: [
                                    "expo.checked": "\(pass.checked)", "expo.disabled": "\(pass.disabled)",
                                    "expo.resent": "\(pass.resent)",
                                ]
                            )
                        }
                        if pass.checked < poller.batchSize { break }
                    }
                }
            )
            return ExpoProvider(configuration: expo, client: client, requestTimeout: timeout, receipts: store)
        case .webpush:
            var apps: [String: VAPIDCredentials] = [:]
            for app in settings.apps {
                if let w = app.webPush {
                    apps[app.id] = VAPIDCredentials(
                        subject: w.subject,
                        publicKey: w.publicKey,
                        privateKey: w.privateKey
                    )
                }
            }
            try Self.requireCredentials(kind, apps.isEmpty)
            guard let http2 else { throw ConfigurationError(key: "providers.webpush", reason: "has no HTTP/2 client") }
            return try WebPushProvider(
                configuration: WebPushConfiguration(apps: apps),
                client: client,
                http2: http2,
                requestTimeout: timeout
            )
        case .local:
            return local  // the configuration refuses `providers.local = live`; kept for exhaustiveness
        }
    }

    private static func requireCredentials(_ kind: ProviderKind, _ missing: Bool) throws {
        if missing {
            throw ConfigurationError(
                key: "providers.\(kind.rawValue)",
                reason: "is live but no app in app_ids has \(kind.rawValue) credentials (app.<id>.\(kind.rawValue).*)"
            )
        }
    }

    private func resilience(_ kind: ProviderKind, _ settings: ProviderSettings) -> ResilientProvider.Configuration {
        var c = ResilientProvider.Configuration(ratePerSecond: settings.ratePerSecond[kind])
        c.circuit = settings.circuit
        c.credentialPause = settings.credentialPause
        return c
    }

    /// Circuit state and bucket headroom as gauges; a refused credential as an error log (the
    /// `credentials_broken` attempts counter drives the alert).
    package static func metricsObserver(_ metrics: WorkerMetrics, _ logger: Logger) -> ResilientProvider.Observer {
        ResilientProvider.Observer(
            circuitChanged: { provider, state in
                metrics.recordCircuit(provider, state: state.rawValue)
                if state != .closed {
                    logger.warning(
                        "Provider circuit \(state == .open ? "opened" : "half-open")",
                        metadata: ["push.provider": "\(provider)"]
                    )
                } else {
                    logger.info("Provider circuit closed", metadata: ["push.provider": "\(provider)"])
                }
            },
            headroom: { provider, tokens in
                metrics.gauge(MetricNames.tokenBucketHeadroom, provider).record(tokens)
            }
        )
    }
}
