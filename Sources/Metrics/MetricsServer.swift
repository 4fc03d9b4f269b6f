import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

/// Serves `/metrics` (Prometheus text), `/healthz` (the process is alive) and `/readyz`
/// (``Readiness``: 503 with the reason while not ready) on one port.
package struct MetricsServer: Service {
    package struct Configuration: Sendable {
        /// Listen address. Default `0.0.0.0`.
        package var host = "0.0.0.0"
        /// Listen port (`HERALD_HTTP_PORT`). Default 8080; 0 picks a free port.
        package var port = 8080
        package init() {}
    }

    let registry: PrometheusCollectorRegistry
    let readiness: Readiness
    let configuration: Configuration
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    package init(
        registry: PrometheusCollectorRegistry,
        readiness: Readiness,
        configuration: Configuration,
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.registry = registry
        self.readiness = readiness
        self.configuration = configuration
        self.logger = logger
        self.onListening = onListening
    }

    package func run() async throws {
        let router = Router()
        let registry = self.registry
        let readiness = self.readiness
        router.get("metrics") { _, _ -> Response in
            Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
            )
        }
        router.get("healthz") { _, _ in "ok\n" }
        router.get("readyz") { _, _ -> Response in
            if let reason = await readiness.status() {
                return Response(status: .serviceUnavailable, body: .init(byteBuffer: ByteBuffer(string: reason + "\n")))
            }
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "ready\n")))
        }
        let onListening = self.onListening
        let app = Application(
            router: router,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "herald"
            ),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        try await app.run()  // as a Service of our group: runService() would install its own signal handlers
    }
}

/// The last service of the group: graceful shutdown reaches it first, so readiness turns
/// false before the consumers start draining.
package struct DrainSignal: Service {
    let readiness: Readiness
    package init(readiness: Readiness) { self.readiness = readiness }
    package func run() async throws {
        try? await gracefulShutdown()
        readiness.beginDraining()
    }
}
