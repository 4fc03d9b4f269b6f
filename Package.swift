// swift-tools-version: 6.1
import PackageDescription

let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

/// What every database-backed test target needs (a real PostgreSQL, the herald binary, the simulator).
let databaseTestDependencies: [Target.Dependency] = [
    "HeraldCore", "Delivery", "Queue", "Providers", "Dispatcher", "HeraldMetrics", "ProviderSimulator", "Settings",
    "HeraldTestSupport", "DatabaseTestSupport",
    .product(name: "Logging", package: "swift-log"),
    .product(name: "AsyncHTTPClient", package: "async-http-client"),
]

let package = Package(
    name: "herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["DeliveryWorker"]),
        // The provider stand-ins for the demo, benchmarks and staging; never linked into herald.
        .executable(name: "herald-simulator", targets: ["SimulatorServer"]),
        // Throughput and latency benchmarks; never linked into herald.
        .executable(name: "herald-bench", targets: ["HeraldBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.0"),
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.0"),
        .package(url: "https://github.com/pointfreeco/swift-clocks", from: "1.0.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.0"),
        // OTLP over HTTP only: the gRPC exporter would add grpc-swift to every build.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    // The graph points one way:
    //   HeraldCore (plain values: job, device, message, outcome, settlement, priority, states)
    //     <- Providers (talk to push services only)      <- ProviderSimulator <- SimulatorServer
    //     <- Dispatcher (pure planning and settlement)
    //     <- Queue (PostgreSQL storage: libpq, statements, migrations; no Dispatcher, no Providers)
    //   Delivery (the pipeline: consumer, maintenance, stores adapted to provider ports, metrics)
    //     <- Settings (every setting in one table, read into the configuration)
    //     <- Wiring (configuration -> pool, migrator, live adapters)
    //   Console (the operator pages, over Queue) <- Settings, DeliveryWorker
    //   HeraldTracing (job stages as spans, over Delivery) <- Settings, DeliveryWorker
    //     <- DeliveryWorker (the `herald` CLI)       <- HeraldBench (`herald-bench`)
    targets: [
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "HeraldCore", swiftSettings: upcoming),
        .target(
            name: "Queue",
            dependencies: [
                "CLibPQ", "HeraldCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: upcoming,
            plugins: ["EmbedSQL"]
        ),
        .target(
            name: "Delivery",
            dependencies: [
                "HeraldCore", "Queue", "Dispatcher", "Providers", "HeraldMetrics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: upcoming
        ),
        // Compiles sql/*.sql into Queue (`EmbeddedSQL.files`): the binary carries its schema.
        .executableTarget(name: "SQLEmbedder", swiftSettings: upcoming),
        .plugin(name: "EmbedSQL", capability: .buildTool(), dependencies: ["SQLEmbedder"]),
        .target(
            name: "Providers",
            dependencies: [
                "HeraldCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "Clocks", package: "swift-clocks"),
            ],
            swiftSettings: upcoming
        ),
        .target(
            name: "ProviderSimulator",
            dependencies: [
                "HeraldCore", "Providers",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: upcoming
        ),
        .target(
            name: "Dispatcher",
            dependencies: ["HeraldCore"],
            swiftSettings: upcoming
        ),
        .target(
            name: "HeraldMetrics",
            dependencies: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/Metrics",
            swiftSettings: upcoming
        ),
        // The operator console (pages, accounts, CSRF), served by `herald run` when configured.
        .target(
            name: "Console",
            dependencies: [
                "HeraldCore", "Queue", "Dispatcher",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: upcoming
        ),
        // Spans per job stage (claim, decide, send per provider, ack) through swift-distributed-tracing,
        // exported over OTLP by swift-otel when configured.
        .target(
            name: "HeraldTracing",
            dependencies: [
                "Delivery", "Dispatcher", "HeraldCore",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/Tracing",
            swiftSettings: upcoming
        ),
        // Every setting Herald reads (one table) and the configuration it resolves to.
        .target(
            name: "Settings",
            dependencies: [
                "HeraldCore", "Delivery", "Queue", "Dispatcher", "Providers", "HeraldMetrics", "Console",
                "HeraldTracing",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: upcoming
        ),
        // The resolved configuration turned into a pool, the migrator and the live adapters:
        // shared by `herald` and `herald-bench`.
        .target(
            name: "Wiring",
            dependencies: [
                "HeraldCore", "Delivery", "Queue", "Providers", "HeraldMetrics", "Settings",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: upcoming
        ),
        .executableTarget(
            name: "HeraldBench",
            dependencies: [
                "Wiring", "HeraldCore", "Delivery", "Queue", "Dispatcher", "Providers", "Settings",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: upcoming
        ),
        .executableTarget(
            name: "DeliveryWorker",
            dependencies: [
                "Wiring", "HeraldCore", "Delivery", "Queue", "Dispatcher", "Providers", "HeraldMetrics", "Settings",
                "Console", "HeraldTracing",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: upcoming
        ),
        .executableTarget(
            name: "SimulatorServer",
            dependencies: [
                "ProviderSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: upcoming
        ),
        // What the test targets share: the simulator harness.
        .target(
            name: "HeraldTestSupport",
            dependencies: [
                "HeraldCore", "Providers", "ProviderSimulator",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/Support",
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "DispatcherTests",
            dependencies: ["HeraldCore", "Dispatcher", "Queue"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "ProviderTests",
            dependencies: [
                "HeraldCore", "Providers", "ProviderSimulator", "HeraldTestSupport",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: upcoming
        ),
        // What the database-backed test targets share: a PostgreSQL database per test (cloned from
        // a migrated template), the herald binary as a process, a live simulator, a manual clock.
        .target(
            name: "DatabaseTestSupport",
            dependencies: [
                "HeraldCore", "Delivery", "Queue", "Providers", "Dispatcher", "HeraldMetrics", "ProviderSimulator",
                "HeraldTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Tests/DatabaseSupport",
            swiftSettings: upcoming
        ),
        // Tests by concept, one target per layer they exercise (each against a real PostgreSQL):
        // storage (enqueue, schema, security), the delivery pipeline (loop, maintenance, metrics,
        // faults, chaos), the seeds end to end, and the herald worker as a process (CLI, operations).
        .testTarget(
            name: "StorageTests",
            dependencies: databaseTestDependencies + [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "DeliveryTests",
            dependencies: databaseTestDependencies + [
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "SeedTests",
            dependencies: databaseTestDependencies,
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "WorkerTests",
            dependencies: databaseTestDependencies + [
                "Console", "HeraldTracing",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: upcoming
        ),
    ]
)
