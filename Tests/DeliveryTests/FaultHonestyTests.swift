import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import ProviderSimulator
import Providers
import Queue
import Testing

/// Devices on one provider kind, registered through the public SQL API, with the token each
/// provider's records are keyed by.
struct ProviderFleet {
    let kind: String
    let users: [String]

    /// Registers `n` users (`<kind>-<i>`) with one device each on `kind`.
    static func register(
        _ kind: String,
        count n: Int,
        db: TestDatabase,
        live: LiveSimulator
    ) async throws -> ProviderFleet {
        let users = (0..<n).map { "\(kind)-\($0)" }
        switch kind {
        case "apns":
            try await db.exec(
                """
                SELECT herald.register_device('apns-' || g, 'apns', lpad(to_hex(g), 64, '0'))
                FROM generate_series(0, \(n - 1)) g
                """
            )
        case "fcm":
            try await db.exec(
                "SELECT herald.register_device('fcm-' || g, 'fcm', 'fcm-token-' || g) FROM generate_series(0, \(n - 1)) g"
            )
        case "expo":
            try await db.exec(
                """
                SELECT herald.register_device('expo-' || g, 'expo', 'ExponentPushToken[fault' || g || ']')
                FROM generate_series(0, \(n - 1)) g
                """
            )
        case "webpush":
            let rows = users.map { user in
                let s = WebPushService.createSubscription(context: live.simulator.context)
                return "('\(user)', '\(s.endpoint)', '\(s.p256dh)', '\(s.auth)')"
            }
            try await db.exec(
                """
                SELECT herald.register_device(u, 'webpush', e, jsonb_build_object('p256dh', p, 'auth', a))
                FROM (VALUES \(rows.joined(separator: ", "))) v(u, e, p, a)
                """
            )
        default:
            throw TestSetupError("no fleet for \(kind)")
        }
        return ProviderFleet(kind: kind, users: users)
    }
}

/// How many half-open probes a circuit with the default periods (5 s, doubling, at most 60 s)
/// sends while an outage of `seconds` lasts, with `slack` for when the circuit opened.
func probesDuring(outage seconds: Double, slack: Double = 2) -> Int {
    var at = 0.0
    var period = 5.0
    var probes = 0
    while at + period < seconds + slack {
        at += period
        probes += 1
        period = min(period * 2, 60)
    }
    return probes
}

/// Issue: an outage costs time, not attempts; a refused credential costs none either; a critical
/// job gets its in-app alert by its category's deadline. Every test runs `herald run` processes
/// at default settings (batches of 200, 4 in flight) against the simulator.
@Suite("Faults at default settings: outages and refused credentials cost time, not attempts", .serialized)
struct FaultHonestyTests {
    static func workerEnvironment(_ db: TestDatabase, _ live: LiveSimulator) -> [String: String] {
        var env = live.workerEnvironment
        env["HERALD_DATABASE_URL"] = db.url
        env["HERALD_HTTP_PORT"] = "0"
        env["HERALD_LOG_LEVEL"] = "warning"
        return env
    }

    /// `n` users with one `kind` device each, and the category `update` with two attempts and a
    /// short backoff (1 s doubling to 5 s): one failure of a job more than a fault may cost
    /// dead-letters it.
    static func twoAttemptFleet(
        _ kind: String,
        count n: Int,
        _ db: TestDatabase,
        _ live: LiveSimulator
    )
        async throws -> ProviderFleet
    {
        try await db.addCategory("update", maxAttempts: 2, base: "1 second", cap: "5 seconds")
        return try await ProviderFleet.register(kind, count: n, db: db, live: live)
    }

    @Test(
        "a provider outage with max_attempts = 2: no dead letters, requests bounded per worker, all delivered after",
        arguments: ["apns", "fcm", "expo", "webpush"]
    )
    func outageAtDefaults(kind: String) async throws {
        try await Self.outage(kind: kind, jobs: 1_000, seconds: 8)
    }

    /// A burst smaller than a batch: one worker claims it all and its circuit opens on the first
    /// 20 failures. Those jobs came back due while the other worker, running with its circuit
    /// still closed (it had sent nothing), took them and failed each a second time: 20 dead
    /// letters out of 25 before a run's failures (all but its first, and every one in a batch out
    /// when the circuit opened) were handed back like the requests after the opening.
    @Test(
        "a small burst during an outage, two workers running: the failures that open a circuit spend no attempt",
        arguments: ["apns", "fcm", "expo", "webpush"]
    )
    func smallBurstOutage(kind: String) async throws {
        try await Self.outage(kind: kind, jobs: 25, seconds: 8, label: "fault small", atMostOneAttemptPerWorker: true)
    }

    /// `jobs` notifications to users of `kind`, two `herald run` workers at default settings, and
    /// an outage of `seconds` on that provider from before the first send.
    /// `atMostOneAttemptPerWorker`: of each worker's runs of failures only the first failure may
    /// stand (and not even that one when its batch was out as the circuit opened), so at most one
    /// job per worker is delivered on a later attempt than its first.
    static func outage(
        kind: String,
        jobs n: Int,
        seconds outage: Double,
        label: String = "fault",
        atMostOneAttemptPerWorker: Bool = false
    ) async throws {
        let workers = 2
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                let fleet = try await Self.twoAttemptFleet(kind, count: n, db, live)
                let env = Self.workerEnvironment(db, live)
                let processes = (0..<workers).map {
                    WorkerProcess(name: "outage-\(kind)-\($0)", environment: env, directory: ChaosTests.logDirectory())
                }
                for p in processes { try p.start() }
                // Both workers listening before the burst: each circuit then opens on its own
                // first wave. A worker that came up a second late (a loaded machine) met the other
                // one's first failures, due again by then, with a circuit still closed: a job that
                // failed once on each before their circuits opened spent both of its attempts (3
                // dead letters in one CI run). A circuit is shared only once it opens (a worker
                // starting after that adopts it: `workerJoiningDuringOutage`); this test is about
                // workers that were running when the outage began.
                let listening = try await waitUntil(.seconds(60)) {
                    try await db.int(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN herald_outbox'"
                    ) >= workers
                }
                #expect(listening, "both workers listening")
                _ = try live.simulator.faults.add(FaultRule(provider: kind, outageSeconds: outage))
                let outageStart = ContinuousClock.now
                _ = try await db.outbox().enqueueMany(
                    users: fleet.users,
                    category: "update",
                    payloadJSON: #"{"title":"Update","body":"Something changed"}"#
                )
                try await Task.sleep(until: outageStart + .seconds(outage))
                let requestsDuringOutage = live.records.rejectedCount(provider: kind)
                // Recovery takes up to one open period after the outage (5 s doubling to 60 s) plus
                // the drain; a starved machine (the simulator runs inside this test process) needs
                // more, so the bound is generous.
                let drained = try await waitUntil(.seconds(180)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                for p in processes { await p.stop() }
                let dead = try await db.int("SELECT count(*) FROM herald.dead_letters")
                let spent = try await db.int(
                    "SELECT count(*) FROM herald.delivery_log WHERE event = 'attempt' AND outcome = 'retry' AND reason NOT IN ('circuit_open', 'probe_failed', 'credential_paused', 'paced')"
                )
                let bound = workers * (CircuitBreaker.Configuration().failureThreshold + probesDuring(outage: outage))
                let outcomes = try await db.rows(
                    "SELECT event, coalesce(outcome, ''), coalesce(reason, ''), count(*) FROM herald.delivery_log GROUP BY 1, 2, 3 ORDER BY 4 DESC"
                )
                print(
                    "\(label) outage \(kind) log: \(outcomes.map { $0.map { $0 ?? "" }.joined(separator: "/") }.joined(separator: ", "))"
                )
                print(
                    "\(label) outage \(kind): jobs=\(n) outage_s=\(outage) requests_during_outage=\(requestsDuringOutage) bound=\(bound) failed_attempts=\(spent) dead=\(dead) delivered=\(live.records.acceptedCount(provider: kind))"
                )
                #expect(dead == 0)
                #expect(drained)
                #expect(
                    requestsDuringOutage <= bound,
                    "\(requestsDuringOutage) requests reached \(kind) during the outage"
                )
                #expect(requestsDuringOutage > 0)
                // A worker draws its probes from different jobs: a failed probe's job comes back
                // after the others. Each worker has its own circuit, so another worker's probe may
                // be that job when its breaker reopens first (seen in a 60 s outage). (When
                // requests time out, one worker may be left with a single due job, which then
                // probes again: the rotation needs another job to rotate to.)
                let probes = try await db.rows(
                    "SELECT count(*), count(DISTINCT (job_id, worker)) FROM herald.delivery_log WHERE reason = 'probe_failed'"
                )
                let timeouts = try await db.int("SELECT count(*) FROM herald.delivery_log WHERE reason = 'timeout'")
                if timeouts == 0 {
                    #expect(probes.first?[0] == probes.first?[1], "a worker probed with one job twice: \(probes)")
                }
                let deliveredUnits = live.records.acceptedCount(provider: kind)
                #expect(deliveredUnits >= (kind == "expo" ? 1 : n))
                #expect(
                    try await db.int(
                        "SELECT count(*) FROM herald.delivery_log WHERE event = 'attempt' AND outcome = 'accepted'"
                    ) == n
                )
                if atMostOneAttemptPerWorker {
                    // Every record of the jobs delivered on a later attempt: their count, and the
                    // story if it is too many.
                    let records = try await db.rows(
                        "SELECT job_id, attempt, outcome, reason, worker, to_char(created_at, 'HH24:MI:SS.MS') FROM herald.delivery_log WHERE job_id IN (SELECT job_id FROM herald.delivery_log WHERE event = 'attempt' AND attempt > 1) ORDER BY id"
                    )
                    let spentJobs = Set(records.map { $0[0] }).count
                    #expect(
                        spentJobs <= workers,
                        "attempts spent: \(records.map { $0.map { $0 ?? "" }.joined(separator: " ") })"
                    )
                }
            }
        }
    }

    @Test("a worker that starts during an outage adopts the open circuit: no attempt spent, nothing dead-lettered")
    func workerJoiningDuringOutage() async throws {
        let kind = "apns"
        let n = 600
        let outage = 12.0
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                // Two attempts: a job the first worker failed once would be dead-lettered by one
                // more failure on the second (its first due jobs are those, handed back).
                let fleet = try await Self.twoAttemptFleet(kind, count: n, db, live)
                let env = Self.workerEnvironment(db, live)
                let first = WorkerProcess(
                    name: "join-\(kind)-0",
                    environment: env,
                    directory: ChaosTests.logDirectory()
                )
                let second = WorkerProcess(
                    name: "join-\(kind)-1",
                    environment: env,
                    directory: ChaosTests.logDirectory()
                )
                let listening = { (count: Int) in
                    try await waitUntil(.seconds(60)) {
                        try await db.int(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN herald_outbox'"
                        ) >= count
                    }
                }
                try first.start()
                #expect(try await listening(1), "the first worker listening")
                _ = try live.simulator.faults.add(FaultRule(provider: kind, outageSeconds: outage))
                let outageStart = ContinuousClock.now
                _ = try await db.outbox().enqueueMany(
                    users: fleet.users,
                    category: "update",
                    payloadJSON: #"{"title":"Update","body":"Something changed"}"#
                )
                // The first worker's circuit opens on its own failures and is shared.
                let shared = try await waitUntil(.seconds(30)) {
                    try await db.int(
                        "SELECT count(*) FROM herald.provider_circuits WHERE provider = 'apns' AND open_until > now()"
                    ) == 1
                }
                #expect(shared, "the open circuit recorded")
                let failedBefore = live.records.rejectedCount(provider: kind)
                try second.start()
                #expect(try await listening(2), "the second worker listening")
                try await Task.sleep(until: outageStart + .seconds(outage))
                let requestsDuringOutage = live.records.rejectedCount(provider: kind)
                let drained = try await waitUntil(.seconds(180)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                await first.stop()
                await second.stop()
                let dead = try await db.int("SELECT count(*) FROM herald.dead_letters")
                let spent = try await db.int(
                    "SELECT count(*) FROM herald.delivery_log WHERE event = 'attempt' AND outcome = 'retry' AND reason NOT IN ('circuit_open', 'probe_failed', 'credential_paused', 'paced')"
                )
                let workersThatSent = try await db.int(
                    "SELECT count(DISTINCT worker) FROM herald.delivery_log WHERE event = 'attempt' AND outcome = 'accepted'"
                )
                // The first worker's threshold of failures, then one probe per open period from
                // each worker; the second worker adds no run of failures of its own.
                let bound = CircuitBreaker.Configuration().failureThreshold + 2 * probesDuring(outage: outage)
                print(
                    "fault join \(kind): jobs=\(n) outage_s=\(outage) requests_before_second=\(failedBefore) requests_during_outage=\(requestsDuringOutage) bound=\(bound) failed_attempts=\(spent) dead=\(dead) delivered=\(live.records.acceptedCount(provider: kind)) workers_that_sent=\(workersThatSent)"
                )
                #expect(dead == 0)
                #expect(drained)
                #expect(
                    spent <= CircuitBreaker.Configuration().failureThreshold,
                    "\(spent) attempts spent on the outage"
                )
                #expect(
                    requestsDuringOutage <= bound,
                    "\(requestsDuringOutage) requests reached \(kind) during the outage"
                )
                #expect(
                    try await db.int(
                        "SELECT count(*) FROM herald.delivery_log WHERE event = 'attempt' AND outcome = 'accepted'"
                    ) == n
                )
            }
        }
    }

    @Test(
        "a refused APNs credential spends no attempt and dead-letters nothing; the right key delivers within a minute"
    )
    func refusedCredential() async throws {
        let n = 300
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                let fleet = try await Self.twoAttemptFleet("apns", count: n, db, live)
                var wrong = Self.workerEnvironment(db, live)
                wrong["HERALD_APP_DEFAULT_APNS_KEY_ID"] = "WRONGKEY01"
                let first = WorkerProcess(
                    name: "credential-wrong",
                    environment: wrong,
                    directory: ChaosTests.logDirectory()
                )
                try first.start()
                _ = try await db.outbox().enqueueMany(
                    users: fleet.users,
                    category: "update",
                    payloadJSON: #"{"title":"Update","body":"Something changed"}"#
                )
                _ = try await waitUntil(.seconds(20)) {
                    try await db.int("SELECT count(*) FROM herald.delivery_log WHERE reason = 'credential_paused'") > 0
                }
                try await Task.sleep(for: .seconds(3))
                await first.stop()
                let refusedRequests = live.records.rejectedCount(provider: "apns")
                #expect(try await db.int("SELECT count(*) FROM herald.dead_letters") == 0)
                #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'pending'") == n)
                #expect(
                    try await db.int("SELECT coalesce(max(attempt), 0) FROM herald.outbox") == 0,
                    "an attempt was spent"
                )
                #expect(refusedRequests >= 1 && refusedRequests <= CircuitBreaker.Configuration().failureThreshold)

                let restart = ContinuousClock.now
                let fixed = WorkerProcess(
                    name: "credential-fixed",
                    environment: Self.workerEnvironment(db, live),
                    directory: ChaosTests.logDirectory()
                )
                try fixed.start()
                let drained = try await waitUntil(.seconds(60)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                let took = ContinuousClock.now - restart
                await fixed.stop()
                print(
                    "fault credential: jobs=\(n) refused_requests=\(refusedRequests) delivered_after_restart_s=\(String(format: "%.1f", took.seconds))"
                )
                #expect(drained, "not delivered within a minute of the restart")
                #expect(try await db.int("SELECT count(*) FROM herald.dead_letters") == 0)
                #expect(live.records.acceptedCount(provider: "apns") == n)
            }
        }
    }

    @Test(
        "a critical job during an outage: in-app alert by its 5 s deadline, push delivered after recovery, alert resolved"
    )
    func criticalDeadlineDuringOutage() async throws {
        try await Self.criticalDeadline(outage: 12)
    }

    /// Seed 003: a failed SEP alert reaches the admins within 5 s. Background traffic fails too,
    /// so the circuit opens as it would in a real outage.
    static func criticalDeadline(outage: Double) async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory(
                    "sep_failure",
                    priority: "critical",
                    mandatory: true,
                    quietHours: "bypass",
                    maxAttempts: 3,
                    backoffBase: "1 second",
                    backoffCap: "2 seconds",
                    deadline: "5 seconds"
                )
                try await db.addCategory("bulk", maxAttempts: 2, base: "1 second", cap: "5 seconds")
                let fleet = try await ProviderFleet.register("apns", count: 200, db: db, live: live)
                let adminToken = LiveSimulator.apnsToken(0xAD)
                try await db.registerDevice("admin", "apns", adminToken)
                _ = try live.simulator.faults.add(FaultRule(provider: "apns", outageSeconds: outage))
                let worker = WorkerProcess(
                    name: "deadline",
                    environment: Self.workerEnvironment(db, live),
                    directory: ChaosTests.logDirectory()
                )
                try worker.start()
                _ = try await db.outbox().enqueueMany(
                    users: fleet.users,
                    category: "bulk",
                    payloadJSON: #"{"title":"News","body":"Weekly update"}"#
                )
                let job = try #require(
                    try await db.outbox().enqueue(
                        user: "admin",
                        category: "sep_failure",
                        payloadJSON: #"{"title":"SEP check failed","body":"Driver 7 failed the sobriety check"}"#
                    )
                )
                let alerted = try await waitUntil(.seconds(10), poll: .milliseconds(50)) {
                    try await db.int("SELECT count(*) FROM herald.inbox WHERE job_id = \(job) AND kind = 'alert'") == 1
                }
                let alertDelay = try await db.scalar(
                    """
                    SELECT extract(epoch FROM i.created_at - o.created_at) FROM herald.inbox i, herald.outbox o
                    WHERE i.job_id = \(job) AND i.kind = 'alert' AND o.id = \(job)
                    """
                ).flatMap(Double.init)
                let drained = try await waitUntil(.seconds(outage + 90)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                await worker.stop()
                print(
                    "fault deadline: outage_s=\(outage) alert_after_s=\(alertDelay.map { String(format: "%.2f", $0) } ?? "none")"
                )
                #expect(alerted)
                #expect((alertDelay ?? 99) <= 6, "the in-app alert came \(alertDelay ?? -1) s after enqueue")
                #expect(drained)
                #expect(
                    live.records.records(provider: "apns").contains { $0.token == adminToken },
                    "push never delivered"
                )
                #expect(try await db.int("SELECT count(*) FROM herald.dead_letters") == 0)
                // One alert only, resolved once push succeeded; the history says why.
                #expect(
                    try await db.rows(
                        "SELECT (resolved_at IS NOT NULL)::text FROM herald.inbox WHERE job_id = \(job) AND kind = 'alert'"
                    )
                        == [["true"]]
                )
                let history = try await db.rows(
                    "SELECT event, reason FROM herald.delivery_log WHERE job_id = \(job) AND event IN ('alert', 'alert_resolved', 'fallback') ORDER BY id"
                )
                #expect(history.contains(["alert", "deadline_missed"]))
                #expect(history.contains(["alert_resolved", "delivered_after_deadline"]))
                #expect(history.filter { $0[0] == "alert" }.count == 1)
                #expect(try await db.int("SELECT count(*) FROM herald.local_notifications WHERE job_id = \(job)") == 1)
                let (_, explain) = try await HeraldBinary.run(
                    ["explain", "\(job)"],
                    environment: Self.workerEnvironment(db, live)
                )
                #expect(explain.contains("deadline_missed"), "\(explain)")
            }
        }
    }

    @Test("a payload that fills the limits is delivered by every provider: the body goes out as the preview that fits")
    func fullSizePayloadFitsEveryProvider() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                // Whole bodies (no 100-character preview), so the provider limit is what cuts them.
                try await db.addSeedCategory("update", previewChars: 4000)
                var tokens: [String: String] = [:]
                for kind in ["apns", "fcm", "expo", "webpush"] {
                    let fleet = try await ProviderFleet.register(kind, count: 2, db: db, live: live)
                    tokens[kind] = fleet.users[0]
                }
                // Fields other than the body at their limit (1,536 bytes), the body filling the rest
                // of the 3,584: FCM repeats title and subtitle, so this is the worst case.
                let subtitle = String(repeating: "s", count: 500)
                let title = String(repeating: "T", count: 500)
                let metadata = #"{"k":"\#(String(repeating: "m", count: 400))"}"#
                var fields = #"{"title":"\#(title)","subtitle":"\#(subtitle)","metadata":\#(metadata),"route":"/r"}"#
                let fieldBytes = try await db.int("SELECT octet_length('\(fields)'::jsonb::text)")
                let pad = String(repeating: "x", count: 1536 - fieldBytes)
                fields = #"{"title":"\#(title)","subtitle":"\#(subtitle)","metadata":\#(metadata),"route":"/r\#(pad)"}"#
                #expect(try await db.int("SELECT octet_length('\(fields)'::jsonb::text)") == 1536)
                let bodyRoom =
                    3584 - (try await db.int("SELECT octet_length(('\(fields)'::jsonb || '{\"body\": \"\"}')::text)"))
                let full = String(fields.dropLast()) + ",\"body\":\"" + String(repeating: "b", count: bodyRoom) + "\"}"
                #expect(try await db.int("SELECT octet_length('\(full)'::jsonb::text)") == 3584)
                let users = ["apns-0", "fcm-0", "expo-0", "webpush-0"]
                #expect(try await db.outbox().enqueueMany(users: users, category: "update", payloadJSON: full) == 4)
                // One byte more of fields is refused at enqueue, with its size, not later.
                let over =
                    fields.replacingOccurrences(of: "\"route\":\"/r", with: "\"route\":\"/rr")
                    .dropLast() + ",\"body\":\"b\"}"
                await #expect {
                    try await db.outbox().enqueue(user: "apns-1", category: "update", payloadJSON: String(over))
                } throws: { PostgresError.sqlState(of: $0) == "22001" && "\($0)".contains("other than \"body\"") }

                let worker = WorkerProcess(
                    name: "fullsize",
                    environment: Self.workerEnvironment(db, live),
                    directory: ChaosTests.logDirectory()
                )
                try worker.start()
                let drained = try await waitUntil(.seconds(30)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
                await worker.stop()
                #expect(drained)
                #expect(try await db.int("SELECT count(*) FROM herald.dead_letters") == 0)
                for kind in ["apns", "fcm", "expo", "webpush"] {
                    #expect(
                        live.records.acceptedCount(provider: kind) == 1,
                        "\(kind) did not take the full-size message"
                    )
                    #expect(live.records.rejectedCount(provider: kind) == 0)
                }
                let fcm = try #require(live.records.records(provider: "fcm").first)
                #expect(fcm.payload.contains("b…"), "the FCM body is not a preview")
                // The inbox keeps the whole text.
                #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE length(body) = \(bodyRoom)") == 4)
            }
        }
    }

    @Test("SIGTERM past the shutdown deadline: sends cut short go back to pending without spending an attempt")
    func shutdownPastDeadlineRefunds() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addCategory("update", maxAttempts: 2)
                let fleet = try await ProviderFleet.register("apns", count: 50, db: db, live: live)
                _ = try live.simulator.faults.add(FaultRule(provider: "apns", latencyMs: 8_000))
                var env = Self.workerEnvironment(db, live)
                env["HERALD_SHUTDOWN_DEADLINE_SECONDS"] = "1"
                let worker = WorkerProcess(
                    name: "shutdown-deadline",
                    environment: env,
                    directory: ChaosTests.logDirectory()
                )
                try worker.start()
                _ = try await db.outbox().enqueueMany(
                    users: fleet.users,
                    category: "update",
                    payloadJSON: #"{"title":"Update","body":"Slow provider"}"#
                )
                #expect(
                    try await waitUntil(.seconds(10)) {
                        try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") == 50
                    }
                )
                try await Task.sleep(for: .seconds(1))  // requests in flight to the slow provider
                worker.signal(SIGTERM)
                #expect(await worker.wait(timeout: .seconds(15)) != nil, "the worker did not stop")
                #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'pending'") == 50)
                #expect(
                    try await db.int("SELECT coalesce(max(attempt), 0) FROM herald.outbox") == 0,
                    "an attempt was spent"
                )
                #expect(try await db.int("SELECT count(*) FROM herald.dead_letters") == 0)
                #expect(try await db.int("SELECT count(*) FROM herald.delivery_log WHERE reason = 'shutdown'") > 0)
            }
        }
    }
}
