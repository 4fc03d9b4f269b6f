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

/// `herald-bench providers`: drain jobs through a live network adapter into a provider (the
/// simulator in `make bench`), then deliver at a fixed rate to measure per-request send latency.
/// Prints one JSON line. Provider settings come from the usual `HERALD_*` configuration.
struct BenchProvidersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "providers",
        abstract: "Measure delivery through a live adapter (APNs, FCM or Expo) into a provider (one JSON line)."
    )

    @OptionGroup var options: GlobalOptions
    @Option(help: "apns, fcm or expo.") var provider = "apns"
    @Option(help: "Jobs for the throughput phase.") var jobs = 50_000
    @Option(help: "Distinct recipients, one device each.") var users = 10_000
    @Option(help: "Rows per claim.") var batchSize = 500
    @Option(help: "Batches in flight.") var inFlight = 4
    @Option(help: "Jobs per second in the paced phase (0 skips it).") var rate = 1_000
    @Option(help: "Seconds of the paced phase.") var pacedSeconds = 10

    func run() async throws {
        limitMallocArenas()  // as `herald run` does
        guard let kind = ProviderKind(rawValue: provider), [.apns, .fcm, .expo].contains(kind) else {
            throw ValidationError("--provider must be apns, fcm or expo")
        }
        var configuration = try await HeraldConfiguration.load(file: options.config)
        configuration.providers[kind] = "live"
        configuration.delivery.ratePerSecond[kind] = nil  // measure the adapter, not the pacing
        let logger = {
            var l = Logger(label: "herald.bench")
            l.logLevel = .warning
            return l
        }()
        let runtime = Runtime(configuration: configuration, logger: logger)
        _ = try await runtime.migrator().migrate(logger: logger)
        let live = try runtime.liveProviders()
        guard let adapter = live.registry[kind] else { throw ValidationError("no adapter for \(provider)") }
        let tap = LatencyTap(adapter)
        let registry = ProviderRegistry([kind: tap])
        let tokenSQL: String
        switch kind {
        case .apns: tokenSQL = "lpad(to_hex(g), 64, '0')"
        case .expo: tokenSQL = "'ExponentPushToken[bench-' || g || ']'"
        default: tokenSQL = "'bench-fcm-token-' || g"
        }
        try await runtime.pool.withConnection { c in
            try await c.execute(
                """
                INSERT INTO herald.categories (name, priority, max_attempts) VALUES ('bench', 'high', 3)
                ON CONFLICT (name) DO NOTHING;
                SELECT herald.register_device('pb-' || g, '\(kind.rawValue)', \(tokenSQL)) FROM generate_series(0, \(users - 1)) g;
                ANALYZE herald.devices;
                """,
                name: "bench_providers_setup"
            )
        }
        let admin = runtime.outbox(suffix: "-bench-admin")
        let userIDs = (0..<users).map { "pb-\($0)" }
        let payload =
            #"{"title":"Bench","body":"A notification body of a typical length for a push message.","route":"/bench"}"#

        var consumerConfiguration = configuration.consumer
        consumerConfiguration.batchSize = batchSize
        consumerConfiguration.maxInFlightBatches = inFlight
        consumerConfiguration.idlePoll = .milliseconds(20)
        consumerConfiguration.localFallback = false
        let settled = LatencyRecorder()
        let clock = SystemClock()
        let wakeup = Wakeup()
        let consumer = OutboxConsumer(
            outbox: runtime.outbox(suffix: "-bench"),
            providers: registry,
            wakeup: wakeup,
            configuration: consumerConfiguration,
            logger: logger,
            onSettled: { settlements, batch in
                let now = clock.now()
                settled.record(batch.jobs.map { now.timeIntervalSince($0.createdAt) }, done: settlements.count)
            }
        )

        // 1. Throughput: a backlog of `jobs`, drained as fast as the adapter and provider allow.
        var enqueued = 0
        while enqueued < jobs {
            let n = min(users, jobs - enqueued)
            enqueued += try await admin.enqueueMany(
                users: Array(userIDs.prefix(n)),
                category: "bench",
                payloadJSON: payload
            )
        }
        let drainStart = ContinuousClock.now
        let drainSeconds = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await consumer.run() }
            group.addTask {
                await PostgresListener(pool: runtime.pool, channel: "herald_outbox", wakeup: wakeup, logger: logger)
                    .run()
            }
            while settled.done < enqueued { try await Task.sleep(for: .milliseconds(5)) }
            let seconds = (ContinuousClock.now - drainStart).seconds
            let drainTap = tap.take()

            // 2. Paced: `rate` jobs/s for `pacedSeconds`, enqueued in 10 ms steps.
            var paced = (latencies: [Double](), endToEnd: [Double](), sent: 0)
            if rate > 0 {
                _ = settled.take(reset: true)
                let perTick = max(1, rate / 100)
                let ticks = pacedSeconds * 100
                let start = ContinuousClock.now
                var next = 0
                for tick in 0..<ticks {
                    let batch = (0..<perTick).map { userIDs[(next + $0) % users] }
                    next += perTick
                    paced.sent += try await admin.enqueueMany(users: batch, category: "bench", payloadJSON: payload)
                    try await Task.sleep(until: start + .milliseconds(10 * (tick + 1)))
                }
                while settled.done < paced.sent { try await Task.sleep(for: .milliseconds(5)) }
                paced.latencies = tap.take().latencies
                paced.endToEnd = settled.take()
            }
            group.cancelAll()
            return (seconds, drainTap, paced)
        }
        await live.shutdown()
        await runtime.shutdown()
        let (seconds, drainTap, paced) = drainSeconds
        let line =
            "{\"provider\":\"\(kind.rawValue)\",\"jobs\":\(enqueued),\"batch_size\":\(batchSize),\"in_flight\":\(inFlight),"
            + "\"drain_jobs_per_s\":\(Int(Double(enqueued) / seconds)),\"drain_seconds\":\(String(format: "%.2f", seconds)),"
            + "\"accepted\":\(drainTap.accepted),\"not_accepted\":\(drainTap.other),"
            + "\"drain_send_ms_p50\":\(BenchCommand.ms(drainTap.latencies, 0.5)),\"drain_send_ms_p99\":\(BenchCommand.ms(drainTap.latencies, 0.99)),"
            + "\"paced_rate_per_s\":\(rate),\"paced_jobs\":\(paced.sent),"
            + "\"paced_send_ms_p50\":\(BenchCommand.ms(paced.latencies, 0.5)),\"paced_send_ms_p99\":\(BenchCommand.ms(paced.latencies, 0.99)),"
            + "\"paced_enqueue_to_ack_ms_p50\":\(BenchCommand.ms(paced.endToEnd, 0.5)),\"paced_enqueue_to_ack_ms_p99\":\(BenchCommand.ms(paced.endToEnd, 0.99)),"
            + "\"peak_rss_mib\":\(String(format: "%.1f", Double(BenchCommand.peakRSSKiB()) / 1024))}"
        print(line)
    }
}

/// Records each message's send latency (the adapter's own measurement) and its disposition.
final class LatencyTap: PushProvider, Sendable {
    let inner: any PushProvider
    var name: String { inner.name }
    private let state = Mutex<(latencies: [Double], accepted: Int, other: Int)>(([], 0, 0))

    init(_ inner: any PushProvider) { self.inner = inner }

    func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        let outcomes = await inner.send(messages, gate: gate, logger: logger)
        state.withLock { s in
            for o in outcomes {
                if let l = o.latency { s.latencies.append(l.seconds) }
                if o.disposition == .accepted { s.accepted += 1 } else { s.other += 1 }
            }
        }
        return outcomes
    }

    func take() -> (latencies: [Double], accepted: Int, other: Int) {
        state.withLock { s in
            defer { s = ([], 0, 0) }
            return s
        }
    }
}
