import Delivery
import Dispatcher
import Foundation
import HeraldCore
import HeraldMetrics
import Logging
import Providers
import Queue
import Synchronization
import Testing

/// A fresh, migrated database per test, cloned from a template migrated once per run.
///
/// The server comes from `HERALD_TEST_DATABASE_URL` (an admin URL; `make test` sets it). A
/// missing server fails the test: database tests are never skipped.
package struct TestDatabase: Sendable {
    package let name: String
    package let url: String
    package let pool: PostgresPool

    package init(name: String, url: String, pool: PostgresPool) {
        self.name = name
        self.url = url
        self.pool = pool
    }

    package static let logger: Logger = {
        var l = Logger(label: "herald.test")
        l.logLevel = .critical
        return l
    }()

    package static var adminURL: String {
        get throws {
            guard let url = ProcessInfo.processInfo.environment["HERALD_TEST_DATABASE_URL"], !url.isEmpty else {
                throw TestSetupError("HERALD_TEST_DATABASE_URL is not set: run the suite with `make test`")
            }
            return url
        }
    }

    /// The repository root (for sql/ and the herald binary).
    package static let repositoryRoot: String = {
        var path = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { path.deleteLastPathComponent() }
        return path.path
    }()

    package static let template = TemplateOnce()

    /// Every connection of a test, and of each `herald` process a test starts: every suite starts
    /// at once, and connecting can wait past libpq's 5 s default while 300 tests clone their
    /// databases (a spawned worker's first connection timed out so in CI).
    package static let connectTimeout: Duration = .seconds(30)

    /// Runs `body` with a new database cloned from the migrated template; drops it afterwards.
    /// - Parameter buckets: the buckets the database is laid out with (migration 0015).
    package static func withFresh<T: Sendable>(
        poolSize: Int = 4,
        buckets: Int = 1,
        _ body: (TestDatabase) async throws -> T
    ) async throws -> T {
        let admin = try adminURL
        let templateName = try await template.ensure(adminURL: admin, buckets: buckets)
        return try await live.run {
            let name = newName("herald_t_")
            try await clones.run { try await cloneDatabase(name, from: templateName, adminURL: admin) }
            var configuration = PostgresPool.Configuration()
            configuration.size = poolSize
            configuration.connection.url = databaseURL(admin: admin, database: name)
            // Set-up statements (thousands of devices, fan-outs) on a machine running every suite at
            // once can pass the worker's 5 s default; no test here is about the timeout itself.
            configuration.connection.statementTimeout = .seconds(30)
            configuration.connection.connectTimeout = connectTimeout
            let db = TestDatabase(
                name: name,
                url: configuration.connection.url,
                pool: PostgresPool(configuration: configuration)
            )
            do {
                let value = try await body(db)
                await db.pool.shutdown()
                try? await adminExec("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", adminURL: admin)
                return value
            } catch {
                await db.pool.shutdown()
                try? await adminExec("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", adminURL: admin)
                throw error
            }
        }
    }

    /// `CREATE DATABASE name TEMPLATE template`. The clones of this process go one at a time
    /// (`clones`); another test process cloning the same server's template at that moment makes
    /// it fail with 55006, retried.
    private static func cloneDatabase(_ name: String, from templateName: String, adminURL: String) async throws {
        for attempt in 1...50 {
            do {
                try await adminExec("CREATE DATABASE \(name) TEMPLATE \(templateName)", adminURL: adminURL)
                return
            } catch let error as PostgresError where error.sqlState == "55006" && attempt < 50 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// How many tests of this process hold a database at once (`HERALD_TEST_MAX_DATABASES`,
    /// default 24); the others wait their turn before cloning. Every suite of a phase starts at
    /// once, ~300 tests: without a bound each cloned its database and connected in the same
    /// seconds, and tests timed out connecting (CI's recurring flakes) on two cores that run
    /// them no faster for starting together.
    package static let live = TestGate(
        limit: ProcessInfo.processInfo.environment["HERALD_TEST_MAX_DATABASES"].flatMap { Int($0) }.map { max(1, $0) }
            ?? 24
    )

    /// One `CREATE DATABASE … TEMPLATE` at a time: PostgreSQL refuses a clone while another
    /// session is connected to the template, which a concurrent clone is (55006); in turn, they
    /// neither fail nor poll.
    static let clones = TestGate(limit: 1)

    /// An empty (unmigrated) database URL, for migration tests; dropped afterwards.
    package static func withEmpty<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let admin = try adminURL
        return try await live.run {
            let name = newName("herald_e_")
            try await adminExec("CREATE DATABASE \(name)", adminURL: admin)
            do {
                let value = try await body(databaseURL(admin: admin, database: name))
                try? await adminExec("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", adminURL: admin)
                return value
            } catch {
                try? await adminExec("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", adminURL: admin)
                throw error
            }
        }
    }

    package static func newName(_ prefix: String) -> String {
        prefix + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
    }

    /// Replaces the database name of a `postgresql://…/name[?query]` URL.
    package static func databaseURL(admin: String, database: String) -> String {
        guard let schemeEnd = admin.range(of: "://"),
            let slash = admin[schemeEnd.upperBound...].firstIndex(of: "/")
        else { return admin }
        let rest = admin[admin.index(after: slash)...]
        let query = rest.firstIndex(of: "?").map { String(rest[$0...]) } ?? ""
        return String(admin[...slash]) + database + query
    }

    /// A one-connection pool on the admin database, for the statements below.
    static func adminPool(_ adminURL: String) -> PostgresPool {
        var configuration = PostgresPool.Configuration()
        configuration.size = 1
        configuration.connection.url = adminURL
        // CREATE DATABASE … TEMPLATE copies files: on a loaded 2-core machine it can take more
        // than the default 5 s statement timeout. Give it a minute (adminExec retries a timeout once).
        configuration.connection.statementTimeout = .seconds(60)
        configuration.connection.connectTimeout = connectTimeout
        return PostgresPool(configuration: configuration)
    }

    package static func adminExec(_ sql: String, adminURL: String) async throws {
        let pool = adminPool(adminURL)
        var failure: (any Error)?
        for attempt in 1...2 {
            do {
                try await pool.withConnection { try await $0.execute(sql, name: "admin") }
                failure = nil
                break
            } catch let error as PostgresError where error.sqlState == "57014" && attempt == 1 {
                failure = error
                try? await Task.sleep(for: .milliseconds(500))
            } catch {
                failure = error
                break
            }
        }
        await pool.shutdown()
        if let failure { throw failure }
    }

    package static func migrations() throws -> [Migrator.Migration] {
        Migrator.embedded.migrations
    }

    // MARK: - Helpers

    package func exec(_ sql: String) async throws {
        try await pool.withConnection { try await $0.execute(sql, name: "test") }
    }

    package func rows(_ sql: String) async throws -> [[String?]] {
        try await pool.withConnection { try await $0.simpleQuery(sql, name: "test") }.rows
    }

    package func scalar(_ sql: String) async throws -> String? {
        try await rows(sql).first?.first ?? nil
    }

    package func int(_ sql: String) async throws -> Int {
        Int(try await scalar(sql) ?? "") ?? -1
    }

    package func outbox(_ worker: String = "test-worker") -> Outbox {
        Outbox(pool: pool, workerID: worker)
    }

    /// A category with slow-to-elapse backoff (tests move a manual clock instead of sleeping).
    package func addCategory(
        _ name: String,
        priority: String = "normal",
        maxAttempts: Int = 3,
        base: String = "10 seconds",
        cap: String = "40 seconds",
        ttl: String = "1 day"
    ) async throws {
        try await exec(
            """
            INSERT INTO herald.categories (name, priority, max_attempts, backoff_base, backoff_cap, ttl)
            VALUES ('\(name)', '\(priority)', \(maxAttempts), '\(base)', '\(cap)', '\(ttl)')
            """
        )
    }

    @discardableResult
    package func registerDevice(_ user: String, _ provider: String, _ token: String) async throws -> Int64 {
        Int64(try await scalar("SELECT herald.register_device('\(user)', '\(provider)', '\(token)')") ?? "") ?? -1
    }

    @discardableResult
    package func enqueue(
        _ user: String,
        _ category: String,
        title: String = "Hello",
        body: String = "World",
        options: String = "{}"
    )
        async throws -> Int64?
    {
        try await outbox().enqueue(
            user: user,
            category: category,
            payloadJSON: #"{"title":"\#(title)","body":"\#(body)"}"#,
            optionsJSON: options
        )
    }

    /// A consumer over this database with the given providers and clock.
    package func consumer(
        worker: String = "test-worker",
        providers: ProviderRegistry,
        clock: any WallClock = SystemClock(),
        batchSize: Int = 100,
        lease: Duration = .seconds(30),
        wakeup: Wakeup = Wakeup(),
        idlePoll: Duration = .milliseconds(50),
        metrics: WorkerMetrics = .disabled(),
        onSettled: (@Sendable ([Settlement], Outbox.Batch) -> Void)? = nil
    ) -> OutboxConsumer {
        var configuration = OutboxConsumer.Configuration()
        configuration.batchSize = batchSize
        configuration.lease = lease
        configuration.idlePoll = idlePoll
        return OutboxConsumer(
            outbox: outbox(worker),
            providers: providers,
            clock: clock,
            wakeup: wakeup,
            configuration: configuration,
            logger: Self.logger,
            metrics: metrics,
            onSettled: onSettled
        )
    }
}

/// Creates and migrates the template database once per test run (one per bucket layout).
package actor TemplateOnce {
    private var creations: [Int: Task<String, any Error>] = [:]

    package func ensure(adminURL: String, buckets: Int = 1) async throws -> String {
        if let creation = creations[buckets] { return try await creation.value }
        let task = Task { try await Self.create(adminURL: adminURL, buckets: buckets) }
        creations[buckets] = task
        return try await task.value
    }

    private static func create(adminURL: String, buckets: Int) async throws -> String {
        let name = "herald_test_template_\(getpid())" + (buckets == 1 ? "" : "_b\(buckets)")
        try await dropTemplatesOfGoneRuns(adminURL: adminURL)
        try await TestDatabase.adminExec("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", adminURL: adminURL)
        try await TestDatabase.adminExec("CREATE DATABASE \(name)", adminURL: adminURL)
        var configuration = PostgresPool.Configuration()
        configuration.size = 1
        configuration.connection.url = TestDatabase.databaseURL(admin: adminURL, database: name)
        let pool = PostgresPool(configuration: configuration)
        _ = try await Migrator(pool: pool, schema: Migrator.embedded, buckets: buckets).migrate(
            logger: TestDatabase.logger
        )
        await pool.shutdown()
        return name
    }
}

extension TemplateOnce {
    /// Drops the templates of earlier test runs whose process is gone: a run keeps its templates
    /// while it lives (its tests copy them) and nothing drops them when it ends, so without this
    /// every run on a developer's cluster left one or two behind.
    private static func dropTemplatesOfGoneRuns(adminURL: String) async throws {
        let pool = TestDatabase.adminPool(adminURL)
        let names: [String]
        do {
            names = try await pool.query(
                PostgresStatement(
                    name: "herald_test_templates",
                    sql: "SELECT datname FROM pg_database WHERE datname LIKE 'herald\\_test\\_template\\_%'"
                )
            ).readers.compactMap { $0.string("datname") }
        } catch {
            await pool.shutdown()
            throw error
        }
        await pool.shutdown()
        for name in names {
            let suffix = name.dropFirst("herald_test_template_".count)
            guard let pid = Int32(suffix.prefix { $0.isNumber }), pid != getpid() else { continue }
            if kill(pid, 0) == -1 && errno == ESRCH {
                try await TestDatabase.adminExec("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", adminURL: adminURL)
            }
        }
    }
}

package struct TestSetupError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A provider that records what it was asked to send and answers from a script.
package final class ScriptedProvider: PushProvider, Sendable {
    package let name = "scripted"
    private let state = Mutex<(sent: [PushMessage], script: [String: DeliveryOutcome])>(([], [:]))
    private let delay: Duration

    package init(delay: Duration = .zero) { self.delay = delay }

    /// Answers `outcome` for every message to the device with this token (nil: accept).
    package func answer(_ token: String, with outcome: DeliveryOutcome?) {
        state.withLock { $0.script[token] = outcome }
    }

    package var sent: [PushMessage] { state.withLock { $0.sent } }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        if delay > .zero { try? await Task.sleep(for: delay) }
        if Task.isCancelled {  // like a real adapter whose request was abandoned: unknown, retry
            return messages.map { _ in DeliveryOutcome(.retry, reason: .cancelled) }
        }
        return state.withLock { s in
            s.sent.append(contentsOf: messages)
            return messages.map { s.script[$0.device.token] ?? .accepted }
        }
    }
}

/// Runs the `herald` executable built next to the tests.
package enum HeraldBinary {
    package static var path: String {
        if let explicit = ProcessInfo.processInfo.environment["HERALD_BINARY"], !explicit.isEmpty { return explicit }
        return TestDatabase.repositoryRoot + "/.build/debug/herald"
    }

    package static func start(_ arguments: [String], environment: [String: String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = Self.environment(environment)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return (process, output)
    }

    /// This process's environment plus `overrides`, with what every test worker needs.
    package static func environment(_ overrides: [String: String]) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        // The harness's own variables are not settings: a worker would warn about each one.
        for name in ["HERALD_BINARY", "HERALD_SIMULATOR_BIN", "HERALD_TEST_DATABASE_URL", "HERALD_ADMIN_DATABASE_URL"] {
            env[name] = nil
        }
        // The test cluster's only role is the superuser `postgres`; tests of the guard set "false".
        env["HERALD_SECURITY_ALLOW_SUPERUSER"] = "true"
        env["HERALD_DATABASE_CONNECT_TIMEOUT_S"] = "\(TestDatabase.connectTimeout.components.seconds)"
        for (k, v) in overrides { env[k] = v }
        return env
    }

    /// Runs to completion; returns exit status and combined output.
    package static func run(_ arguments: [String], environment: [String: String]) async throws -> (Int32, String) {
        let (process, pipe) = try start(arguments, environment: environment)
        let data = await readToEndOffPool(pipe)
        await waitUntilExitOffPool(process)
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

extension PostgresError {
    /// The SQLSTATE of a thrown error, for `#expect(throws:)` checks.
    package static func sqlState(of error: any Error) -> String? { (error as? PostgresError)?.sqlState }
}

/// Reads a pipe to its end on a Dispatch thread. A blocking read inside a task holds one of the
/// cooperative pool's threads (two on a 2-core machine) for the life of the process it reads,
/// which starves everything else on the pool — the in-process provider simulator first, whose
/// requests then time out in unrelated tests.
package func readToEndOffPool(_ pipe: Pipe) async -> Data {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(returning: (try? pipe.fileHandleForReading.readToEnd()) ?? Data())
        }
    }
}

/// `Process.waitUntilExit()` on a Dispatch thread, for the same reason as ``readToEndOffPool(_:)``.
package func waitUntilExitOffPool(_ process: Process) async {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            process.waitUntilExit()
            continuation.resume()
        }
    }
}

/// At most `limit` bodies at once, the others waiting in arrival order (a ``SlotGate``).
/// Re-entrant: a body run inside another body of the same gate (a test that opens a second
/// database) does not wait for a slot, so nested use cannot deadlock.
package final class TestGate: Sendable {
    private let slots: SlotGate
    @TaskLocal private static var held: Set<ObjectIdentifier> = []

    package init(limit: Int) {
        slots = SlotGate(limit: limit)
    }

    package func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let me = ObjectIdentifier(self)
        if Self.held.contains(me) { return try await body() }
        return try await slots.run { try await Self.$held.withValue(Self.held.union([me])) { try await body() } }
    }
}
