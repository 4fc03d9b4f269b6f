import ArgumentParser
import Console
import CoreMetrics
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import HeraldMetrics
import HeraldTracing
import Logging
import Metrics
import Prometheus
import Providers
import Queue
import ServiceLifecycle
import Settings
import UnixSignals
import Wiring

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the delivery worker until SIGTERM or SIGINT."
    )

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        limitMallocArenas()
        try await withRuntime(options) { runtime in
            let configuration = runtime.configuration
            let logger = runtime.logger
            try await SuperuserGuard(allowSuperuser: configuration.allowSuperuser).check(
                pool: runtime.pool,
                logger: logger
            )
            let migrator = try runtime.migrator()
            let current = try await migrator.currentVersion()
            guard current >= migrator.latestVersion else {
                throw ConfigurationError(
                    key: "database",
                    reason:
                        "schema is at version \(current) but this herald needs \(migrator.latestVersion): run `herald migrate` first"
                )
            }
            let wakeup = Wakeup()
            let critical = Wakeup()
            for name in Setting.unknownEnvironmentNames(in: ProcessInfo.processInfo.environment) {
                logger.warning(
                    "Ignoring an environment variable that is not a setting",
                    metadata: ["env.name": "\(name)"]
                )
            }
            logger.info(
                "Herald starting",
                metadata: [
                    "worker.id": "\(configuration.workerID)", "database": "\(configuration.maskedDatabaseURL)",
                    "providers":
                        "\(configuration.providers.map { "\($0.key.rawValue)=\($0.value)" }.sorted().joined(separator: ","))",
                    "consumers": "\(configuration.consumers)",
                ]
            )
            // Metrics: swift-metrics → Prometheus, served with the health endpoints.
            // One set of handles for the process, handed to every component (no global backend).
            let registry = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: registry)
            factory.durationHistogramBuckets[MetricNames.deliveryLatency.name] = MetricNames.deliveryLatencyBuckets
            let metrics = WorkerMetrics(factory: factory)
            let live = try runtime.liveProviders(metrics: metrics)
            let providers = live.registry
            let latest = migrator.latestVersion
            let readiness = Readiness(metrics: metrics) { [migrator] in
                do {
                    let version = try await migrator.currentVersion()
                    return version >= latest ? nil : "schema at version \(version), needs \(latest)"
                } catch {
                    return "database unreachable"
                }
            }
            // Tracing first in the group: shutdown runs in reverse, so it exports what the
            // consumers record while they drain.
            let tracing = try TracingBackend.make(configuration.tracing, logger: logger)
            var services: [ServiceGroupConfiguration.ServiceConfiguration] =
                tracing.map {
                    [.init(service: $0.service, successTerminationBehavior: .ignore)]
                } ?? []
            services += [
                .init(
                    service: MetricsServer(
                        registry: registry,
                        readiness: readiness,
                        configuration: configuration.http,
                        logger: logger,
                        onListening: { port in logger.info("HTTP listening", metadata: ["http.port": "\(port)"]) }
                    ),
                    successTerminationBehavior: .gracefullyShutdownGroup
                ),
                .init(
                    service: MaintenanceService(
                        outbox: runtime.outbox(suffix: "-maint"),
                        configuration: configuration.maintenance,
                        logger: logger,
                        metrics: metrics,
                        tasks: live.leaderTasks
                    ),
                    successTerminationBehavior: .gracefullyShutdownGroup
                ),
                .init(
                    service: ListenerService(
                        listener: PostgresListener(
                            pool: runtime.pool,
                            channel: "herald_outbox",
                            wakeup: wakeup,
                            critical: critical,
                            logger: logger
                        )
                    ),
                    successTerminationBehavior: .gracefullyShutdownGroup
                ),
            ]
            if let credentials = configuration.console.credentials {
                let console = try ConsoleServer(
                    outbox: runtime.outbox(suffix: "-console"),
                    configuration: configuration.console,
                    credentials: credentials,
                    adapters: Dictionary(
                        uniqueKeysWithValues: configuration.providers.map { ($0.key.rawValue, $0.value) }
                    ),
                    circuits: { metrics.circuitStates() },
                    logger: logger,
                    onListening: { port in logger.info("Console listening", metadata: ["console.port": "\(port)"]) }
                )
                services.append(.init(service: console, successTerminationBehavior: .gracefullyShutdownGroup))
            }
            // This worker's open circuits recorded for the others; when it starts during an
            // outage, it adopts theirs before its first send (running workers never adopt).
            let circuits = CircuitExchange(
                circuits: Dictionary(
                    uniqueKeysWithValues: providers.configuredKinds.compactMap { kind in
                        (providers[kind] as? ResilientProvider).map { (kind.rawValue, $0.circuit) }
                    }
                ),
                outbox: runtime.outbox(suffix: "-circuits"),
                logger: logger
            )
            await circuits.adoptOnce()
            services.append(.init(service: circuits, successTerminationBehavior: .ignore))
            for i in 0..<configuration.consumers {
                let consumer = OutboxConsumer(
                    outbox: runtime.outbox(suffix: configuration.consumers > 1 ? "-\(i)" : ""),
                    providers: providers,
                    wakeup: wakeup,
                    critical: critical,
                    configuration: configuration.consumer,
                    logger: logger,
                    metrics: metrics,
                    tracer: tracing?.recorder
                )
                services.append(.init(service: consumer, successTerminationBehavior: .gracefullyShutdownGroup))
            }
            services.append(.init(service: DrainSignal(readiness: readiness), successTerminationBehavior: .ignore))
            var groupConfiguration = ServiceGroupConfiguration(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
            groupConfiguration.maximumGracefulShutdownDuration = configuration.shutdownDeadline
            do {
                try await ServiceGroup(configuration: groupConfiguration).run()
            } catch {
                await live.shutdown()
                throw error
            }
            await live.shutdown()
            logger.info("Herald stopped")
        }
    }
}

/// Runs the `LISTEN` connection as a service.
struct ListenerService: Service {
    let listener: PostgresListener
    func run() async throws {
        await cancelWhenGracefulShutdown { await listener.run() }
    }
}

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply sql/ migrations and functions (safe to run from many replicas at once)."
    )

    @OptionGroup var options: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        try await withRuntime(options) { runtime in
            let result = try await runtime.migrator().migrate(logger: runtime.logger)
            if json {
                JSONOutput.print([
                    "applied": result.applied, "version": result.current, "function_files": result.functionFiles,
                ])
            } else if result.applied.isEmpty {
                print(
                    "herald: schema up to date at version \(result.current); functions re-applied (\(result.functionFiles) files)"
                )
            } else {
                print(
                    "herald: applied migrations \(result.applied.map(String.init).joined(separator: ", ")); now at version \(result.current); functions re-applied (\(result.functionFiles) files)"
                )
            }
        }
    }
}
