import Foundation
import HeraldCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// Where and how the provider simulator listens.
package struct SimulatorConfiguration: Sendable {
    /// Address to bind. Default `127.0.0.1`; the generated certificate also names this host.
    package var host = "127.0.0.1"
    /// TCP port; 0 picks a free one (read ``ProviderSimulator/port`` after start). Default 0.
    package var port = 0
    /// Directory for `ca.pem` (and generated credentials); created if missing.
    package var stateDirectory: String
    /// Accepted messages kept for `/_sim/records`; older ones are dropped, counters are not. Default 100 000.
    package var recordCapacity = 100_000
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` advertised per connection. Default 1000 (as APNs).
    package var maxConcurrentStreams = 1000
    /// What ALPN offers, in order of preference. Default `h2`, `http/1.1`; `["http/1.1"]` stands in
    /// for a push service without HTTP/2.
    package var applicationProtocols = ["h2", "http/1.1"]

    package init(host: String = "127.0.0.1", port: Int = 0, stateDirectory: String, recordCapacity: Int = 100_000) {
        self.host = host
        self.port = port
        self.stateDirectory = stateDirectory
        self.recordCapacity = recordCapacity
    }
}

/// A local stand-in for APNs, FCM (+ Google OAuth), Expo and Web Push push services: one TLS
/// port speaking HTTP/2 and HTTP/1.1, with fault injection and a record of what it accepted.
///
/// ```swift
/// let simulator = ProviderSimulator(configuration: .init(stateDirectory: ".run/simulator"))
/// try await simulator.start()
/// let client = try ProviderHTTPConfiguration(extraCAFiles: [simulator.caCertificatePath]).makeClient()
/// try simulator.faults.add(FaultRule(provider: "apns", status: 503))
/// ```
///
/// - Important: The CA and server key are generated at every start; clients must re-read
///   ``caCertificatePath`` after a restart.
package final class ProviderSimulator: Sendable {
    package let configuration: SimulatorConfiguration
    package let context: SimulatorContext
    package let faults: FaultPlan
    private let services: [any SimulatedService]

    private struct State {
        var serverChannel: (any Channel)?
        var connections: [ObjectIdentifier: any Channel] = [:]
        var connectionsAccepted = 0
        var port = 0
    }

    private let state = NIOLockedValueBox(State())

    package init(
        configuration: SimulatorConfiguration,
        services: [any SimulatedService] = StandardServices.all(),
        context: SimulatorContext? = nil
    ) {
        self.configuration = configuration
        self.context = context ?? SimulatorContext(recorder: SimulatorRecorder(capacity: configuration.recordCapacity))
        self.faults = FaultPlan()
        self.services = services
    }

    /// The bound port (the configured one, or the ephemeral one chosen for port 0).
    package var port: Int { state.withLockedValue { $0.port } }

    /// TCP connections accepted since start (open or closed).
    package var connectionsAccepted: Int { state.withLockedValue { $0.connectionsAccepted } }

    /// `https://<host>:<port>`; `127.0.0.1` when bound to a wildcard address.
    package var baseURL: String {
        var host = configuration.host
        if host == "0.0.0.0" || host == "::" { host = "127.0.0.1" }
        if host.contains(":") { host = "[\(host)]" }
        return "https://\(host):\(port)"
    }

    /// PEM file of the CA that signed the server certificate (`<stateDirectory>/ca.pem`).
    package var caCertificatePath: String {
        URL(fileURLWithPath: configuration.stateDirectory).appendingPathComponent("ca.pem").path
    }

    /// Generates the CA and server certificate, writes `ca.pem`, binds, and sets `context.baseURL`.
    package func start() async throws {
        try FileManager.default.createDirectory(
            atPath: configuration.stateDirectory,
            withIntermediateDirectories: true
        )
        let certificates = try SimulatorCertificates.generate(host: configuration.host)
        try Data(certificates.caPEM.utf8).write(to: URL(fileURLWithPath: caCertificatePath), options: .atomic)

        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: certificates.leafDER, format: .der))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: certificates.leafKeyDER, format: .der))
        )
        tls.applicationProtocols = configuration.applicationProtocols
        let sslContext = try NIOSSLContext(configuration: tls)
        let router = SimulatorRouter(services: services, context: context, faults: faults)
        let settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.maxConcurrentStreams),
            HTTP2Setting(parameter: .headerTableSize, value: 4096),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
            HTTP2Setting(parameter: .initialWindowSize, value: 65535),
            HTTP2Setting(parameter: .maxFrameSize, value: 16384),
        ]

        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [state] channel in
                let id = ObjectIdentifier(channel)
                state.withLockedValue {
                    $0.connections[id] = channel
                    $0.connectionsAccepted += 1
                }
                channel.closeFuture.whenComplete { _ in
                    state.withLockedValue { _ = $0.connections.removeValue(forKey: id) }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { channel in
                            channel.eventLoop.makeCompletedFuture {
                                let shared = NIOLoopBound(
                                    SimulatorH2Connection(parent: channel),
                                    eventLoop: channel.eventLoop
                                )
                                var connection = NIOHTTP2Handler.ConnectionConfiguration()
                                connection.initialSettings = settings
                                _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                                    mode: .server,
                                    connectionConfiguration: connection,
                                    streamConfiguration: NIOHTTP2Handler.StreamConfiguration(),
                                    inboundStreamInitializer: { stream in
                                        stream.eventLoop.makeCompletedFuture {
                                            try stream.pipeline.syncOperations.addHandlers([
                                                HTTP2FramePayloadToHTTP1ServerCodec(),
                                                SimulatorRequestHandler(
                                                    router: router,
                                                    httpVersion: "h2",
                                                    connection: shared.value
                                                ),
                                            ])
                                        }
                                    }
                                )
                            }
                        },
                        http1ChannelConfigurator: { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                                try channel.pipeline.syncOperations.addHandler(
                                    SimulatorRequestHandler(router: router, httpVersion: "http/1.1")
                                )
                            }
                        }
                    )
                }
            }
        let channel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        let port = channel.localAddress?.port ?? configuration.port
        state.withLockedValue {
            $0.serverChannel = channel
            $0.port = port
        }
        context.baseURL = baseURL
    }

    /// Stops listening and closes every open connection.
    package func shutdown() async throws {
        let (server, connections) = state.withLockedValue { s -> ((any Channel)?, [any Channel]) in
            defer {
                s.serverChannel = nil
                s.connections = [:]
            }
            return (s.serverChannel, Array(s.connections.values))
        }
        try? await server?.close()
        for connection in connections { try? await connection.close() }
    }
}
