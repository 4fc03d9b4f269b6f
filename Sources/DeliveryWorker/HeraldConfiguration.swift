import Configuration
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import HeraldMetrics
import Providers
import Queue
import SystemPackage

/// The resolved configuration of one `herald` process.
///
/// Values come, highest priority first, from `HERALD_*` environment variables
/// (`queue.batch_size` ⇐ `HERALD_QUEUE_BATCH_SIZE`), then the JSON file given by `--config` or
/// `HERALD_CONFIG_FILE`, then the defaults documented on each component's `Configuration`.
/// Only this type reads configuration; each component receives its own small struct.
struct HeraldConfiguration: Sendable {
    var pool = PostgresPool.Configuration()
    var migrationsDirectory: String?
    var consumer = OutboxConsumer.Configuration()
    /// Consumers (claim loops) in this process, each with its own lease owner. Default 1.
    var consumers = 1
    var maintenance = MaintenanceService.Configuration()
    /// Lease owner prefix: `worker.id` (default `<hostname>-<pid>`) plus `.<random>`, so each
    /// process incarnation owns its leases alone.
    var workerID: String
    /// Seconds the process waits for in-flight batches after SIGTERM before cancelling them
    /// (their jobs then go back to `pending`). Keep it below Kubernetes'
    /// `terminationGracePeriodSeconds`. Default 25 s.
    var shutdownDeadline: Double = 25
    /// Which adapter serves each device provider: `local`, `sink` or `off`.
    var providers: [ProviderKind: String] = [
        .apns: "off", .fcm: "off", .expo: "off", .webpush: "off", .local: "local",
    ]
    /// Endpoints, credentials per app, pacing and circuit breaker of the network adapters.
    var delivery = ProviderSettings()
    var logLevel = "info"
    var http = MetricsServer.Configuration()
    /// Whether `herald run` may connect as a PostgreSQL superuser (``SuperuserGuard``); meant for
    /// local development only. Default false.
    var allowSuperuser = false

    /// `live` (or the provider's own name) is the real network adapter.
    static let adapterNames: Set<String> = ["live", "local", "sink", "off"]

    /// Every key this process understands, for `check-config` and for rejecting typos.
    static let keys: [(key: String, secret: Bool, help: String)] = [
        ("database.url", true, "libpq URL or connection string"),
        ("database.pool_size", false, "connections per process (default 4)"),
        ("database.statement_timeout_ms", false, "server statement_timeout (default 5000)"),
        ("database.connect_timeout_s", false, "libpq connect_timeout (default 5)"),
        ("database.migrations_dir", false, "folder of NNNN_name.up.sql files (default: ./sql)"),
        ("queue.batch_size", false, "rows per claim (default 200)"),
        ("queue.max_in_flight_batches", false, "batches delivered at once per consumer (default 4)"),
        ("queue.lease_seconds", false, "lease of a claimed row, renewed at 1/3 (default 60)"),
        ("queue.idle_poll_ms", false, "poll interval when idle; NOTIFY wakes earlier (default 500)"),
        ("queue.consumers", false, "claim loops per process (default 1)"),
        ("worker.id", false, "lease owner prefix (default hostname-pid)"),
        ("shutdown.deadline_seconds", false, "drain time after SIGTERM (default 25)"),
        ("maintenance.reap_interval_seconds", false, "expired-lease scan interval (default 5)"),
        ("maintenance.prune_interval_seconds", false, "history retention pass interval (default 60)"),
        ("retention.delivery_log_days", false, "delivery log retention (default 30)"),
        ("retention.inbox_days", false, "inbox retention (default 30)"),
        ("retention.dead_letter_days", false, "dead letter retention (default 30)"),
        ("providers.apns", false, "adapter for apns devices: live | sink | local | off (default off)"),
        ("providers.fcm", false, "adapter for fcm devices (default off)"),
        ("providers.expo", false, "adapter for expo devices (default off)"),
        ("providers.webpush", false, "adapter for webpush devices (default off)"),
        ("providers.local", false, "adapter for local devices (default local)"),
        ("http.host", false, "address of /metrics, /healthz, /readyz (default 0.0.0.0)"),
        ("http.port", false, "port of /metrics, /healthz, /readyz (default 8080; 0 picks a free one)"),
        ("log.level", false, "trace | debug | info | notice | warning | error (default info)"),
        ("security.allow_superuser", false, "let `run` connect as a PostgreSQL superuser (default false)"),
    ]

    /// Loads and validates the configuration. Throws a ``ConfigurationError`` naming the key.
    static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) async throws
        -> HeraldConfiguration
    {
        var providers: [any ConfigProvider] = [
            KeyMappingProvider(
                upstream: EnvironmentVariablesProvider(
                    environmentVariables: environment,
                    secretsSpecifier: .dynamic { name, _ in
                        name == "HERALD_DATABASE_URL" || name.hasSuffix("_PRIVATE_KEY")
                            || name.hasSuffix("_SERVICE_ACCOUNT") || name.hasSuffix("_ACCESS_TOKEN")
                    })
            ) { key in key.prepending(["herald"]) }
        ]
        let path = file ?? environment["HERALD_CONFIG_FILE"]
        if let path, !path.isEmpty {
            guard FileManager.default.fileExists(atPath: path) else {
                throw ConfigurationError(key: "config file", reason: "\(path) does not exist")
            }
            do {
                providers.append(try await FileProvider<JSONSnapshot>(filePath: .init(path)))
            } catch {
                throw ConfigurationError(key: "config file", reason: "\(path) is not valid JSON")
            }
        }
        let reader = ConfigReader(providers: providers)
        return try HeraldConfiguration(reader: Reader(reader: reader))
    }

    init(reader: Reader) throws {
        let host = ProcessInfo.processInfo.hostName
        // The lease owner must be unique per process *incarnation*: a container restarted under
        // the same pod name (or a worker restarted with the same HERALD_WORKER_ID) must not
        // renew the leases of rows its killed predecessor held, or they would never come back.
        let incarnation = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        workerID = (reader.string("worker.id") ?? "\(host)-\(getpid())") + "." + incarnation
        pool.connection.url = reader.string("database.url", secret: true) ?? "postgresql://localhost/herald"
        pool.size = try reader.int("database.pool_size", default: 4, range: 1...64)
        pool.connection.statementTimeout = .milliseconds(
            try reader.int("database.statement_timeout_ms", default: 5000, range: 100...600_000))
        pool.connection.connectTimeout = .seconds(try reader.int("database.connect_timeout_s", default: 5, range: 1...120))
        pool.connection.applicationName = "herald"
        migrationsDirectory = reader.string("database.migrations_dir")
        consumer.batchSize = try reader.int("queue.batch_size", default: 200, range: 1...5000)
        consumer.maxInFlightBatches = try reader.int("queue.max_in_flight_batches", default: 4, range: 1...64)
        consumer.lease = Double(try reader.int("queue.lease_seconds", default: 60, range: 5...3600))
        consumer.idlePoll = .milliseconds(try reader.int("queue.idle_poll_ms", default: 500, range: 10...60_000))
        consumers = try reader.int("queue.consumers", default: 1, range: 1...32)
        shutdownDeadline = Double(try reader.int("shutdown.deadline_seconds", default: 25, range: 1...3600))
        maintenance.reapInterval = .seconds(try reader.int("maintenance.reap_interval_seconds", default: 5, range: 1...3600))
        maintenance.pruneInterval = .seconds(
            try reader.int("maintenance.prune_interval_seconds", default: 60, range: 1...86_400))
        maintenance.deliveryLogRetention = Double(try reader.int("retention.delivery_log_days", default: 30, range: 1...3650)) * 86_400
        maintenance.inboxRetention = Double(try reader.int("retention.inbox_days", default: 30, range: 1...3650)) * 86_400
        maintenance.localRetention = maintenance.inboxRetention
        maintenance.deadLetterRetention = Double(try reader.int("retention.dead_letter_days", default: 30, range: 1...3650)) * 86_400
        for kind in ProviderKind.allCases {
            if let name = reader.string("providers.\(kind.rawValue)") {
                let adapter = name == kind.rawValue && kind != .local ? "live" : name
                guard Self.adapterNames.contains(adapter), !(kind == .local && adapter == "live") else {
                    throw ConfigurationError(
                        key: "providers.\(kind.rawValue)", reason: "must be one of live, local, sink, off")
                }
                providers[kind] = adapter
            }
        }
        delivery = try ProviderSettings(reader: reader)
        consumer.localFallback = delivery.localFallback
        http.host = reader.string("http.host") ?? "0.0.0.0"
        http.port = try reader.int("http.port", default: 8080, range: 0...65_535)
        logLevel = reader.string("log.level") ?? "info"
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(logLevel) else {
            throw ConfigurationError(key: "log.level", reason: "must be trace, debug, info, notice, warning or error")
        }
        allowSuperuser = try reader.bool("security.allow_superuser", default: false)
        try consumer.validate()
    }

    /// The database URL with any password replaced by `***`.
    var maskedDatabaseURL: String { Self.mask(pool.connection.url) }

    static func mask(_ url: String) -> String {
        // URL form: scheme://user:password@host/...
        if let scheme = url.range(of: "://"), let at = url.range(of: "@", range: scheme.upperBound..<url.endIndex) {
            let userinfo = url[scheme.upperBound..<at.lowerBound]
            if let colon = userinfo.firstIndex(of: ":") {
                return String(url[..<colon]) + ":***" + String(url[at.lowerBound...])
            }
        }
        // key=value form: password=...
        return url.split(separator: " ").map { part in
            part.hasPrefix("password=") ? "password=***" : String(part)
        }.joined(separator: " ")
    }

    /// Reads typed values with clear errors (a value that does not parse is an error, not a default).
    struct Reader {
        let reader: ConfigReader

        func string(_ key: String, secret: Bool = false) -> String? {
            if let s = reader.string(forKey: ConfigKey(key), isSecret: secret) { return s }
            if let i = reader.int(forKey: ConfigKey(key)) { return String(i) }
            return nil
        }

        /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`); anything else is an error.
        func bool(_ key: String, default value: Bool) throws -> Bool {
            if let b = reader.bool(forKey: ConfigKey(key)) { return b }
            guard let text = string(key) else { return value }
            switch text.lowercased() {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off": return false
            default: throw ConfigurationError(key: key, reason: "must be true or false, got \"\(text.prefix(40))\"")
            }
        }

        func int(_ key: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
            if let i = reader.int(forKey: ConfigKey(key)) {
                guard range.contains(i) else {
                    throw ConfigurationError(key: key, reason: "must be \(range.lowerBound)...\(range.upperBound), got \(i)")
                }
                return i
            }
            if let s = reader.string(forKey: ConfigKey(key)) {
                throw ConfigurationError(key: key, reason: "must be an integer, got \"\(s.prefix(40))\"")
            }
            return value
        }
    }
}
