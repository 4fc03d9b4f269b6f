import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import HeraldMetrics
import Logging
import Prometheus
import Providers
import Queue
import ServiceLifecycle
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A free TCP port on 127.0.0.1 (bound, read back, released).
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// curl over real HTTP: (status, body); `-i` in `args` puts the headers in the body.
func curl(_ args: [String]) async throws -> (status: Int, body: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = ["-s", "-m", "10", "-w", "\n%{http_code}"] + args
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = await readToEndOffPool(pipe)
    await waitUntilExitOffPool(process)
    var lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
    let code = Int(lines.popLast() ?? "") ?? 0
    return (code, lines.joined(separator: "\n"))
}

/// GET over real HTTP with curl: (status, body without trailing newlines).
func httpGet(_ url: String) async throws -> (Int, String) {
    var (code, body) = try await curl(["-m", "5", url])
    while body.hasSuffix("\n") { body.removeLast() }
    return (code, body)
}

@Suite("Operations: metrics, readiness, leadership", .serialized)
struct OperationsTests {
    @Test("metrics appear with the right labels after a real run; /healthz and /readyz answer")
    func metricsAfterRealRun() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("u", "local", "tablet")
            for _ in 0..<3 { try await db.enqueue("u", "chat") }
            try await db.enqueue("nobody", "chat")
            let port = freePort()
            let (worker, _) = try HeraldBinary.start(
                ["run"],
                environment: [
                    "HERALD_DATABASE_URL": db.url, "HERALD_HTTP_PORT": "\(port)",
                    "HERALD_MAINTENANCE_REAP_INTERVAL_SECONDS": "1", "HERALD_LOG_LEVEL": "warning",
                ]
            )
            defer { kill(worker.processIdentifier, SIGKILL) }
            var metrics = ""
            for _ in 0..<100 {
                try await Task.sleep(for: .milliseconds(100))
                guard let (code, body) = try? await httpGet("http://127.0.0.1:\(port)/metrics"), code == 200 else {
                    continue
                }
                metrics = body
                // The leader refreshes the queue gauges once per second: wait for a fresh reading too.
                if body.contains("herald_maintenance_leader 1")
                    && body.contains(#"herald_jobs_completed_total{state="done"} 3"#)
                    && body.contains(#"herald_outbox_jobs{state="pending_due"} 0"#)
                {
                    break
                }
            }
            #expect(metrics.contains(#"herald_jobs_completed_total{state="done"} 3"#))
            #expect(metrics.contains(#"herald_suppressed_total{rule="no_active_device"} 1"#))
            #expect(
                metrics.contains(
                    #"herald_delivery_attempts_total{provider="local",outcome="accepted",reason="recorded"} 3"#
                )
            )
            #expect(metrics.contains(#"herald_provider_request_duration_seconds_count{provider="local"}"#))
            #expect(metrics.contains("herald_jobs_claimed_total 4"))
            #expect(metrics.contains("herald_maintenance_leader 1"))
            #expect(metrics.contains(#"herald_outbox_jobs{state="pending_due"} 0"#))
            // The SLO and kill-switch series: enqueue-to-delivery latency per category (its 5 s
            // bucket is what the burn alert divides by), pauses in force.
            #expect(metrics.contains(#"herald_delivery_latency_seconds_count{category="chat"} 3"#))
            #expect(metrics.contains(#"herald_delivery_latency_seconds_bucket{category="chat",le="5.0"}"#))
            #expect(metrics.contains("herald_pauses 0"))
            // Every exported herald_* series is a declared metric (names come from one list).
            let declared = Set(MetricNames.all.map(\.name))
            for line in metrics.split(separator: "\n") where line.hasPrefix("herald_") {
                var name = String(line.prefix { $0 != "{" && $0 != " " })
                for suffix in ["_bucket", "_sum", "_count"] where !declared.contains(name) && name.hasSuffix(suffix) {
                    name.removeLast(suffix.count)
                }
                #expect(declared.contains(name), "undeclared metric \(name)")
            }
            #expect(try await httpGet("http://127.0.0.1:\(port)/healthz") == (200, "ok"))
            #expect(try await httpGet("http://127.0.0.1:\(port)/readyz") == (200, "ready"))
            kill(worker.processIdentifier, SIGTERM)
            await waitUntilExitOffPool(worker)
            #expect(worker.terminationStatus == 0)
        }
    }

    @Test("/readyz turns 503 when graceful shutdown begins, while in-flight work still drains")
    func readinessFlipsOnShutdown() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("u", "apns", "slow-phone")
            try await db.enqueue("u", "chat")
            // Held 10 s: on a loaded machine (every suite at once) the poll below has seen the job
            // running as late as 5 s into its send, and the send had finished by the second look.
            let slow = ScriptedProvider(delay: .seconds(10))
            let consumer = db.consumer(providers: ProviderRegistry([.apns: slow]))
            let readiness = Readiness { nil }
            let listening = AsyncStream<Int>.makeStream()
            var server = MetricsServer.Configuration()
            server.host = "127.0.0.1"
            server.port = 0
            let metricsServer = MetricsServer(
                registry: .init(),
                readiness: readiness,
                configuration: server,
                logger: TestDatabase.logger,
                onListening: { port in listening.continuation.yield(port) }
            )
            let group = ServiceGroup(
                services: [metricsServer, consumer, DrainSignal(readiness: readiness)],
                logger: TestDatabase.logger
            )
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                var ports = listening.stream.makeAsyncIterator()
                let port = try #require(await ports.next())
                #expect(try await httpGet("http://127.0.0.1:\(port)/readyz") == (200, "ready"))
                // The job is being sent (the provider holds it for 10 s). Under a loaded machine the
                // first claim can take longer than the 2 s this waited once (CI, every suite at once).
                #expect(
                    try await waitUntil(.seconds(30), poll: .milliseconds(20)) {
                        try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") == 1
                    }
                )
                await group.triggerGracefulShutdown()
                try await Task.sleep(for: .milliseconds(200))
                #expect(try await httpGet("http://127.0.0.1:\(port)/readyz") == (503, "draining"))
                // Still draining.
                #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") == 1)
                try await tasks.waitForAll()
            }
            #expect(slow.sent.count == 1)  // the in-flight send finished after readiness turned false
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test("maintenance leadership: one leader among replicas; a SIGKILLed leader is replaced")
    func leadershipHandOver() async throws {
        try await TestDatabase.withFresh { db in
            func leaders() async throws -> [String] {
                try await db.rows(
                    """
                    SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()
                      AND a.application_name LIKE 'herald-leader:%'
                    """
                ).compactMap { $0[0] }.map { name in
                    // herald-leader:<worker id>.<incarnation>-maint → the worker id
                    String(name.dropFirst("herald-leader:".count).prefix { $0 != "." })
                }
            }
            var workers: [String: Process] = [:]
            for name in ["alpha", "beta"] {
                let (process, _) = try HeraldBinary.start(
                    ["run"],
                    environment: [
                        "HERALD_DATABASE_URL": db.url, "HERALD_WORKER_ID": name,
                        "HERALD_HTTP_PORT": "0", "HERALD_MAINTENANCE_REAP_INTERVAL_SECONDS": "1",
                        "HERALD_LOG_LEVEL": "warning",
                    ]
                )
                workers[name] = process
            }
            defer { for p in workers.values where p.isRunning { kill(p.processIdentifier, SIGKILL) } }
            var current: [String] = []
            for _ in 0..<100 {
                current = try await leaders()
                if !current.isEmpty { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(current.count == 1)
            let leader = try #require(current.first)
            let follower = leader == "alpha" ? "beta" : "alpha"
            try await Task.sleep(for: .seconds(2))
            #expect(try await leaders() == current)  // the follower does not take it while the leader lives
            kill(workers[leader]!.processIdentifier, SIGKILL)
            await waitUntilExitOffPool(workers[leader]!)
            var next: [String] = []
            for _ in 0..<150 {
                next = try await leaders()
                if next == [follower] { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(next == [follower])
        }
    }
}
