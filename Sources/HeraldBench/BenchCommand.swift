import ArgumentParser
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Logging
import Providers
import Queue
import Settings
import Synchronization
import Wiring

/// `herald-bench sink` (the default): enqueue N jobs with `enqueue_many`, drain them through the sink provider,
/// and print one JSON line of figures. Meant for a dedicated database (`make bench` makes one).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sink",
        abstract: "Measure enqueue and drain throughput with the sink provider (one JSON line)."
    )

    @OptionGroup var options: GlobalOptions
    @Option(help: "Jobs to enqueue and drain.") var jobs = 100_000
    @Option(help: "Distinct recipients (one sink device each).") var users = 10_000
    @Option(help: "Users per enqueue_many call.") var chunk = 10_000
    @Option(help: "Rows per claim.") var batchSize = 500
    @Option(help: "Claim loops (each with its own connection pool).") var consumers = 2
    @Option(help: "Batches in flight per consumer.") var inFlight = 4
    @Option(help: "Acknowledgements running at once per consumer (herald run's queue.max_concurrent_acks).")
    var concurrentAcks = OutboxConsumer.Configuration().maxConcurrentAcks
    @Option(help: "Single enqueues to an idle worker, for enqueue→ack pickup latency (NOTIFY path).")
    var latencySamples = 200
    @Flag(
        help:
            "Realistic policy: preferences for every user, quiet hours for a third (not active now), coalescing and rate limits evaluated on every job."
    )
    var policy = false
    @Option(
        help:
            "While the backlog drains, enqueue one critical job every this many ms (0: none) and report enqueue→provider-request latency, also split at the enqueue's commit."
    )
    var criticalEveryMs = 0
    @Option(help: "Simulated provider round trip per sink request, in ms (0: answers at once).")
    var sinkLatencyMs = 0
    @Flag(help: "Without the consumers' critical lane (to compare).")
    var noCriticalLane = false
    @Option(
        help:
            "While the backlog (app `default`) drains, enqueue one normal job of another app every this many ms (0: none) and report its enqueue→provider-request latency (apps take turns in claims)."
    )
    var otherAppEveryMs = 0
    @Option(
        help:
            "While the backlog (no scope) drains, enqueue one normal job of the same app and category in scope `other-org` every this many ms (0: none) and report its enqueue→provider-request latency (scopes take turns in claims)."
    )
    var otherScopeEveryMs = 0
    @Flag(
        help:
            "Checkpoint after the enqueue, so the drain starts a checkpoint cycle with the queue's pages already written (needs a superuser or pg_checkpoint; `make bench-churn` uses it on both sides)."
    )
    var checkpointBeforeDrain = false
    @Option(
        help:
            "The maintenance leader vacuums the outbox once it holds more dead tuples than this (0: never; the worker's default is 20,000), to measure what its vacuums cost."
    )
    var vacuumDeadTuples = MaintenanceService.Configuration().vacuumDeadTuples

    func run() async throws {
        limitMallocArenas()  // as `herald run` does
        let configuration = try await HeraldConfiguration.load(file: options.config)
        let logger = {
            var l = Logger(label: "herald.bench")
            l.logLevel = .warning
            return l
        }()
        let setup = Runtime(configuration: configuration, logger: logger)
        defer { Task { await setup.shutdown() } }
        _ = try await setup.migrator().migrate(logger: logger)
        let admin = setup.outbox(suffix: "-bench-admin")

        // Category and one sink-served device per user (every provider maps to the sink).
        try await setup.pool.withConnection { c in
            try await c.execute(
                """
                INSERT INTO herald.categories (name, priority, max_attempts) VALUES ('bench', 'normal', 3)
                ON CONFLICT (name) DO NOTHING;
                INSERT INTO herald.categories (name, priority, max_attempts) VALUES ('bench_critical', 'critical', 3)
                ON CONFLICT (name) DO NOTHING;
                INSERT INTO herald.categories (name, app_id, priority, max_attempts) VALUES ('bench_other', 'bench-other', 'normal', 3)
                ON CONFLICT (name) DO NOTHING;
                SELECT herald.register_device('crit-' || g, 'apns', 'crit-token-' || g) FROM generate_series(0, 99) g;
                SELECT herald.register_device('other-' || g, 'apns', 'other-token-' || g) FROM generate_series(0, 99) g;
                SELECT herald.register_device('scoped-' || g, 'apns', 'scoped-token-' || g) FROM generate_series(0, 99) g;
                SELECT herald.register_device('bench-' || g, 'apns', 'bench-token-' || g)
                FROM generate_series(0, \(users - 1)) g;
                ANALYZE herald.devices;
                """,
                name: "bench_setup"
            )
        }
        if policy {
            // Quiet hours 6–7 hours from now in UTC: configured (and evaluated) but not active.
            let hour = (Int(SystemClock().now().timeIntervalSince1970) / 3600 + 6) % 24
            try await setup.pool.withConnection { c in
                try await c.execute(
                    """
                    UPDATE herald.categories SET
                        coalesce = '{"mode": "leading", "count": 1000, "windowSeconds": 300, "summarizeAbove": 1000}',
                        rate_limit = '{"perUser": {"max": 1000, "windowSeconds": 600}, "over": "summarize"}'
                    WHERE name = 'bench';
                    INSERT INTO herald.preferences (user_id, preferences)
                    SELECT 'bench-' || g, jsonb_build_object('enabled', true, 'timeZone', 'UTC',
                        'eventToggles', jsonb_build_object('bench', true),
                        'quietHours', jsonb_build_object('enabled', g % 3 = 0, 'startHour', \(hour), 'endHour', \((hour + 1) % 24)))
                    FROM generate_series(0, \(users - 1)) g
                    ON CONFLICT (user_id) DO UPDATE SET preferences = EXCLUDED.preferences;
                    ANALYZE herald.preferences;
                    """,
                    name: "bench_policy"
                )
            }
        }
        let userIDs = (0..<users).map { "bench-\($0)" }
        let payload =
            #"{"title":"Bench","body":"A notification body of a typical length for a push message.","route":"/bench","metadata":{"k":"v"}}"#

        // 1. Enqueue.
        let enqueueStart = ContinuousClock.now
        var enqueued = 0
        while enqueued < jobs {
            var round: [String] = []
            round.reserveCapacity(chunk)
            while round.count < chunk && enqueued + round.count < jobs {
                round.append(userIDs[(enqueued + round.count) % users])
            }
            // enqueue_many de-duplicates user ids per call, so a round holds each user once.
            let slice = Array(Set(round))
            enqueued += try await admin.enqueueMany(users: slice, category: "bench", payloadJSON: payload)
            if slice.count < round.count { enqueued += 0 }
        }
        let enqueueSeconds = (ContinuousClock.now - enqueueStart).seconds
        try await setup.pool.withConnection { try await $0.execute("ANALYZE herald.outbox", name: "bench_analyze") }
        if checkpointBeforeDrain {
            try await setup.pool.withConnection { try await $0.execute("CHECKPOINT", name: "bench_checkpoint") }
        }

        // 2. Drain with sink consumers.
        var sinkRegistry = ProviderRegistry()
        let stamps = SendStamps()
        for kind in ProviderKind.allCases {
            sinkRegistry[kind] =
                sinkLatencyMs > 0 || criticalEveryMs > 0 || otherAppEveryMs > 0 || otherScopeEveryMs > 0
                ? StampingSink(latency: .milliseconds(sinkLatencyMs), stamps: stamps) : SinkProvider()
        }
        let critical: Wakeup? = noCriticalLane ? nil : Wakeup()
        var consumerConfiguration = OutboxConsumer.Configuration()
        consumerConfiguration.batchSize = batchSize
        consumerConfiguration.maxInFlightBatches = inFlight
        consumerConfiguration.maxConcurrentAcks = concurrentAcks
        consumerConfiguration.idlePoll = .milliseconds(20)
        let recorder = LatencyRecorder()
        let criticalDone = LatencyRecorder()
        let pools = (0..<consumers).map { _ in
            var c = configuration.pool
            c.size = max(2, inFlight + 1)
            return PostgresPool(configuration: c)
        }
        let wakeup = Wakeup()
        let clock = SystemClock()
        let consumersList = pools.enumerated().map { i, pool in
            OutboxConsumer(
                outbox: Outbox(pool: pool, workerID: "bench-\(i)"),
                providers: sinkRegistry,
                wakeup: wakeup,
                critical: critical,
                configuration: consumerConfiguration,
                logger: logger,
                onSettled: { settlements, batch in
                    let now = clock.now()
                    // The backlog's jobs' latencies, read in place (the bench's own CPU counts in
                    // the drain's: copying every job to filter them was a percent of it).
                    var latencies: [TimeInterval] = []
                    latencies.reserveCapacity(batch.jobs.count)
                    for j in batch.jobs.indices
                    where batch.jobs[j].category == "bench" && !batch.jobs[j].userID.hasPrefix("scoped-") {
                        latencies.append(now.timeIntervalSince(batch.jobs[j].createdAt))
                    }
                    recorder.record(latencies, done: latencies.count)
                    criticalDone.record([], done: batch.jobs.count - latencies.count)
                }
            )
        }
        let statementsBefore = PostgresConnection.statementsExecuted.load(ordering: .relaxed)
        let drainStart = ContinuousClock.now
        let cpuAtDrainStart = Self.cpuSeconds()
        let criticalSent = SendStamps()
        // When each critical job's `enqueue` call returned (committed): splits its latency into
        // the backend's own statement and what Herald takes from the commit on.
        let criticalCommitted = SendStamps()
        let otherSent = SendStamps()
        let scopedSent = SendStamps()
        let total = enqueued
        let listenerPool = pools[0]
        let (drained, drainCPU) = try await withThrowingTaskGroup(of: Void.self) { group in
            for consumer in consumersList { group.addTask { try await consumer.run() } }
            if criticalEveryMs > 0 || otherAppEveryMs > 0 || otherScopeEveryMs > 0 {
                // As `herald run` does: NOTIFY wakes the consumers, `critical` their critical lane.
                group.addTask {
                    await PostgresListener(
                        pool: listenerPool,
                        channel: "herald_outbox",
                        wakeup: wakeup,
                        critical: critical,
                        logger: logger
                    ).run()
                }
            }
            // While the backlog drains: one job every `everyMs` to users `<prefix>-0…99`, stamped.
            for (everyMs, prefix, category, options, sent, committed) in [
                (otherAppEveryMs, "other", "bench_other", "{}", otherSent, nil),
                (criticalEveryMs, "crit", "bench_critical", "{}", criticalSent, criticalCommitted),
                (otherScopeEveryMs, "scoped", "bench", #"{"scope": "other-org"}"#, scopedSent, nil),
            ] where everyMs > 0 {
                group.addTask {
                    var i = 0
                    while !Task.isCancelled && recorder.done < total {
                        try await Task.sleep(for: .milliseconds(everyMs))
                        let at = clock.now()
                        if let id = try await admin.enqueue(
                            user: "\(prefix)-\(i % 100)",
                            category: category,
                            payloadJSON: payload,
                            optionsJSON: options
                        ) {
                            sent.record([id], at: at)
                            committed?.record([id], at: clock.now())
                        }
                        i += 1
                    }
                }
            }
            // As in a real deployment, one replica runs maintenance (lease rescue, vacuum, gauges).
            var maintenance = MaintenanceService.Configuration()
            maintenance.reapInterval = .seconds(1)
            maintenance.vacuumDeadTuples = vacuumDeadTuples
            let maintainer = MaintenanceService(
                outbox: Outbox(pool: pools[0], workerID: "bench-maint"),
                configuration: maintenance,
                logger: logger
            )
            group.addTask { try await maintainer.run() }
            while recorder.done < enqueued {
                try await Task.sleep(for: .milliseconds(5))
            }
            let seconds = (ContinuousClock.now - drainStart).seconds
            let cpu = Self.cpuSeconds() - cpuAtDrainStart
            // The critical jobs still on their way (the enqueuer stops with the backlog).
            let deadline = ContinuousClock.now + .seconds(10)
            while criticalDone.done < criticalSent.take().count + otherSent.take().count + scopedSent.take().count
                && ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(5))
            }
            group.cancelAll()
            return (seconds, cpu)
        }
        let statements = PostgresConnection.statementsExecuted.load(ordering: .relaxed) - statementsBefore
        let drainLatencies = recorder.take()
        let sentAt = stamps.take()
        let criticalStarts = criticalSent.take()
        let criticalLatencies = criticalStarts.compactMap { id, at in sentAt[id].map { $0.timeIntervalSince(at) } }
        let committedAt = criticalCommitted.take()
        let criticalEnqueue = criticalStarts.compactMap { id, at in committedAt[id].map { $0.timeIntervalSince(at) } }
        let criticalFromCommit = committedAt.compactMap { id, at in sentAt[id].map { $0.timeIntervalSince(at) } }
        let otherLatencies = otherSent.take().compactMap { id, at in sentAt[id].map { $0.timeIntervalSince(at) } }
        let scopedLatencies = scopedSent.take().compactMap { id, at in sentAt[id].map { $0.timeIntervalSince(at) } }

        // 3. Pickup latency: single enqueues into an idle queue, woken by NOTIFY.
        let pickup = LatencyRecorder()
        let pickupConsumer = OutboxConsumer(
            outbox: Outbox(pool: listenerPool, workerID: "bench-pickup"),
            providers: sinkRegistry,
            wakeup: wakeup,
            configuration: {
                var c = consumerConfiguration
                c.idlePoll = .seconds(2)
                return c
            }(),
            logger: logger,
            onSettled: { settlements, batch in
                let now = clock.now()
                pickup.record(batch.jobs.map { now.timeIntervalSince($0.createdAt) }, done: settlements.count)
            }
        )
        if latencySamples > 0 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    await PostgresListener(pool: listenerPool, channel: "herald_outbox", wakeup: wakeup, logger: logger)
                        .run()
                }
                group.addTask { try await pickupConsumer.run() }
                try await Task.sleep(for: .milliseconds(300))
                for i in 0..<latencySamples {
                    _ = try await admin.enqueue(user: userIDs[i % users], category: "bench", payloadJSON: payload)
                    while pickup.done < i + 1 { try await Task.sleep(for: .milliseconds(1)) }
                    try await Task.sleep(for: .milliseconds(5))
                }
                group.cancelAll()
            }
        }
        let pickupLatencies = pickup.take()
        for pool in pools { await pool.shutdown() }

        let rss = Self.peakRSSKiB()
        let line =
            "{\"jobs\":\(enqueued),\"users\":\(users),\"policy\":\(policy),\"batch_size\":\(batchSize),\"consumers\":\(consumers),"
            + "\"in_flight\":\(inFlight),"
            + "\"enqueue_jobs_per_s\":\(Int(Double(enqueued) / enqueueSeconds)),"
            + "\"drain_jobs_per_s\":\(Int(Double(enqueued) / drained)),"
            + "\"drain_seconds\":\(String(format: "%.2f", drained)),"
            + "\"statements_per_job\":\(String(format: "%.4f", Double(statements) / Double(max(enqueued, 1)))),"
            + "\"worker_cpu_us_per_job\":\(String(format: "%.1f", drainCPU * 1e6 / Double(max(enqueued, 1)))),"
            + "\"backlog_latency_ms_p50\":\(Self.ms(drainLatencies, 0.5)),\"backlog_latency_ms_p99\":\(Self.ms(drainLatencies, 0.99)),"
            + "\"pickup_latency_ms_p50\":\(Self.ms(pickupLatencies, 0.5)),\"pickup_latency_ms_p99\":\(Self.ms(pickupLatencies, 0.99)),"
            + "\"pickup_samples\":\(pickupLatencies.count),"
            + (criticalEveryMs > 0
                ? "\"sink_latency_ms\":\(sinkLatencyMs),\"critical_lane\":\(!noCriticalLane),"
                    + "\"critical_latency_ms_p50\":\(Self.ms(criticalLatencies, 0.5)),"
                    + "\"critical_latency_ms_p99\":\(Self.ms(criticalLatencies, 0.99)),"
                    + "\"critical_enqueue_ms_p50\":\(Self.ms(criticalEnqueue, 0.5)),"
                    + "\"critical_enqueue_ms_p99\":\(Self.ms(criticalEnqueue, 0.99)),"
                    + "\"critical_from_commit_ms_p50\":\(Self.ms(criticalFromCommit, 0.5)),"
                    + "\"critical_from_commit_ms_p99\":\(Self.ms(criticalFromCommit, 0.99)),"
                    + "\"critical_samples\":\(criticalLatencies.count)," : "")
            + (otherAppEveryMs > 0
                ? "\"other_app_latency_ms_p50\":\(Self.ms(otherLatencies, 0.5)),"
                    + "\"other_app_latency_ms_p99\":\(Self.ms(otherLatencies, 0.99)),"
                    + "\"other_app_samples\":\(otherLatencies.count)," : "")
            + (otherScopeEveryMs > 0
                ? "\"other_scope_latency_ms_p50\":\(Self.ms(scopedLatencies, 0.5)),"
                    + "\"other_scope_latency_ms_p99\":\(Self.ms(scopedLatencies, 0.99)),"
                    + "\"other_scope_samples\":\(scopedLatencies.count)," : "")
            + "\"peak_rss_mib\":\(String(format: "%.1f", Double(rss) / 1024))}"
        print(line)
    }

    static func ms(_ values: [Double], _ q: Double) -> String {
        guard !values.isEmpty else { return "null" }
        let sorted = values.sorted()
        let i = min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))
        return String(format: "%.1f", sorted[i] * 1000)
    }

    /// This process's CPU time so far (user and system, all threads), in seconds: the worker's
    /// share of a drain (PostgreSQL's is in its own processes).
    static func cpuSeconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        let who = RUSAGE_SELF.rawValue
        #else
        let who = RUSAGE_SELF
        #endif
        guard getrusage(who, &usage) == 0 else { return 0 }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// `VmHWM` from /proc/self/status: the process's peak resident set, KiB.
    static func peakRSSKiB() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}

/// The sink, plus a simulated provider round trip, noting when each watched user's message left
/// (tokens `crit-…`, `other-…` and `scoped-…`): a critical, other-app or other-scope job's enqueue →
/// provider request latency.
struct StampingSink: PushProvider {
    let name = "sink"
    let latency: Duration
    let stamps: SendStamps

    func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        stamps.record(
            messages.filter { m in ["crit-", "other-", "scoped-"].contains { m.device.token.hasPrefix($0) } }.map(
                \.jobID
            ),
            at: SystemClock().now()
        )
        if latency > .zero { try? await Task.sleep(for: latency) }
        return messages.map { _ in .accepted }
    }
}

/// When each watched job's first request left, by job id.
final class SendStamps: Sendable {
    private let state = Mutex<[Int64: Date]>([:])
    func record(_ jobs: [Int64], at time: Date) {
        guard !jobs.isEmpty else { return }
        state.withLock { for job in jobs where $0[job] == nil { $0[job] = time } }
    }
    func take() -> [Int64: Date] { state.withLock { $0 } }
}

/// Collects per-job latencies from consumer callbacks (any thread).
final class LatencyRecorder: Sendable {
    private let state = Mutex<(values: [Double], done: Int)>(([], 0))
    func record(_ values: [Double], done: Int) {
        state.withLock {
            $0.values.append(contentsOf: values)
            $0.done += done
        }
    }
    var done: Int { state.withLock { $0.done } }
    func take() -> [Double] { state.withLock { $0.values } }
    /// The values so far; with `reset`, starts counting again from zero.
    func take(reset: Bool) -> [Double] {
        state.withLock { s in
            defer { if reset { s = ([], 0) } }
            return s.values
        }
    }
}
