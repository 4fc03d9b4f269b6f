import Foundation

/// One configuration key Herald reads: its name, the values it takes, its default, its help and
/// whether it is secret. ``Setting/all`` is the one list: reading and validation
/// (``HeraldConfiguration``), `herald check-config`, and the tests that hold the deployment
/// manifests and docs/configuration.md to it all use this table.
///
/// A key is written with dots (`queue.batch_size`); its environment variable is `HERALD_` and
/// the key in capitals with `_` for `.` (`HERALD_QUEUE_BATCH_SIZE`). `<id>` and `<provider>`
/// stand for an app id and a provider name; `[_file]` marks a secret that can also be a file.
package struct Setting: Sendable, Hashable {
    package enum Kind: Sendable, Hashable {
        case integer(ClosedRange<Int>)
        case boolean
        case text
        /// One of these words.
        case choice([String])
        /// An http(s) URL.
        case url
        /// Comma-separated values.
        case list
    }

    package let key: String
    package let kind: Kind
    /// The default as a user would write it; nil when unset means "none".
    package let defaultValue: String?
    package let help: String
    package let secret: Bool

    init(_ key: String, _ kind: Kind, default value: String?, secret: Bool = false, _ help: String) {
        self.key = key
        self.kind = kind
        self.defaultValue = value
        self.help = help
        self.secret = secret
    }

    init(_ key: String, _ range: ClosedRange<Int>, default value: Int, _ help: String) {
        self.init(key, .integer(range), default: String(value), help)
    }

    init(_ key: String, default value: Bool, _ help: String) {
        self.init(key, .boolean, default: String(value), help)
    }

    /// The integer default (integer settings only).
    package var defaultInteger: Int {
        guard case .integer = kind, let text = defaultValue, let value = Int(text) else {
            preconditionFailure("\(key) has no integer default")
        }
        return value
    }

    /// `HERALD_QUEUE_BATCH_SIZE` for `queue.batch_size`.
    package var environmentName: String {
        "HERALD_" + key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    /// A regular expression matching the environment variables of this setting (placeholders
    /// and `[_file]` expanded).
    package var environmentPattern: String {
        "^"
            + environmentName
            .replacingOccurrences(of: "<ID>", with: "[A-Z0-9_]+")
            .replacingOccurrences(of: "<PROVIDER>", with: "(?:APNS|FCM|EXPO|WEBPUSH)")
            .replacingOccurrences(of: "[_FILE]", with: "(?:_FILE)?") + "$"
    }

    /// The key with its placeholders filled in (`pacing.<provider>_per_second`, provider `expo`).
    func key(id: String? = nil, provider: String? = nil) -> String {
        var k = key
        if let id { k = k.replacingOccurrences(of: "<id>", with: id) }
        if let provider { k = k.replacingOccurrences(of: "<provider>", with: provider) }
        return k.replacingOccurrences(of: "[_file]", with: "")
    }
}

extension Setting {
    // Database
    static let databaseURL = Setting(
        "database.url",
        .text,
        default: "postgresql://localhost/herald",
        secret: true,
        "libpq URL or connection string"
    )
    static let poolSize = Setting(
        "database.pool_size",
        1...64,
        default: 4,
        "connections per process (one more is used for LISTEN)"
    )
    static let statementTimeout = Setting(
        "database.statement_timeout_ms",
        100...600_000,
        default: 5000,
        "server-side statement_timeout on every connection"
    )
    static let connectTimeout = Setting("database.connect_timeout_s", 1...120, default: 5, "libpq connect_timeout")
    static let migrationsDirectory = Setting(
        "database.migrations_dir",
        .text,
        default: nil,
        "a folder laid out like sql/ (migrations/, functions/) to migrate with instead of the one compiled into the binary"
    )
    static let buckets = Setting(
        "database.buckets",
        .integer(1...1024),
        default: nil,
        "buckets a new database is laid out with (a power of two; fixed at install; unset: 1, or what the database has)"
    )
    // Queue
    static let batchSize = Setting("queue.batch_size", 1...5000, default: 200, "rows per claim")
    static let maxInFlightBatches = Setting(
        "queue.max_in_flight_batches",
        1...64,
        default: 4,
        "batch slots per consumer (a batch waiting on a slow provider's later waves gives its slot back: up to twice this many in flight)"
    )
    static let maxConcurrentAcks = Setting(
        "queue.max_concurrent_acks",
        1...64,
        default: 1,
        "acknowledgements running at once per consumer (the critical lane's not counted)"
    )
    static let leaseSeconds = Setting(
        "queue.lease_seconds",
        5...3600,
        default: 60,
        "lease of a claimed row, renewed every third of it"
    )
    static let idlePoll = Setting(
        "queue.idle_poll_ms",
        10...60_000,
        default: 500,
        "poll interval when idle; NOTIFY wakes earlier"
    )
    static let consumers = Setting("queue.consumers", 1...32, default: 1, "claim loops per process")
    static let workerID = Setting("worker.id", .text, default: nil, "lease owner prefix (unset: hostname-pid)")
    static let shutdownDeadline = Setting(
        "shutdown.deadline_seconds",
        1...3600,
        default: 25,
        "drain time after SIGTERM before in-flight batches are cancelled"
    )
    // Maintenance and retention
    static let reapInterval = Setting(
        "maintenance.reap_interval_seconds",
        1...3600,
        default: 5,
        "expired-lease scan and queue gauges interval"
    )
    static let pruneInterval = Setting(
        "maintenance.prune_interval_seconds",
        1...86_400,
        default: 60,
        "history retention pass interval"
    )
    static let deliveryLogDays = Setting("retention.delivery_log_days", 1...3650, default: 30, "delivery log retention")
    static let inboxDays = Setting(
        "retention.inbox_days",
        1...3650,
        default: 30,
        "inbox and local recordings retention"
    )
    static let deadLetterDays = Setting("retention.dead_letter_days", 1...3650, default: 30, "dead letter retention")
    // Adapters
    static let adapters = ["live", "local", "sink", "off"]
    static let providerAPNs = Setting("providers.apns", .choice(adapters), default: "off", "adapter for apns devices")
    static let providerFCM = Setting("providers.fcm", .choice(adapters), default: "off", "adapter for fcm devices")
    static let providerExpo = Setting("providers.expo", .choice(adapters), default: "off", "adapter for expo devices")
    static let providerWebPush = Setting(
        "providers.webpush",
        .choice(adapters),
        default: "off",
        "adapter for webpush devices"
    )
    static let providerLocal = Setting(
        "providers.local",
        .choice(["local", "sink", "off"]),
        default: "local",
        "adapter for local devices"
    )
    // HTTP, logs, security
    static let httpHost = Setting("http.host", .text, default: "0.0.0.0", "address of /metrics, /healthz, /readyz")
    static let httpPort = Setting(
        "http.port",
        0...65_535,
        default: 8080,
        "port of /metrics, /healthz, /readyz (0 picks a free one)"
    )
    static let consoleHost = Setting("console.host", .text, default: "0.0.0.0", "address of the operator console")
    static let consolePort = Setting(
        "console.port",
        0...65_535,
        default: 8081,
        "port of the operator console (0 picks a free one)"
    )
    static let consoleCredentials = Setting(
        "console.credentials[_file]",
        .text,
        default: nil,
        secret: true,
        "console accounts, one `name:role:password` per line (role viewer or operator); unset: no console"
    )
    static let tracingEndpoint = Setting(
        "tracing.otlp_endpoint",
        .url,
        default: nil,
        "OTLP/HTTP traces URL used as given (e.g. http://collector:4318/v1/traces); unset: no tracing"
    )
    static let tracingProtocol = Setting(
        "tracing.otlp_protocol",
        .choice(["http/protobuf", "http/json"]),
        default: "http/protobuf",
        "OTLP encoding"
    )
    static let tracingSamplePercent = Setting(
        "tracing.sample_percent",
        0...100,
        default: 1,
        "share of jobs enqueued without a traceparent that are traced (jobs with one follow its sampled flag)"
    )
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    static let logLevel = Setting("log.level", .choice(logLevels), default: "info", "log level")
    static let allowSuperuser = Setting(
        "security.allow_superuser",
        default: false,
        "let `run` connect as a PostgreSQL superuser (local development only)"
    )
    // Provider endpoints, delivery, pacing, circuit
    static let appIDs = Setting(
        "app_ids",
        .list,
        default: nil,
        "apps with credentials, comma-separated (keys app.<id>.*)"
    )
    static let apnsTeamID = Setting("app.<id>.apns.team_id", .text, default: nil, "APNs team id")
    static let apnsKeyID = Setting("app.<id>.apns.key_id", .text, default: nil, "APNs auth key id")
    static let apnsPrivateKey = Setting(
        "app.<id>.apns.private_key[_file]",
        .text,
        default: nil,
        secret: true,
        "APNs .p8 key (PEM), inline or a file"
    )
    static let apnsTopic = Setting("app.<id>.apns.topic", .text, default: nil, "APNs topic (bundle id)")
    static let fcmServiceAccount = Setting(
        "app.<id>.fcm.service_account[_file]",
        .text,
        default: nil,
        secret: true,
        "FCM service-account JSON, inline or a file"
    )
    static let expoAccessToken = Setting(
        "app.<id>.expo.access_token[_file]",
        .text,
        default: nil,
        secret: true,
        "Expo access token (optional)"
    )
    static let webPushSubject = Setting(
        "app.<id>.webpush.subject",
        .text,
        default: nil,
        "VAPID subject: mailto: or https: URL"
    )
    static let webPushPublicKey = Setting(
        "app.<id>.webpush.public_key",
        .text,
        default: nil,
        "VAPID public key (base64url, uncompressed P-256)"
    )
    static let webPushPrivateKey = Setting(
        "app.<id>.webpush.private_key[_file]",
        .text,
        default: nil,
        secret: true,
        "VAPID private key (base64url scalar or PEM)"
    )
    static let apnsProductionURL = Setting(
        "endpoints.apns_production",
        .url,
        default: "https://api.push.apple.com",
        "APNs production base URL"
    )
    static let apnsSandboxURL = Setting(
        "endpoints.apns_sandbox",
        .url,
        default: "https://api.sandbox.push.apple.com",
        "APNs sandbox base URL"
    )
    static let fcmURL = Setting("endpoints.fcm", .url, default: "https://fcm.googleapis.com", "FCM base URL")
    static let fcmTokenURL = Setting(
        "endpoints.fcm_token",
        .url,
        default: nil,
        "OAuth token URL; overrides the service account's token_uri"
    )
    static let expoURL = Setting("endpoints.expo", .url, default: "https://exp.host", "Expo base URL")
    static let extraCAFiles = Setting(
        "tls.extra_ca_files",
        .list,
        default: nil,
        "PEM files of extra trusted CAs, comma-separated"
    )
    static let requestTimeout = Setting(
        "delivery.request_timeout_ms",
        100...120_000,
        default: 10_000,
        "deadline of one provider request, connect included"
    )
    static let localFallback = Setting(
        "delivery.local_fallback",
        default: true,
        "record in local_notifications when no push device took a job"
    )
    static let pacing = Setting(
        "pacing.<provider>_per_second",
        .integer(0...1_000_000),
        default: nil,
        "sends/s per app credential (0: unpaced; expo defaults to 600, the others are unpaced)"
    )
    static let failureThreshold = Setting(
        "circuit.failure_threshold",
        1...100_000,
        default: 20,
        "consecutive failed messages that open the circuit"
    )
    static let openSeconds = Setting(
        "circuit.open_seconds",
        1...3600,
        default: 5,
        "first open period, doubling per failed probe"
    )
    static let maxOpenSeconds = Setting("circuit.max_open_seconds", 1...86_400, default: 60, "longest open period")
    static let credentialPauseSeconds = Setting(
        "circuit.credential_pause_seconds",
        1...86_400,
        default: 30,
        "pause of a credential the provider refused"
    )
    static let expoReceiptDelay = Setting(
        "expo.receipt_delay_seconds",
        0...86_400,
        default: 900,
        "wait after an Expo send before asking for its receipt"
    )
    static let expoReceiptPoll = Setting(
        "expo.receipt_poll_seconds",
        1...3600,
        default: 30,
        "how often the leader polls for due Expo receipts"
    )

    /// Every setting, in the order `check-config` and the docs list them.
    package static let all: [Setting] = [
        databaseURL, poolSize, statementTimeout, connectTimeout, migrationsDirectory, buckets,
        batchSize, maxInFlightBatches, maxConcurrentAcks, leaseSeconds, idlePoll, consumers, workerID, shutdownDeadline,
        reapInterval, pruneInterval, deliveryLogDays, inboxDays, deadLetterDays,
        providerAPNs, providerFCM, providerExpo, providerWebPush, providerLocal,
        httpHost, httpPort, consoleHost, consolePort, consoleCredentials,
        tracingEndpoint, tracingProtocol, tracingSamplePercent, logLevel, allowSuperuser,
        appIDs, apnsTeamID, apnsKeyID, apnsPrivateKey, apnsTopic, fcmServiceAccount, expoAccessToken,
        webPushSubject, webPushPublicKey, webPushPrivateKey,
        apnsProductionURL, apnsSandboxURL, fcmURL, fcmTokenURL, expoURL, extraCAFiles,
        requestTimeout, localFallback, pacing, failureThreshold, openSeconds, maxOpenSeconds, credentialPauseSeconds,
        expoReceiptDelay, expoReceiptPoll,
    ]
}

extension Setting {
    /// `HERALD_*` variables that name no setting (a typo such as `HERALD_QUEUE_BATCHSIZE` would
    /// otherwise be ignored in silence), sorted. `HERALD_CONFIG_FILE` names the file, not a setting.
    package static func unknownEnvironmentNames(in environment: [String: String]) -> [String] {
        let patterns = all.compactMap { try? Regex<Substring>($0.environmentPattern) }
        return environment.keys.filter { name in
            name.hasPrefix("HERALD_") && name != "HERALD_CONFIG_FILE"
                && !patterns.contains { name.wholeMatch(of: $0) != nil }
        }.sorted()
    }
}
