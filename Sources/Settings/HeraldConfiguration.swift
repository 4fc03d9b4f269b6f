import Configuration
import Console
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import HeraldMetrics
import HeraldTracing
import Providers
import Queue
import SystemPackage

/// The resolved configuration of one `herald` process.
///
/// Values come, highest priority first, from `HERALD_*` environment variables
/// (`queue.batch_size` ⇐ `HERALD_QUEUE_BATCH_SIZE`), then the JSON file given by `--config` or
/// `HERALD_CONFIG_FILE`, then the defaults of the settings table (``Setting/all``).
/// Only this type reads configuration; each component receives its own small struct.
package struct HeraldConfiguration: Sendable {
    package var pool = PostgresPool.Configuration()
    package var migrationsDirectory: String?
    /// `database.buckets`: the buckets `herald migrate` lays a new database out with; nil keeps
    /// what an installed database has (one for a new one).
    package var buckets: Int?
    package var consumer = OutboxConsumer.Configuration()
    /// Consumers (claim loops) in this process, each with its own lease owner. Default 1.
    package var consumers = 1
    package var maintenance = MaintenanceService.Configuration()
    /// Lease owner prefix: `worker.id` (default `<hostname>-<pid>`) plus `.<random>`, so each
    /// process incarnation owns its leases alone.
    package var workerID: String
    /// Seconds the process waits for in-flight batches after SIGTERM before cancelling them
    /// (their jobs then go back to `pending`). Keep it below Kubernetes'
    /// `terminationGracePeriodSeconds`. Default 25 s.
    package var shutdownDeadline: Duration = .seconds(25)
    /// Which adapter serves each device provider: `local`, `sink` or `off`.
    package var providers: [ProviderKind: String] = [
        .apns: "off", .fcm: "off", .expo: "off", .webpush: "off", .local: "local",
    ]
    /// Endpoints, credentials per app, pacing and circuit breaker of the network adapters.
    package var delivery = ProviderSettings()
    package var logLevel = "info"
    package var http = MetricsServer.Configuration()
    /// The operator console; off (no credentials) by default.
    package var console = ConsoleServer.Configuration()
    /// Job spans over OTLP; off (no endpoint) by default.
    package var tracing = TracingConfiguration()
    /// Whether `herald run` may connect as a PostgreSQL superuser (``SuperuserGuard``); meant for
    /// local development only. Default false.
    package var allowSuperuser = false

    /// Loads and validates the configuration. Throws a ``ConfigurationError`` naming the key.
    package static func load(
        file: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws
        -> HeraldConfiguration
    {
        var providers: [any ConfigProvider] = [
            KeyMappingProvider(
                upstream: EnvironmentVariablesProvider(
                    environmentVariables: environment,
                    secretsSpecifier: .dynamic { name, _ in
                        name == "HERALD_DATABASE_URL" || name.hasSuffix("_PRIVATE_KEY")
                            || name.hasSuffix("_SERVICE_ACCOUNT") || name.hasSuffix("_ACCESS_TOKEN")
                            || name == "HERALD_CONSOLE_CREDENTIALS"
                    }
                )
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

    package init(reader: Reader) throws {
        typealias S = Setting
        let host = ProcessInfo.processInfo.hostName
        // The lease owner must be unique per process *incarnation*: a container restarted under
        // the same pod name (or a worker restarted with the same HERALD_WORKER_ID) must not
        // renew the leases of rows its killed predecessor held, or they would never come back.
        let incarnation = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        workerID = (reader.string(S.workerID) ?? "\(host)-\(getpid())") + "." + incarnation
        pool.connection.url = reader.string(S.databaseURL)!
        pool.size = try reader.int(S.poolSize)
        pool.connection.statementTimeout = .milliseconds(try reader.int(S.statementTimeout))
        pool.connection.connectTimeout = .seconds(try reader.int(S.connectTimeout))
        pool.connection.applicationName = "herald"
        migrationsDirectory = reader.string(S.migrationsDirectory)
        buckets = reader.string(S.buckets) == nil ? nil : try reader.int(S.buckets, default: 1)
        consumer.batchSize = try reader.int(S.batchSize)
        consumer.maxInFlightBatches = try reader.int(S.maxInFlightBatches)
        consumer.maxConcurrentAcks = try reader.int(S.maxConcurrentAcks)
        consumer.lease = .seconds(try reader.int(S.leaseSeconds))
        consumer.idlePoll = .milliseconds(try reader.int(S.idlePoll))
        consumers = try reader.int(S.consumers)
        shutdownDeadline = .seconds(try reader.int(S.shutdownDeadline))
        maintenance.reapInterval = .seconds(try reader.int(S.reapInterval))
        maintenance.pruneInterval = .seconds(try reader.int(S.pruneInterval))
        maintenance.deliveryLogRetention = .seconds(try reader.int(S.deliveryLogDays) * 86_400)
        maintenance.inboxRetention = .seconds(try reader.int(S.inboxDays) * 86_400)
        maintenance.localRetention = maintenance.inboxRetention
        maintenance.deadLetterRetention = .seconds(try reader.int(S.deadLetterDays) * 86_400)
        let adapterSettings: [ProviderKind: Setting] = [
            .apns: S.providerAPNs, .fcm: S.providerFCM, .expo: S.providerExpo, .webpush: S.providerWebPush,
            .local: S.providerLocal,
        ]
        for kind in ProviderKind.allCases {
            let setting = adapterSettings[kind]!
            // The provider's own name (`providers.apns=apns`) means its live adapter.
            let written = reader.string(setting) ?? setting.defaultValue!
            providers[kind] = try reader.choice(
                setting,
                value: written == kind.rawValue && kind != .local ? "live" : written
            )
        }
        delivery = try ProviderSettings(reader: reader)
        consumer.localFallback = delivery.localFallback
        http.host = reader.string(S.httpHost)!
        http.port = try reader.int(S.httpPort)
        console.host = reader.string(S.consoleHost)!
        console.port = try reader.int(S.consolePort)
        if let secret = try ProviderSettings.secret(reader, "console.credentials") {
            let key =
                reader.string("console.credentials_file") == nil ? "console.credentials" : "console.credentials_file"
            console.credentials = try ConsoleCredentials(parsing: secret.reveal(), key: key)
        }
        tracing.endpoint = try ProviderSettings.url(reader, S.tracingEndpoint)
        tracing.protocolName = try reader.choice(S.tracingProtocol)
        tracing.samplePercent = try reader.int(S.tracingSamplePercent)
        logLevel = try reader.choice(S.logLevel)
        allowSuperuser = try reader.bool(S.allowSuperuser)
        try consumer.validate()
    }

    /// The database URL with any password replaced by `***`.
    package var maskedDatabaseURL: String { Self.mask(pool.connection.url) }

    package static func mask(_ url: String) -> String {
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
    package struct Reader {
        package let reader: ConfigReader

        /// `setting` (at `key` when the setting's key has placeholders), else its default.
        package func string(_ setting: Setting, key: String? = nil) -> String? {
            string(key ?? setting.key(), secret: setting.secret) ?? setting.defaultValue
        }

        /// An integer setting within its range; `value` replaces the table's default (per-provider defaults).
        package func int(_ setting: Setting, key: String? = nil, default value: Int? = nil) throws -> Int {
            guard case .integer(let range) = setting.kind else {
                preconditionFailure("\(setting.key) is not an integer")
            }
            return try int(key ?? setting.key(), default: value ?? setting.defaultInteger, range: range)
        }

        package func bool(_ setting: Setting) throws -> Bool {
            try bool(setting.key(), default: setting.defaultValue == "true")
        }

        /// One of a choice setting's words (`value` when the caller already read and mapped it).
        package func choice(_ setting: Setting, value: String? = nil) throws -> String {
            guard case .choice(let words) = setting.kind else { preconditionFailure("\(setting.key) is not a choice") }
            let text = value ?? string(setting) ?? ""
            guard words.contains(text) else {
                throw ConfigurationError(
                    key: setting.key,
                    reason: "must be one of \(words.joined(separator: ", ")), got \"\(text.prefix(40))\""
                )
            }
            return text
        }

        package func string(_ key: String, secret: Bool = false) -> String? {
            if let s = reader.string(forKey: ConfigKey(key), isSecret: secret) { return s }
            if let i = reader.int(forKey: ConfigKey(key)) { return String(i) }
            return nil
        }

        /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`); anything else is an error.
        package func bool(_ key: String, default value: Bool) throws -> Bool {
            if let b = reader.bool(forKey: ConfigKey(key)) { return b }
            guard let text = string(key) else { return value }
            switch text.lowercased() {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off": return false
            default: throw ConfigurationError(key: key, reason: "must be true or false, got \"\(text.prefix(40))\"")
            }
        }

        package func int(_ key: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
            if let i = reader.int(forKey: ConfigKey(key)) {
                guard range.contains(i) else {
                    throw ConfigurationError(
                        key: key,
                        reason: "must be \(range.lowerBound)...\(range.upperBound), got \(i)"
                    )
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
