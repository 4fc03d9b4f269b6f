import CLibPQ
import Foundation
import HeraldCore
import Logging
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A named, parameterized statement. Prepared once per connection on first use.
package struct PostgresStatement: Sendable, Hashable {
    /// Unique per SQL text; used as the server-side prepared statement name.
    package let name: String
    package let sql: String
    /// Runs on its generic plan from the first execution on a connection (`plan_cache_mode =
    /// force_generic_plan` while it runs), instead of PostgreSQL's five custom plans first.
    ///
    /// For statements written so that one plan serves every value of their binds (each
    /// per-row lookup a `LATERAL` probe, `OFFSET 0` fences: see the claim and the
    /// acknowledgement), which PostgreSQL then settles on anyway: the five custom plans only
    /// cost planning (5–7 ms each for the claim and the ack, 8 % of PostgreSQL's time in a
    /// 50,000-job drain, docs/benchmarks.md), and a claim the planner keeps costing as cheaper
    /// custom (the critical lane's) was planned on every execution.
    package let genericPlan: Bool
    package init(name: String, sql: String, genericPlan: Bool = false) {
        self.name = name
        self.sql = sql
        self.genericPlan = genericPlan
    }
}

/// Owns one `PGconn *` and runs every libpq call on a NIOThreadPool thread.
///
/// `@unchecked Sendable` holds because only the task that leased this connection from the pool
/// (or the listener that owns it) uses it, one call at a time, and every libpq call runs inside
/// `NIOThreadPool.runIfActive`, never on Swift's cooperative pool.
package final class PostgresConnection: @unchecked Sendable {
    package struct Configuration: Sendable {
        /// libpq connection string or URL. Default: `postgresql://localhost/herald`.
        package var url: String = "postgresql://localhost/herald"
        /// Server-side `statement_timeout` applied to every statement. Default 5 s.
        package var statementTimeout: Duration = .seconds(5)
        /// libpq `connect_timeout`. Default 5 s.
        package var connectTimeout: Duration = .seconds(5)
        /// `application_name` shown in `pg_stat_activity`. Default `herald`.
        package var applicationName: String = "herald"
        /// Sets `enable_seqscan = off` (and `jit = off`) for the session. Default true.
        ///
        /// - Important: the outbox, inbox and delivery log swing from empty to millions of rows
        ///   faster than (auto)analyze follows; with stale statistics ("inbox is empty") the
        ///   planner chose sequential scans for per-recipient lookups and every claim scanned the
        ///   whole inbox (measured: drain 650 jobs/s instead of 13,000). Every statement Herald
        ///   runs has an index path; this makes plans independent of statistics. JIT goes off
        ///   with it: a scan that has no index (a tiny table) carries the planner's "disabled"
        ///   cost, which passes every JIT threshold, and compiling it took ~190 ms per statement.
        package var preferIndexScans = true
        package init() {}
        package init(url: String) { self.url = url }
    }

    /// Statements executed by every connection of this process (the benchmark's statements/job).
    package static let statementsExecuted = Atomic<Int>(0)

    private var conn: OpaquePointer?
    private var prepared: Set<String> = []
    /// Whether the session's `plan_cache_mode` is `force_generic_plan` (set before a
    /// ``PostgresStatement/genericPlan`` statement, reset before any other).
    private var genericPlans = false
    private let configuration: Configuration
    private let threadPool: NIOThreadPool

    private init(configuration: Configuration, threadPool: NIOThreadPool) {
        self.configuration = configuration
        self.threadPool = threadPool
    }

    deinit {
        if let conn { PQfinish(conn) }
    }

    /// Opens a connection and applies the session settings.
    package static func connect(
        configuration: Configuration,
        threadPool: NIOThreadPool
    ) async throws -> PostgresConnection {
        let connection = PostgresConnection(configuration: configuration, threadPool: threadPool)
        try await connection.open()
        return connection
    }

    private func open() async throws {
        let configuration = self.configuration
        try await threadPool.runIfActive { [self] in
            if let conn { PQfinish(conn) }
            conn = nil
            prepared = []
            genericPlans = false
            let timeout = max(1, Int(configuration.connectTimeout.components.seconds))
            let keys = ["dbname", "connect_timeout", "application_name"]
            let values = [configuration.url, String(timeout), configuration.applicationName]
            let c = Self.withCStrings(keys) { k in
                Self.withCStrings(values) { v in PQconnectdbParams(k, v, 1) }
            }
            guard let c, PQstatus(c) == CONNECTION_OK else {
                let message = c.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "out of memory"
                if let c { PQfinish(c) }
                throw PostgresError(kind: .connection, message: Self.redact(message))
            }
            conn = c
            let ms =
                configuration.statementTimeout.components.seconds * 1000
                + configuration.statementTimeout.components.attoseconds / 1_000_000_000_000_000
            try execSimple(
                "SET statement_timeout = \(ms); SET client_min_messages = warning"
                    + (configuration.preferIndexScans ? "; SET enable_seqscan = off; SET jit = off" : ""),
                name: "session_setup"
            )
        }
    }

    /// True when the underlying connection is healthy as far as libpq knows.
    package var isHealthy: Bool {
        get async {
            (try? await threadPool.runIfActive { [self] in conn.map { PQstatus($0) == CONNECTION_OK } ?? false })
                ?? false
        }
    }

    /// Re-opens the connection (after a broken one), keeping the configuration.
    package func reconnect() async throws {
        try await open()
    }

    /// Runs a named statement with text binds; prepares it on this connection the first time.
    package func query(_ statement: PostgresStatement, _ binds: [String?] = []) async throws -> PostgresRows {
        try await threadPool.runIfActive { [self] in try runPrepared(statement, binds) }
    }

    /// Runs SQL text without parameters (migrations, `LISTEN`); may contain several statements.
    package func execute(_ sql: String, name: String) async throws {
        try await threadPool.runIfActive { [self] in try execSimple(sql, name: name) }
    }

    /// Runs SQL text without parameters and returns the last result's rows.
    package func simpleQuery(_ sql: String, name: String) async throws -> PostgresRows {
        try await threadPool.runIfActive { [self] in try execSimpleRows(sql, name: name) }
    }

    // MARK: - Blocking parts (thread pool only)

    private func live() throws -> OpaquePointer {
        guard let conn else { throw PostgresError(kind: .closed, message: "connection is closed") }
        return conn
    }

    private func runPrepared(_ statement: PostgresStatement, _ binds: [String?]) throws -> PostgresRows {
        let conn = try live()
        if !prepared.contains(statement.name) {
            let result = PQprepare(conn, statement.name, statement.sql, 0, nil)
            defer { PQclear(result) }
            guard PQresultStatus(result) == PGRES_COMMAND_OK else {
                throw PostgresError.from(result: result, connection: conn, statement: statement.name)
            }
            prepared.insert(statement.name)
        }
        // libpq passes text binds as C strings: a NUL byte would silently cut the value short.
        // PostgreSQL text cannot hold NUL either, so refuse it with the server's own SQLSTATE.
        for bind in binds where bind.map(Self.containsNUL) == true {
            throw PostgresError(
                kind: .query,
                sqlState: "22021",
                message: "a parameter contains a NUL byte (0x00), which text cannot hold",
                statement: statement.name
            )
        }
        if statement.genericPlan != genericPlans {
            // One statement more only when the kind changes on this connection: a consumer's
            // connections run generic-plan statements all along.
            try execSimple(
                statement.genericPlan ? "SET plan_cache_mode = force_generic_plan" : "RESET plan_cache_mode",
                name: "plan_cache_mode"
            )
            genericPlans = statement.genericPlan
        }
        Self.statementsExecuted.add(1, ordering: .relaxed)
        let result = Self.withOptionalCStrings(binds) { values in
            PQexecPrepared(conn, statement.name, Int32(binds.count), values, nil, nil, 0)
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
            return PostgresRows(result: result!)
        default:
            let error = PostgresError.from(result: result, connection: conn, statement: statement.name)
            if error.sqlState == "26000" { prepared.remove(statement.name) }  // prepared statement gone
            throw error
        }
    }

    /// Whether `text` has a NUL byte: `memchr` over a native string's bytes (an acknowledgement's
    /// binds are hundreds of kilobytes; a byte-by-byte walk of the view was 2 % of the worker).
    static func containsNUL(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
            return memchr(base, 0, bytes.count) != nil
        } ?? text.utf8.contains(0)
    }

    private func execSimple(_ sql: String, name: String) throws {
        _ = try execSimpleRows(sql, name: name)
    }

    private func execSimpleRows(_ sql: String, name: String) throws -> PostgresRows {
        let conn = try live()
        Self.statementsExecuted.add(1, ordering: .relaxed)
        let result = PQexec(conn, sql)
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(result: result!)
        default:
            throw PostgresError.from(result: result, connection: conn, statement: name)
        }
    }

    /// One `NOTIFY` received.
    package struct Notification: Sendable, Hashable {
        package var channel: String
        package var payload: String
    }

    /// Waits until the server sends a notification or `timeout` passes; returns the notifications
    /// received (empty on timeout). Only for a connection dedicated to `LISTEN`.
    package func waitForNotifications(timeout: Duration) async throws -> [Notification] {
        try await threadPool.runIfActive { [self] in
            let conn = try live()
            var channels = drainNotifications(conn)
            if !channels.isEmpty { return channels }
            let socket = PQsocket(conn)
            guard socket >= 0 else { throw PostgresError(kind: .connection, message: "no socket") }
            var fds = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ms = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            let ready = poll(&fds, 1, ms)
            if ready > 0 {
                guard PQconsumeInput(conn) == 1 else {
                    throw PostgresError(kind: .connection, message: Self.redact(String(cString: PQerrorMessage(conn))))
                }
                channels = drainNotifications(conn)
            }
            if PQstatus(conn) != CONNECTION_OK {
                throw PostgresError(kind: .connection, message: "connection lost while listening")
            }
            return channels
        }
    }

    private func drainNotifications(_ conn: OpaquePointer) -> [Notification] {
        var received: [Notification] = []
        while let n = PQnotifies(conn) {
            received.append(
                Notification(
                    channel: String(cString: n.pointee.relname),
                    payload: n.pointee.extra.map { String(cString: $0) } ?? ""
                )
            )
            PQfreemem(n)
        }
        return received
    }

    /// Closes the connection.
    package func close() async {
        _ = try? await threadPool.runIfActive { [self] in
            if let conn { PQfinish(conn) }
            conn = nil
        }
    }

    // MARK: - C string helpers

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafePointer<CChar>?] = strings.map { UnsafePointer(strdup($0)) }
        pointers.append(nil)
        defer { for p in pointers { free(UnsafeMutablePointer(mutating: p)) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// Lays every value out NUL-terminated in one buffer and passes pointers into it: one
    /// allocation for a whole batch of binds instead of one per value.
    private static func withOptionalCStrings<R>(
        _ strings: [String?],
        _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) -> R {
        if strings.isEmpty { return body(nil) }
        var buffer: [CChar] = []
        buffer.reserveCapacity(strings.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 1 })
        var offsets: [Int?] = []
        offsets.reserveCapacity(strings.count)
        for string in strings {
            guard let string else {
                offsets.append(nil)
                continue
            }
            offsets.append(buffer.count)
            var utf8 = string
            utf8.withUTF8 { bytes in
                bytes.withMemoryRebound(to: CChar.self) { buffer.append(contentsOf: $0) }
            }
            buffer.append(0)
        }
        return buffer.withUnsafeBufferPointer { base in
            let pointers: [UnsafePointer<CChar>?] = offsets.map { offset in offset.map { base.baseAddress! + $0 } }
            return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
        }
    }

    /// Removes anything that looks like a password from a libpq message.
    static func redact(_ message: String) -> String {
        var text = String(message.map { $0 == "\n" || $0 == "\t" ? " " : $0 })
        while text.hasSuffix(" ") { text.removeLast() }
        let marker = Array("password=".utf8)
        let bytes = Array(text.utf8)
        if bytes.count >= marker.count,
            let start = (0...(bytes.count - marker.count)).first(where: {
                Array(bytes[$0..<($0 + marker.count)]) == marker
            })
        {
            text = String(decoding: bytes[..<start], as: UTF8.self) + "password=***"
        }
        return text
    }
}
