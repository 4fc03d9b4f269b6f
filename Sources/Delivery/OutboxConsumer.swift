import CoreMetrics
import Dispatcher
import Foundation
import HeraldCore
import HeraldMetrics
import Logging
import Providers
import Queue
import ServiceLifecycle
import Synchronization

/// Claims due outbox rows and delivers them until graceful shutdown.
///
/// The loop keeps up to `maxInFlightBatches` batch slots busy: while one batch is being sent,
/// the next is already claimed (and a batch whose later waves wait on a slow provider gives
/// its slot back early, ``BatchSlot``). It wakes on `NOTIFY` (through ``Wakeup``) and polls as a
/// fallback. Shutdown stops *claiming*; batches in flight finish and are acknowledged, and
/// anything still leased when the service is cancelled goes back to `pending`. Rows held by a
/// crashed replica come back when their lease expires (``MaintenanceService``).
///
/// ```swift
/// let consumer = OutboxConsumer(outbox: outbox, providers: providers, wakeup: wakeup,
///                               configuration: .init(), logger: logger)
/// let group = ServiceGroup(services: [consumer], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
package struct OutboxConsumer: Service {
    package struct Configuration: Sendable {
        /// Rows claimed per round trip. Default 200. Range 1...5000.
        package var batchSize = 200
        /// Batch slots of this consumer: batches claimed, sent and acknowledged at once. A batch
        /// whose later waves wait on a slow provider gives its slot back (``BatchSlot``), up to
        /// this many at once: at most twice this many batches in flight. Default 4. Range 1...64.
        package var maxInFlightBatches = 4
        /// Acknowledgements of the batch slots running at once on the database. Default 1.
        /// Range 1...64. Batches in flight keep a slow provider busy; on the database each
        /// acknowledgement is a statement beside the claim and the critical lane, so more at once
        /// only queue up for the same cores and slow the critical lane's claims
        /// (docs/benchmarks.md, "Acknowledgements two at a time" and "one at a time"). The
        /// critical lane's acknowledgements do not wait for these slots.
        package var maxConcurrentAcks = 1
        /// How long a claimed row stays invisible to other replicas; renewed every third of it
        /// while the batch is in flight. Must exceed the slowest provider timeout. Default 60 s.
        package var lease: Duration = .seconds(60)
        /// Longest pause between polls while the outbox is empty; `NOTIFY` cuts it short. Default 500 ms.
        package var idlePoll: Duration = .milliseconds(500)
        /// Record a job no push device took in `herald.local_notifications` through the `local`
        /// adapter (when one is configured). Default true.
        package var localFallback = true
        package init() {}

        /// Rejects combinations that cannot work. Called once, before any service starts.
        package func validate() throws(ConfigurationError) {
            guard (1...5000).contains(batchSize) else {
                throw ConfigurationError(key: "queue.batch_size", reason: "must be 1...5000")
            }
            guard (1...64).contains(maxInFlightBatches) else {
                throw ConfigurationError(key: "queue.max_in_flight_batches", reason: "must be 1...64")
            }
            guard (1...64).contains(maxConcurrentAcks) else {
                throw ConfigurationError(key: "queue.max_concurrent_acks", reason: "must be 1...64")
            }
            guard lease >= .seconds(5) else {
                throw ConfigurationError(key: "queue.lease_seconds", reason: "must be at least 5 seconds")
            }
            guard idlePoll >= .milliseconds(10), idlePoll <= .seconds(60) else {
                throw ConfigurationError(key: "queue.idle_poll_ms", reason: "must be 10...60000")
            }
        }
    }

    package let outbox: Outbox
    package let dispatcher: Dispatcher
    package let providers: ProviderRegistry
    package let clock: any WallClock
    package let wakeup: Wakeup
    /// Signalled when a critical job arrives; with it, the consumer runs a critical lane beside
    /// its batch slots (see ``criticalLane()``).
    package let critical: Wakeup?
    package let configuration: Configuration
    package let logger: Logger
    /// This process's metric handles (shared by its consumers: the in-flight gauge is their sum).
    package let metrics: WorkerMetrics
    /// The critical lane's batches in flight; while they fill the lane, the slots claim critical
    /// jobs too.
    private let laneLoad = LaneLoad()
    /// The batch slots' acknowledgements pass through it (``Configuration/maxConcurrentAcks``).
    private let ackSlots: SlotGate
    /// Called with every settled batch after it was acknowledged (benchmarks, tests).
    package let onSettled: (@Sendable ([Settlement], Outbox.Batch) -> Void)?
    /// Receives each batch's stage timings (spans per job); nil records nothing.
    package let tracer: (any DeliveryTracer)?

    package init(
        outbox: Outbox,
        dispatcher: Dispatcher = Dispatcher(),
        providers: ProviderRegistry,
        clock: any WallClock = SystemClock(),
        wakeup: Wakeup,
        critical: Wakeup? = nil,
        configuration: Configuration,
        logger: Logger,
        metrics: WorkerMetrics = .disabled(),
        tracer: (any DeliveryTracer)? = nil,
        onSettled: (@Sendable ([Settlement], Outbox.Batch) -> Void)? = nil
    ) {
        self.tracer = tracer
        self.critical = critical
        self.metrics = metrics
        self.outbox = outbox
        self.dispatcher = dispatcher
        self.providers = providers
        self.clock = clock
        self.wakeup = wakeup
        self.configuration = configuration
        self.logger = logger
        self.onSettled = onSettled
        self.ackSlots = SlotGate(limit: configuration.maxConcurrentAcks)
    }

    package func run() async throws {
        logger.info(
            "Outbox consumer started",
            metadata: ["worker.id": "\(outbox.workerID)", "queue.batch_size": "\(configuration.batchSize)"]
        )
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.keepLeases() }
            // Both loops stop claiming on graceful shutdown and finish what they hold; the
            // leases are kept until then.
            async let lane: Void = criticalLane()
            await claimLoop()
            await lane
            group.cancelAll()
        }
        // Anything still leased (cancelled past the shutdown deadline) goes back to pending now,
        // instead of waiting for its lease to expire.
        do {
            // Bookkeeping that must outlive cancellation (past the shutdown deadline the group
            // cancels this task, and a cancelled task cannot reach the database).
            let outbox = self.outbox
            let released = try await Task { try await outbox.releaseOwned() }.value
            logger.info(
                "Outbox consumer stopped",
                metadata: ["worker.id": "\(outbox.workerID)", "released": "\(released)"]
            )
        } catch {
            logger.warning("Releasing leases at shutdown failed", metadata: ["error": "\(error)"])
        }
    }

    /// The batch slots: every priority, most urgent first, woken by `NOTIFY` or every
    /// `idlePoll` when the queue is empty. Beside a critical lane they leave the users with due
    /// critical jobs to it, unless critical jobs flood (``OutboxStatements/laneUsers``) or every
    /// lane batch is in flight (a provider that does not answer must not hold critical jobs back
    /// while slots are free).
    private func claimLoop() async {
        await sendLoop(through: .low, wake: wakeup, idle: configuration.idlePoll, lane: "slots")
    }

    /// Critical jobs only, outside the batch slots: while every slot is busy sending a broadcast,
    /// a critical job would otherwise wait for a slot to free up, or be picked up by a slot's
    /// claim and wait for all of it (a batch's claim takes tens of ms under load; that was most
    /// of the critical tail). Woken by the `critical` notification that enqueue sends, and by a
    /// slot whose claim left it users (that is how a critical retry coming due, which nothing
    /// announces, reaches it); and every second, or `idlePoll` if longer, in case every slot is
    /// busy. Claims follow the same per-recipient rules.
    ///
    /// Like the slots, up to `maxInFlightBatches` lane batches send at once, each claimed as soon
    /// as its signal arrives: a lane that waited for one batch's provider round trip before
    /// claiming the next made every critical job enqueued meanwhile wait that round trip too (p99
    /// ≈ the provider's latency). A finished lane batch signals the lane again, so a critical job
    /// that was skipped because its recipient was held by that batch is claimed at once.
    private func criticalLane() async {
        guard let critical else { return }
        await sendLoop(
            through: .critical,
            wake: critical,
            idle: max(configuration.idlePoll, .seconds(1)),
            lane: "critical",
            wakeAfterDelivery: true
        )
    }

    /// Claims jobs down to priority `through` and delivers each batch in a task of its own, with
    /// at most `maxInFlightBatches` holding a slot at once (``BatchSlot``), until graceful
    /// shutdown (then it finishes what it holds). After an empty claim it waits for `wake` or
    /// `idle`; after a failed one (a database blip must not stop the service) it backs off, 50 ms
    /// doubling up to 5 s.
    private func sendLoop(
        through: Priority,
        wake: Wakeup,
        idle: Duration,
        lane: String,
        wakeAfterDelivery: Bool = false
    ) async {
        let isLane = through == .critical
        // A slot comes back when its batch ends, or earlier, when the batch's later waves only
        // wait on the provider and fewer than as many other batches did so (``BatchSlot``).
        let slots = SlotGate(limit: configuration.maxInFlightBatches)
        let trailing = SlotGate(limit: configuration.maxInFlightBatches)
        // The slots record while they wait, so enqueues wake them (the lane needs no record:
        // critical jobs always send its wake-up).
        var waiting = IdleRecord()
        await withDiscardingTaskGroup { group in
            var backoff = 0.05
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                await slots.enter()
                // Slots beside a lane with room leave critical work to it.
                let leave =
                    !isLane && critical != nil
                    && laneLoad.inFlight.load(ordering: .relaxed) < configuration.maxInFlightBatches
                let batch: Outbox.Batch
                let claimed: BatchTimeline.Interval?
                do {
                    (batch, claimed) = try await claim(through: through, from: leave ? .high : .critical)
                    backoff = 0.05
                } catch {
                    slots.leave()
                    // A claim cut short by shutdown is not a failure.
                    if Task.isCancelled || Task.isShuttingDownGracefully { break }
                    logger.warning("Outbox claim failed", metadata: ["error": "\(error)", "lane": "\(lane)"])
                    try? await Task.sleep(for: .seconds(backoff))
                    backoff = min(backoff * 2, 5)
                    continue
                }
                // Users this slot left to the critical lane may be free only now (held by a batch
                // when the lane last looked): the lane looks again.
                if batch.leftToLane > 0, let critical { await critical.signal() }
                if batch.jobs.isEmpty {
                    slots.leave()
                    let wait = isLane ? idle : await idleWait(&waiting, idle: idle)
                    if wait > .zero { await cancelWhenGracefulShutdown { await wake.wait(timeout: wait) } }
                    continue
                }
                if waiting.recorded { await busy(&waiting) }
                if isLane { laneLoad.inFlight.add(1, ordering: .relaxed) }
                let laneLoad = self.laneLoad
                let slot = BatchSlot(trailing: trailing) {
                    if isLane { laneLoad.inFlight.subtract(1, ordering: .relaxed) }
                    slots.leave()
                }
                group.addTask {
                    await self.deliver(batch, claimed: claimed, lane: isLane, slot: slot)
                    slot.end()
                    if wakeAfterDelivery { await wake.signal() }
                }
            }
        }
        if waiting.recorded { await busy(&waiting) }
    }

    /// A slot loop's record of waiting for the wake-up (`herald.idle_workers`, migration 0023),
    /// keyed by the consumer's lease owner (one slot loop per consumer).
    struct IdleRecord {
        /// The row may exist (written, or its write failed halfway).
        var recorded = false
        /// Written, and every producer that may have looked before has committed.
        var confirmed = false
        var refreshed = ContinuousClock.now
        var retry: Duration = .milliseconds(10)
    }

    /// How long the slots wait after an empty claim. The first time, they record that they wait
    /// (enqueues then send the wake-up) and claim once more at once when the record is confirmed
    /// (``Outbox/markIdle()``: every producer that may have missed the record has committed, so
    /// that claim sees its jobs); unconfirmed (a producer's transaction still open), they claim
    /// again after 10 ms, doubling up to `idle`. Once confirmed they wait for the wake-up or
    /// `idle` (30 s at most, however long `idle` is), refreshing the record every 15 s: producers
    /// ignore a record a minute old (a worker that died waiting).
    private func idleWait(_ record: inout IdleRecord, idle: Duration) async -> Duration {
        let now = ContinuousClock.now
        if record.confirmed {
            if now - record.refreshed >= .seconds(15) {
                do {
                    try await outbox.refreshIdle()
                    record.refreshed = now
                } catch {
                    logger.debug("Idle record not refreshed", metadata: ["error": "\(error)"])
                }
            }
            return min(idle, .seconds(30))
        }
        record.recorded = true
        do {
            record.confirmed = try await outbox.markIdle()
            record.refreshed = now
        } catch {
            logger.debug("Idle record not written", metadata: ["error": "\(error)"])
        }
        if record.confirmed { return .zero }
        let wait = min(record.retry, idle)
        record.retry = min(record.retry * 2, idle)
        return wait
    }

    /// A claim found work: the slots no longer wait, so enqueues stop sending the wake-up.
    private func busy(_ record: inout IdleRecord) async {
        do {
            try await outbox.markBusy()
        } catch {
            logger.debug("Idle record not removed", metadata: ["error": "\(error)"])
        }
        record = IdleRecord()
    }

    /// Claims one batch; with a tracer, also when the claim ran (for its spans).
    private func claim(
        through: Priority = .low,
        from: Priority = .critical
    ) async throws
        -> (Outbox.Batch, BatchTimeline.Interval?)
    {
        let start = ContinuousClock.now
        let now = clock.now()
        let batch = Outbox.Batch(
            try await outbox.claim(
                limit: configuration.batchSize,
                lease: configuration.lease,
                now: now,
                through: through,
                from: from
            )
        )
        let interval = tracer == nil ? nil : BatchTimeline.Interval(start: now, end: clock.now())
        metrics.timer(MetricNames.claimDuration).recordNanoseconds(Int64((ContinuousClock.now - start).seconds * 1e9))
        metrics.counter(MetricNames.jobsClaimed).increment(by: batch.jobs.count)
        let inFlight = metrics.inFlightJobs.add(batch.jobs.count, ordering: .relaxed).newValue
        metrics.gauge(MetricNames.inFlight).record(inFlight)
        return (batch, interval)
    }

    /// Renews this consumer's leases every third of the lease while it runs.
    private func keepLeases() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: configuration.lease / 3)
            if Task.isCancelled { return }
            do {
                try await outbox.extendLeases(lease: configuration.lease, now: clock.now())
            } catch {
                logger.warning("Lease extension failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Claims one batch and delivers it to completion (tests and tools drive the loop this way).
    /// Returns how many jobs were claimed.
    @discardableResult
    package func runOnce() async throws -> Int {
        let (batch, claimed) = try await claim()
        if !batch.jobs.isEmpty { await deliver(batch, claimed: claimed) }
        return batch.jobs.count
    }

    /// Plans, sends and acknowledges one batch. Never throws: failures become settlements. A
    /// critical lane's batch (`lane`) is acknowledged without waiting for an acknowledgement slot.
    ///
    /// `slot`: the batch slot it runs in, given back after the first wave when later waves
    /// remain (they only wait on the provider; ``BatchSlot``).
    package func deliver(
        _ batch: Outbox.Batch,
        claimed: BatchTimeline.Interval? = nil,
        lane: Bool = false,
        slot: BatchSlot? = nil
    ) async {
        // With a tracer, each stage's wall-clock interval is recorded for the batch's spans.
        var timeline =
            tracer == nil
            ? nil
            : BatchTimeline(
                claim: claimed ?? .init(start: clock.now(), end: clock.now()),
                decide: .init(start: clock.now(), end: .distantPast),
                ack: .init(start: .distantPast, end: .distantPast)
            )
        let plans = dispatcher.plan(
            batch.jobs,
            recipients: batch.recipients,
            categories: batch.categories,
            unread: batch.unread,
            now: clock.now()
        )
        timeline?.decide.end = clock.now()

        var outcomes: [[DeliveryOutcome]] = plans.map { plan in
            if case .deliver(let messages) = plan.action { return Array(repeating: .accepted, count: messages.count) }
            return []
        }
        // A recipient's jobs go out in claim order: its n-th push of the batch leaves in wave n,
        // after the provider answered wave n-1. A batch of distinct users is one wave.
        var waves: [[Int]] = []
        var sentPerUser: [String: Int] = [:]
        // By index, here and below: a plan (its job's fifteen fields) is not copied to be read.
        for p in plans.indices {
            guard case .deliver = plans[p].action else { continue }
            let user = plans[p].job.userID
            let wave = sentPerUser[user, default: 0]
            sentPerUser[user] = wave + 1
            if wave == waves.count { waves.append([]) }
            waves[wave].append(p)
        }
        // Per device, in order: a message is not sent while an older job of the same user waits
        // to be sent again to that device, whether it failed in an earlier batch (`retrying`) or
        // in an earlier wave of this one; it waits behind that retry (see `orderRetries`).
        // A device whose token a provider refused is not sent to again in this batch.
        var heldUntil: [Int: Date] = [:]
        var retrying: Set<Int64> = []
        var refused: Set<Int64> = []
        let firstWave = ContinuousClock.now
        for (w, wave) in waves.enumerated() {
            // The first wave answered slowly and more to come: a recipient's later pushes wait
            // for the provider, not for a slot, and the slot claims the next batch meanwhile.
            if w == 1, let slot, ContinuousClock.now - firstWave >= BatchSlot.slowWave { slot.trail() }
            var held: Set<Int64> = []
            for p in wave {
                guard case .deliver(let messages) = plans[p].action else { continue }
                let (jobID, priority) = (plans[p].job.id, plans[p].job.priority)
                let waiting = batch.retrying[plans[p].job.userID] ?? []
                for m in messages.indices {
                    let device = messages[m].device.id
                    if refused.contains(device) {
                        outcomes[p][m] = DeliveryOutcome(.tokenInvalid, reason: .tokenRefusedInBatch)
                        held.insert(device)
                        continue
                    }
                    var behind = retrying.contains(device)
                    for older in waiting
                    where older.id < jobID && older.priority <= priority && !older.acceptedDevices.contains(device) {
                        behind = true
                        heldUntil[p] = max(heldUntil[p] ?? older.runAt, older.runAt)
                    }
                    guard behind else { continue }
                    outcomes[p][m] = DeliveryOutcome(.retry, reason: .behindRetry)
                    held.insert(device)
                }
            }
            await send(wave, of: plans, skipping: held, into: &outcomes, timeline: &timeline)
            for p in wave {
                guard case .deliver(let messages) = plans[p].action else { continue }
                for m in messages.indices {
                    switch outcomes[p][m].disposition {
                    case .retry, .credentialsBroken: retrying.insert(messages[m].device.id)
                    case .tokenInvalid: refused.insert(messages[m].device.id)
                    default: break
                    }
                }
            }
        }

        // Past the shutdown deadline our own cancellation cut these sends short: what got no
        // answer goes back to pending at once without spending its attempt (delivery is at least
        // once; the collapse id makes a request that did arrive replace, not repeat).
        if Task.isCancelled {
            for p in outcomes.indices {
                for m in outcomes[p].indices where outcomes[p][m].disposition == .retry {
                    outcomes[p][m] = DeliveryOutcome(.retry, reason: .shutdown, retryAfter: .zero)
                }
            }
        }

        var random = SystemRandomNumberGenerator()
        let now = clock.now()
        var settlements: [Settlement] = []
        settlements.reserveCapacity(plans.count)
        for p in plans.indices {
            switch plans[p].action {
            case .finish(let settlement):
                settlements.append(settlement)
            case .deliver(let messages):
                let category = plans[p].job.category
                let rules = batch.categories[category] ?? CategoryRules(name: category)
                var settlement = dispatcher.settle(
                    plans[p].job,
                    rules: rules,
                    messages: messages,
                    outcomes: outcomes[p],
                    now: now,
                    random: &random
                )
                if settlement.state == .done { settlement.inbox = plans[p].inbox }
                settlements.append(settlement)
            }
        }
        dispatcher.orderRetries(&settlements, of: plans, floors: heldUntil)
        if configuration.localFallback, let local = providers[.local] {
            await recordFallbacks(&settlements, plans: plans, categories: batch.categories, local: local, now: now)
        }
        timeline?.ack.start = clock.now()
        await acknowledge(settlements, jobs: batch.jobs, bucket: batch.bucket, slots: lane ? nil : ackSlots)
        if var timeline, let tracer {
            timeline.ack.end = clock.now()
            timeline.jobs = plans.enumerated().map { p, plan in
                let decision: String
                switch plan.action {
                case .deliver: decision = "deliver"
                case .finish(let settlement): decision = settlement.logs.last?.reason?.text ?? settlement.state.rawValue
                }
                return (plan.job, decision, settlements[p].state)
            }
            tracer.record(timeline)
        }
        Self.count(settlements, metrics)
        Self.measureDeadlines(settlements, batch: batch, now: clock.now(), metrics)
        let inFlight = metrics.inFlightJobs.subtract(batch.jobs.count, ordering: .relaxed).newValue
        metrics.gauge(MetricNames.inFlight).record(inFlight)
        onSettled?(settlements, batch)
    }

    /// Sends the messages of `planIndexes` (at most one plan per recipient), each provider's
    /// share concurrently, and writes each answer into `outcomes`. Messages to the devices in
    /// `held` are not sent (their outcomes are already written).
    private func send(
        _ planIndexes: [Int],
        of plans: [Dispatcher.Plan],
        skipping held: Set<Int64> = [],
        into outcomes: inout [[DeliveryOutcome]],
        timeline: inout BatchTimeline?
    ) async {
        let traced = timeline != nil
        // Group every message by provider, remembering where each outcome belongs.
        var messagesByKind: [ProviderKind: [PushMessage]] = [:]
        var slots: [ProviderKind: [(plan: Int, message: Int)]] = [:]
        for p in planIndexes {
            guard case .deliver(let messages) = plans[p].action else { continue }
            for m in messages.indices where !held.contains(messages[m].device.id) {
                let kind = messages[m].device.provider
                messagesByKind[kind, default: []].append(messages[m])
                slots[kind, default: []].append((p, m))
            }
        }
        typealias Answer = (kind: ProviderKind, outcomes: [DeliveryOutcome], interval: BatchTimeline.Interval?)
        let results = await withTaskGroup(of: Answer.self) { group in
            for (kind, messages) in messagesByKind {
                group.addTask {
                    let sendStart = traced ? self.clock.now() : .distantPast
                    guard let provider = self.providers[kind] else {
                        return (
                            kind, messages.map { _ in DeliveryOutcome(.retry, reason: .providerNotConfigured) }, nil
                        )
                    }
                    let start = ContinuousClock.now
                    var sent = await provider.send(messages, logger: self.logger)
                    self.metrics.timer(MetricNames.providerDuration, provider.name)
                        .recordNanoseconds(Int64((ContinuousClock.now - start).seconds * 1e9))
                    // An adapter that answers short is treated as "no answer" for the rest: retry.
                    if sent.count < messages.count {
                        sent += Array(
                            repeating: DeliveryOutcome(.retry, reason: .noOutcome),
                            count: messages.count - sent.count
                        )
                    }
                    return (kind, sent, traced ? .init(start: sendStart, end: self.clock.now()) : nil)
                }
            }
            var all: [ProviderKind: Answer] = [:]
            for await answer in group { all[answer.kind] = answer }
            return all
        }
        if traced {
            for (kind, answer) in results {
                guard let interval = answer.interval else { continue }
                var byJob: [Int64: [DeliveryOutcome]] = [:]
                for (i, slot) in (slots[kind] ?? []).enumerated() {
                    byJob[plans[slot.plan].job.id, default: []].append(answer.outcomes[i])
                }
                timeline?.sends.append(.init(provider: kind, interval: interval, outcomes: byJob))
            }
        }
        var attempts = CounterTally()
        for (kind, answer) in results {
            let list = answer.outcomes
            let name = providers[kind]?.name ?? kind.rawValue
            // Counted per kind of outcome first (nearly all of a batch is one or two).
            var counts: [OutcomeKind: Int] = [:]
            for (i, slot) in (slots[kind] ?? []).enumerated() {
                outcomes[slot.plan][slot.message] = list[i]
                counts[OutcomeKind(disposition: list[i].disposition, reason: list[i].reason), default: 0] += 1
            }
            for (outcome, n) in counts {
                attempts.add(
                    MetricNames.deliveryAttempts,
                    name,
                    outcome.disposition.rawValue,
                    outcome.reason.rawValue,
                    count: n
                )
            }
        }
        metrics.record(attempts)
    }

    /// What a provider said of one message, as the attempts metric labels it.
    private struct OutcomeKind: Hashable {
        var disposition: DeliveryOutcome.Disposition
        var reason: DeliveryOutcome.Reason
    }

    /// Records the in-app copy of every job that ends with no push device having taken it (the
    /// local-fallback record and a `notification` row in the user's inbox, or the critical job's
    /// `alert` row), and logs the delivery method used on the job's history: `fallback` via
    /// `local`, reason `inbox` or `alert`.
    private func recordFallbacks(
        _ settlements: inout [Settlement],
        plans: [Dispatcher.Plan],
        categories: [String: CategoryRules],
        local: any PushProvider,
        now: Date
    ) async {
        var messages: [PushMessage] = []
        var owners: [Int] = []
        // A job some device accepted has no fallback (one of `Dispatcher.fallback`'s tests): passed
        // over here, without handing its settlement, job and rules to the call (most of a batch).
        for i in settlements.indices where settlements[i].accepted.isEmpty {
            let rules = categories[plans[i].job.category]
            if let message = dispatcher.fallback(for: settlements[i], job: plans[i].job, rules: rules, now: now) {
                messages.append(message)
                owners.append(i)
            }
        }
        guard !messages.isEmpty else { return }
        let outcomes = await local.send(messages, logger: logger)
        for (k, i) in owners.enumerated() {
            let outcome = k < outcomes.count ? outcomes[k] : DeliveryOutcome(.retry, reason: .noOutcome)
            // The app's notification center shows it too (seed 004): one inbox row per job, so a
            // critical job whose `alert` row is written now gets no second one.
            let job = plans[i].job
            var shownAs = LogReason.shownAsAlert
            if !settlements[i].alert, let rules = categories[job.category] {
                settlements[i].inbox = dispatcher.fallbackInboxEntry(for: job, rules: rules)
                shownAs = .shownInInbox
            }
            settlements[i].logs.append(
                LogEntry(
                    jobID: settlements[i].jobID,
                    provider: local.name,
                    event: .fallback,
                    outcome: outcome.disposition,
                    status: settlements[i].state,
                    reason: outcome.disposition == .accepted ? shownAs : .outcome(outcome.reason),
                    attempt: plans[i].job.attempt,
                    latency: outcome.latency
                )
            )
            metrics.counter(MetricNames.deliveryAttempts, local.name, outcome.disposition.rawValue, "fallback")
                .increment()
        }
    }

    /// Per category: enqueue (or the requested `deliverAt`) to the first accepted device, and
    /// each job of a category with a deadline that missed it, counted once: when its deadline
    /// alert is written, when it is first accepted late without one, or when it ends (dead,
    /// expired) never accepted and never alerted.
    static func measureDeadlines(_ settlements: [Settlement], batch: Outbox.Batch, now: Date, _ metrics: WorkerMetrics)
    {
        // Positions, not copies of the jobs.
        let positions = Dictionary(
            batch.jobs.indices.map { (batch.jobs[$0].id, $0) },
            uniquingKeysWith: { first, _ in first }
        )
        var missed = CounterTally()
        // One timer per category of the batch, looked up once.
        var timers: [String: CoreMetrics.Timer] = [:]
        let deadlines = batch.categories.compactMapValues(\.deadline)
        // The jobs' fields read in place (a job is a large value, not copied to be read).
        for s in settlements {
            guard let j = positions[s.jobID] else { continue }
            let (created, category) = (batch.jobs[j].createdAt, batch.jobs[j].category)
            let start = max(created, batch.jobs[j].inputs.deliverAt ?? created)
            let acceptedBefore = !batch.jobs[j].acceptedDevices.isEmpty
            let firstAcceptance = !s.accepted.isEmpty && !acceptedBefore
            if firstAcceptance {
                let timer = timers[category] ?? metrics.timer(MetricNames.deliveryLatency, category)
                timers[category] = timer
                timer.recordNanoseconds(Int64(max(0, (now - start).seconds) * 1e9))
            }
            guard let deadline = deadlines[category], batch.jobs[j].alertedAt == nil else { continue }
            let alerted = s.logs.contains { $0.event == .alert && $0.reason == .deadlineMissed }
            let late = firstAcceptance && now > start + deadline
            let neverDelivered = (s.state == .dead || s.state == .expired) && !acceptedBefore && s.accepted.isEmpty
            if alerted || late || neverDelivered {
                missed.add(MetricNames.deadlineMissed, category)
            }
        }
        metrics.record(missed)
    }

    /// Counts each settlement under the metric that names what happened to it.
    private static func count(_ settlements: [Settlement], _ metrics: WorkerMetrics) {
        var tally = CounterTally()
        // Completions per state counted first: most of a batch is one state (a key's hash apiece
        // was a good part of this function).
        var completed: [JobState: Int] = [:]
        for i in settlements.indices {  // by index: a settlement is not copied to be looked at
            let state = settlements[i].state
            completed[state, default: 0] += 1
            switch state {
            case .pending where !settlements[i].awaitsResend:  // held by a rule
                tally.add(MetricNames.deferred, settlements[i].error?.text ?? "none")
            case .pending:
                tally.add(MetricNames.jobsRetried)
            case .dead:
                tally.add(MetricNames.jobsDeadLettered)
            case .suppressed:
                tally.add(MetricNames.suppressed, settlements[i].error?.text ?? "none")
            case .summarized:
                tally.add(MetricNames.coalesced, settlements[i].error?.text ?? "none")
            case .done, .cancelled, .expired:
                break
            }
            for d in settlements[i].disable { tally.add(MetricNames.devicesDisabled, d.reason.rawValue) }
        }
        for (state, n) in completed { tally.add(MetricNames.jobsCompleted, state.rawValue, count: n) }
        metrics.record(tally)
    }

    /// Acknowledges with retries for most of the lease; past that the reaper takes over and the
    /// jobs are delivered again (with the same collapse id, so devices replace, not repeat).
    /// Each try waits for a slot of `slots` first, when given.
    private func acknowledge(_ settlements: [Settlement], jobs: [Job], bucket: Int, slots: SlotGate?) async {
        let start = ContinuousClock.now
        var wait = Duration.milliseconds(50)
        while true {
            do {
                // Runs in its own task: an acknowledgement must not be abandoned because the
                // shutdown deadline cancelled the batch (documented exception to owned tasks).
                let outbox = self.outbox
                let owned = try await Task {
                    let ack = { try await outbox.acknowledge(settlements, jobs: jobs, bucket: bucket) }
                    if let slots { return try await slots.run(ack) }
                    return try await ack()
                }.value
                if owned < settlements.count {
                    logger.warning(
                        "Lease lost before acknowledgement",
                        metadata: ["worker.id": "\(outbox.workerID)", "lost": "\(settlements.count - owned)"]
                    )
                }
                metrics.timer(MetricNames.ackDuration)
                    .recordNanoseconds(Int64((ContinuousClock.now - start).seconds * 1e9))
                return
            } catch {
                let elapsed = ContinuousClock.now - start
                if elapsed + wait > configuration.lease * 0.8 {
                    logger.error(
                        "Acknowledgement failed; leases will expire and the jobs run again",
                        metadata: ["error": "\(error)", "jobs": "\(settlements.count)"]
                    )
                    return
                }
                logger.warning("Acknowledgement failed; retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: wait)
                wait = min(wait * 2, .seconds(2))
            }
        }
    }
}

/// How many batches a consumer's critical lane has in flight (read by its slots).
private final class LaneLoad: Sendable {
    let inFlight = Atomic<Int>(0)
}

/// A batch's place among its send loop's batch slots. A batch whose recipients have several
/// pushes in it sends them in waves, each after the provider answered the one before. When
/// the first wave took ``slowWave`` or more, the later ones will mostly wait on the provider,
/// so the batch gives its slot back then (``trail()``) and the loop claims the next batch
/// meanwhile, if fewer than `maxInFlightBatches` of the loop's batches already did (`trailing`,
/// a ``SlotGate`` it never waits on: so a loop has at most twice that many batches in flight).
/// Otherwise, and for a batch of one wave, the slot comes back when the batch ends (``end()``).
/// Against a provider that takes 100 ms a request, a batch of 500 jobs, five a user, held its
/// slot for five round trips. Against a fast one the slots stay as they were: a batch's waves
/// then take little of its slot's time, and more batches claiming at once would only add
/// statements on the database's cores (the critical lane's claims among them).
/// What a batch holds never depends on this, only how many batches send at once.
package final class BatchSlot: Sendable {
    /// A first wave at least this long gives the slot back.
    package static let slowWave = Duration.milliseconds(10)

    private let trailing: SlotGate
    private let giveBack: @Sendable () -> Void
    /// Whether the slot went back early, with a place among the trailing batches (the batch's
    /// task calls ``trail()`` and then ``end()``, never at once).
    private let early = Mutex(false)

    package init(trailing: SlotGate, giveBack: @escaping @Sendable () -> Void) {
        self.trailing = trailing
        self.giveBack = giveBack
    }

    /// Gives the slot back early, if the loop has room for one more trailing batch.
    func trail() {
        let give = early.withLock { early -> Bool in
            guard !early, trailing.tryEnter() else { return false }
            early = true
            return true
        }
        if give { giveBack() }
    }

    /// The batch ended: its trailing place comes back if it gave its slot back early, else its slot.
    func end() {
        if early.withLock({ $0 }) { trailing.leave() } else { giveBack() }
    }
}
