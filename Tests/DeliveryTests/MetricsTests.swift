import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import HeraldMetrics
import MetricsTestKit
import Providers
import Queue
import Testing

/// Components record into the handles they were given: each test reads its own `TestMetrics`,
/// and no global backend is bootstrapped.
@Suite("Metrics: handles per component, read under TestMetrics")
struct MetricsTests {
    @Test("a consumer counts claims, outcomes, attempts and timings into its own handles")
    func consumerRecordsIntoItsHandles() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            _ = try await db.registerDevice("ok", "apns", "good-token")
            _ = try await db.registerDevice("down", "apns", "flaky-token")
            let provider = ScriptedProvider()
            provider.answer("flaky-token", with: DeliveryOutcome(.retry, reason: .unavailable))
            _ = try await db.enqueue("ok", "chat")
            _ = try await db.enqueue("down", "chat")

            let test = TestMetrics()
            let other = TestMetrics()
            let consumer = db.consumer(
                providers: ProviderRegistry([.apns: provider]),
                metrics: WorkerMetrics(factory: test)
            )
            #expect(try await consumer.runOnce() == 2)

            #expect(test.counterTotal(label: "herald_jobs_claimed_total") == 2)
            #expect(test.counterTotal(label: "herald_jobs_completed_total", dimensions: [("state", "done")]) == 1)
            #expect(test.counterTotal(label: "herald_jobs_retried_total") == 1)
            let attempts = "herald_delivery_attempts_total"
            #expect(
                test.counterTotal(
                    label: attempts,
                    dimensions: [("provider", "scripted"), ("outcome", "accepted"), ("reason", "ok")]
                ) == 1
            )
            #expect(
                test.counterTotal(
                    label: attempts,
                    dimensions: [("provider", "scripted"), ("outcome", "retry"), ("reason", "unavailable")]
                ) == 1
            )
            #expect(try test.expectGauge("herald_in_flight_jobs").lastValue == 0)  // claimed 2, then settled
            #expect(try test.expectTimer("herald_claim_duration_seconds").values.count == 1)
            #expect(try test.expectTimer("herald_ack_duration_seconds").values.count == 1)
            #expect(
                try test.expectTimer("herald_provider_request_duration_seconds", [("provider", "scripted")]).values
                    .count == 1
            )
            // Another component's handles saw none of it.
            #expect(other.counters.isEmpty && other.timers.isEmpty)
        }
    }

    @Test("SLO per category: enqueue-to-first-acceptance latency, and each job that missed its deadline counted once")
    func deadlinesPerCategory() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("sos", priority: "critical", maxAttempts: 5, base: "1 second", cap: "1 second")
            try await db.addCategory("chat")
            try await db.exec(
                "UPDATE herald.categories SET deadline = interval '5 seconds' WHERE name IN ('sos', 'chat')"
            )
            _ = try await db.registerDevice("fast", "apns", "good-token")
            _ = try await db.registerDevice("slow", "apns", "flaky-token")
            let provider = ScriptedProvider()
            provider.answer("flaky-token", with: DeliveryOutcome(.retry, reason: .unavailable))
            // One transaction, so both share `created_at` however slowly the machine runs (the
            // clock below starts from it): "fast" is accepted 2 s after enqueue, in time; "slow"
            // fails until after its deadline.
            try await db.exec(
                """
                SELECT herald.enqueue('fast', 'chat', '{"title": "Hello", "body": "World"}');
                SELECT herald.enqueue('slow', 'sos', '{"title": "Hello", "body": "World"}')
                """
            )
            let created = try await db.instant("SELECT created_at FROM herald.outbox WHERE category = 'chat'")
            let sosCreated = try await db.instant("SELECT created_at FROM herald.outbox WHERE category = 'sos'")
            #expect(sosCreated == created)
            let clock = ManualClock(created + 2)
            let test = TestMetrics()
            let consumer = db.consumer(
                providers: ProviderRegistry([.apns: provider]),
                clock: clock,
                metrics: WorkerMetrics(factory: test)
            )
            #expect(try await consumer.runOnce() == 2)
            let chat = try test.expectTimer("herald_delivery_latency_seconds", [("category", "chat")])
            #expect(chat.values.count == 1 && abs(Double(chat.values[0]) / 1e9 - 2) < 0.01)
            #expect(test.counterTotal(label: "herald_deadline_missed_total", dimensions: [("category", "chat")]) == 0)

            // Past the deadline: the critical job's in-app alert is written, and that is the miss.
            clock.advance(by: 10)
            try await db.exec("UPDATE herald.outbox SET run_at = now() - interval '1 second'")
            #expect(try await consumer.runOnce() == 1)
            #expect(test.counterTotal(label: "herald_deadline_missed_total", dimensions: [("category", "sos")]) == 1)
            // Accepted later: its latency is recorded, the miss is not counted again.
            provider.answer("flaky-token", with: DeliveryOutcome(.accepted, reason: .ok))
            clock.advance(by: 3)
            try await db.exec("UPDATE herald.outbox SET run_at = now() - interval '1 second'")
            #expect(try await consumer.runOnce() == 1)
            #expect(test.counterTotal(label: "herald_deadline_missed_total", dimensions: [("category", "sos")]) == 1)
            let sos = try test.expectTimer("herald_delivery_latency_seconds", [("category", "sos")])
            #expect(
                sos.values.count == 1
                    && abs(Double(sos.values[0]) / 1e9 - (created + 15).timeIntervalSince(sosCreated)) < 0.01
            )
        }
    }

    @Test("readiness records herald_ready: 1 when its check passes, 0 once draining")
    func readinessRecordsReady() async throws {
        let test = TestMetrics()
        let readiness = Readiness(metrics: WorkerMetrics(factory: test)) { nil }
        #expect(await readiness.status() == nil)
        #expect(try test.expectGauge("herald_ready").lastValue == 1)
        readiness.beginDraining()
        #expect(try test.expectGauge("herald_ready").lastValue == 0)
        #expect(await readiness.status() == "draining")
    }

    @Test("depth counts each state exactly after a broadcast has drained: due, scheduled, running, held, oldest wait")
    func depthAfterADrainedBroadcast() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.addCategory("news")
            // A broadcast that came and went: the table keeps its pages (vacuum does not
            // truncate the outbox), and the depth must still count only what is queued now.
            try await db.exec(
                "SELECT herald.enqueue_many(ARRAY(SELECT 'b' || g FROM generate_series(1, 3000) g), 'chat', '{\"title\": \"t\", \"body\": \"b\"}')"
            )
            try await db.exec("DELETE FROM herald.outbox")
            let outbox = db.outbox("depth")
            let empty = try await outbox.depth()
            #expect(
                [empty.pendingDue, empty.pendingScheduled, empty.running, empty.paused] == [Int](repeating: 0, count: 4)
            )
            #expect(empty.oldestPendingAge == .zero)

            // Three due (one soon claimed), two scheduled, and a news job a pause holds.
            try await db.exec(
                """
                SELECT herald.enqueue('u' || g, 'chat', '{"title": "t", "body": "b"}') FROM generate_series(1, 3) g;
                SELECT herald.enqueue('s' || g, 'chat', '{"title": "t", "body": "b"}', jsonb_build_object('deliverAt', now() + interval '1 hour'))
                FROM generate_series(1, 2) g;
                SELECT herald.enqueue('n', 'news', '{"title": "t", "body": "b"}');
                UPDATE herald.outbox SET run_at = now() - interval '30 seconds', created_at = now() - interval '30 seconds' WHERE user_id = 'u1';
                SELECT herald.pause('news');
                """
            )
            _ = try await db.scalar("SELECT herald.hold_paused(100)")
            let claimed = try await outbox.claim(limit: 1, lease: .seconds(60), now: Date())
            #expect(claimed.jobs.map(\.userID) == ["u1"])  // the oldest due goes first

            let depth = try await outbox.depth()
            #expect(depth.pendingDue == 2)
            #expect(depth.pendingScheduled == 2)
            #expect(depth.running == 1)
            #expect(depth.paused == 1)
            #expect(depth.activePauses == 1)
            // The oldest due job waiting is u2 or u3, enqueued just now, not u1 (running).
            #expect(depth.oldestPendingAge < .seconds(20))
            var status = try await outbox.status().depth
            status.oldestPendingAge = depth.oldestPendingAge  // read a moment later
            #expect(status == depth)
        }
    }

    @Test("the leader's queue gauges come from one depth reading, held jobs and pauses included")
    func maintenanceMeasuresTheQueue() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            _ = try await db.enqueue("u", "chat")
            _ = try await db.enqueue("v", "chat")
            let test = TestMetrics()
            let service = MaintenanceService(
                outbox: db.outbox("maint"),
                configuration: .init(),
                logger: TestDatabase.logger,
                metrics: WorkerMetrics(factory: test)
            )
            await service.measure()
            #expect(try test.expectGauge("herald_outbox_jobs", [("state", "pending_due")]).lastValue == 2)
            #expect(try test.expectGauge("herald_outbox_jobs", [("state", "running")]).lastValue == 0)
            #expect(try test.expectGauge("herald_dead_letters").lastValue == 0)
            #expect(try test.expectGauge("herald_pauses").lastValue == 0)

            // A pause: the leader's sweep holds the jobs, the gauges show them and the pause.
            try await db.addCategory("news")
            _ = try await db.enqueue("w", "news")
            _ = try await db.scalar("SELECT herald.pause('chat')")
            await service.sweepPauses()
            await service.measure()
            #expect(try test.expectGauge("herald_outbox_jobs", [("state", "paused")]).lastValue == 2)
            #expect(try test.expectGauge("herald_outbox_jobs", [("state", "pending_due")]).lastValue == 1)
            #expect(try test.expectGauge("herald_outbox_jobs", [("state", "pending_scheduled")]).lastValue == 0)
            #expect(try test.expectGauge("herald_pauses").lastValue == 1)
        }
    }
}
