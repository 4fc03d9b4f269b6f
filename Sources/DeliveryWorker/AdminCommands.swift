import ArgumentParser
import Console
import Delivery
import Foundation
import HeraldCore
import HeraldMetrics
import HeraldTracing
import Providers
import Queue
import Settings
import Wiring

struct EnqueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Enqueue a notification (operations smoke test)."
    )

    @OptionGroup var options: GlobalOptions
    @Option(help: "Recipient user id (repeat for a fan-out through enqueue_many).") var user: [String] = []
    @Option(help: "Category name (a row in herald.categories).") var category: String
    @Option(help: "Title.") var title: String?
    @Option(help: "Body.") var body: String?
    @Option(help: "Deep-link route.") var route: String?
    @Option(help: "Full payload as JSON (instead of --title/--body/--route).") var payload: String?
    @Option(name: .customLong("options"), help: "Enqueue options as JSON, e.g. '{\"priority\":\"critical\"}'.")
    var jobOptions: String = "{}"
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard !user.isEmpty else { throw ValidationError("give at least one --user") }
        guard payload != nil || (title != nil && body != nil) else {
            throw ValidationError("give --title and --body, or --payload")
        }
    }

    func run() async throws {
        var body = payload ?? ""
        if payload == nil, let title, let text = self.body {
            var map = ["title": title, "body": text]
            if let route { map["route"] = route }
            body = JSONText.object(map)
        }
        try await withRuntime(options) { runtime in
            let outbox = runtime.outbox()
            if user.count == 1 {
                let id = try await outbox.enqueue(
                    user: user[0],
                    category: category,
                    payloadJSON: body,
                    optionsJSON: jobOptions
                )
                if self.json {
                    JSONOutput.print(["enqueued": id == nil ? 0 : 1, "job": id.map { $0 as Any } ?? NSNull()])
                } else if let id {
                    print("herald: enqueued job \(id)")
                } else {
                    print("herald: skipped: the dedup key is already used for this user")
                }
            } else {
                let n = try await outbox.enqueueMany(
                    users: user,
                    category: category,
                    payloadJSON: body,
                    optionsJSON: jobOptions
                )
                if self.json { JSONOutput.print(["enqueued": n]) } else { print("herald: enqueued \(n) jobs") }
            }
        }
    }
}

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Queue depth by state, oldest pending age, dead letters."
    )

    @OptionGroup var options: GlobalOptions
    @Flag(help: "Print one JSON object.") var json = false

    func run() async throws {
        try await withRuntime(options) { runtime in
            let status = try await runtime.outbox().status()
            let s = status.depth
            let pauses = try await runtime.outbox().pauses()
            let version = try await runtime.migrator().currentVersion()
            if json {
                let paused: [[String: Any]] = pauses.map { p in
                    [
                        "category": p.category.map { $0 as Any } ?? NSNull(),
                        "app_id": p.appID.map { $0 as Any } ?? NSNull(),
                        "until": p.until.map { $0 as Any } ?? NSNull(), "paused_by": p.pausedBy, "since": p.since,
                    ]
                }
                JSONOutput.print([
                    "pending_due": s.pendingDue, "pending_scheduled": s.pendingScheduled, "running": s.running,
                    "paused_jobs": s.paused, "paused": paused,
                    "oldest_pending_age_seconds": (s.oldestPendingAge.seconds * 1000).rounded() / 1000,
                    "dead_letters": s.deadLetters, "delivered_last_hour": status.deliveredLastHour,
                    "active_devices": status.activeDevices, "schema_version": version,
                ])
            } else {
                print("pending (due)         \(s.pendingDue)")
                print("pending (scheduled)   \(s.pendingScheduled)")
                print("paused (held)         \(s.paused)")
                print("running (leased)      \(s.running)")
                print("oldest pending age    \(String(format: "%.1f", s.oldestPendingAge.seconds)) s")
                print("dead letters (open)   \(s.deadLetters)")
                print("delivered, last hour  \(status.deliveredLastHour)")
                print("active devices        \(status.activeDevices)")
                print("schema version        \(version)")
                for p in pauses {
                    let what = p.category.map { "category \($0)" } ?? p.appID.map { "app \($0)" } ?? "everything"
                    print(
                        "paused                \(what) since \(p.since) by \(p.pausedBy)\(p.until.map { " until \($0)" } ?? "")"
                    )
                }
            }
        }
    }
}

struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract:
            "Load every setting and credential (exits non-zero on the first that does not load); print them with secrets masked."
    )

    @OptionGroup var options: GlobalOptions
    @Flag(help: "Also connect to the database and report the schema version.") var connect = false
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        let c = try await HeraldConfiguration.load(file: options.config)
        try c.delivery.validateCredentials()
        let rows: [(String, String)] =
            [
                ("database.url", c.maskedDatabaseURL),
                ("database.pool_size", "\(c.pool.size)"),
                (
                    "database.statement_timeout_ms",
                    "\(c.pool.connection.statementTimeout.components.seconds * 1000 + c.pool.connection.statementTimeout.components.attoseconds / 1_000_000_000_000_000)"
                ),
                ("database.connect_timeout_s", "\(c.pool.connection.connectTimeout.components.seconds)"),
                ("database.migrations_dir", c.migrationsDirectory ?? "(embedded in the binary)"),
                ("database.buckets", c.buckets.map { "\($0)" } ?? "(what the database has; 1 for a new one)"),
                ("queue.batch_size", "\(c.consumer.batchSize)"),
                ("queue.max_in_flight_batches", "\(c.consumer.maxInFlightBatches)"),
                ("queue.max_concurrent_acks", "\(c.consumer.maxConcurrentAcks)"),
                ("queue.lease_seconds", "\(c.consumer.lease.components.seconds)"),
                (
                    "queue.idle_poll_ms",
                    "\(c.consumer.idlePoll.components.seconds * 1000 + c.consumer.idlePoll.components.attoseconds / 1_000_000_000_000_000)"
                ),
                ("queue.consumers", "\(c.consumers)"),
                ("worker.id", c.workerID),
                ("shutdown.deadline_seconds", "\(c.shutdownDeadline.components.seconds)"),
                ("maintenance.reap_interval_seconds", "\(c.maintenance.reapInterval.components.seconds)"),
                ("maintenance.prune_interval_seconds", "\(c.maintenance.pruneInterval.components.seconds)"),
                ("retention.delivery_log_days", "\(c.maintenance.deliveryLogRetention.components.seconds / 86_400)"),
                ("retention.inbox_days", "\(c.maintenance.inboxRetention.components.seconds / 86_400)"),
                ("retention.dead_letter_days", "\(c.maintenance.deadLetterRetention.components.seconds / 86_400)"),
            ]
            + c.providers.sorted { $0.key.rawValue < $1.key.rawValue }.map {
                ("providers.\($0.key.rawValue)", $0.value)
            }
            + c.delivery.summary
            + [
                ("http.host", c.http.host), ("http.port", "\(c.http.port)"),
                ("console.host", c.console.host), ("console.port", "\(c.console.port)"),
                (
                    "console.credentials",
                    c.console.credentials.map { "accounts: \($0.names.joined(separator: ", "))" }
                        ?? "(unset: console off)"
                ),
                ("tracing.otlp_endpoint", c.tracing.endpoint ?? "(unset: no tracing)"),
                ("tracing.otlp_protocol", c.tracing.protocolName),
                ("tracing.sample_percent", "\(c.tracing.samplePercent)"),
                ("log.level", c.logLevel),
            ]
        let unknown = Setting.unknownEnvironmentNames(in: ProcessInfo.processInfo.environment)
        if json {
            var object: [String: Any] = Dictionary(uniqueKeysWithValues: rows)
            object["unknown_settings"] = unknown
            if connect {
                object["schema_version"] = try await withRuntime(options) { try await $0.migrator().currentVersion() }
            }
            return JSONOutput.print(object)
        }
        for (k, v) in rows { print(k.padding(toLength: 36, withPad: " ", startingAt: 0) + v) }
        for name in unknown { print("warning: \(name) is not a setting Herald reads (a typo?)") }
        if connect {
            try await withRuntime(options) { runtime in
                let version = try await runtime.migrator().currentVersion()
                print("database reachable; schema version \(version)")
            }
        }
    }
}
