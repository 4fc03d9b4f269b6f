import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Logging
import Providers
import Queue
import Synchronization
import Testing

/// Answers requests to tokens starting with `slow` after 30 ms (a slow provider: past
/// `BatchSlot.slowWave`), others at once; holds the requests of the jobs in `hold` until opened.
final class SlowWaveProvider: PushProvider, Sendable {
    let name = "slow-wave"
    private let state = Mutex<(hold: Set<Int64>, open: Bool, held: Set<Int64>, sent: [Int64])>(([], false, [], []))

    var held: Set<Int64> { state.withLock { $0.held } }
    var sent: [Int64] { state.withLock { $0.sent } }
    func hold(_ jobs: Int64...) { state.withLock { $0.hold.formUnion(jobs) } }
    func open() { state.withLock { $0.open = true } }

    func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        if messages.contains(where: { $0.device.token.hasPrefix("slow") }) {
            try? await Task.sleep(for: .milliseconds(30))
        }
        let held = state.withLock { state in
            let held = messages.map(\.jobID).filter { state.hold.contains($0) && !state.open }
            state.held.formUnion(held)
            return !held.isEmpty
        }
        if held { while !state.withLock({ $0.open }) { try? await Task.sleep(for: .milliseconds(10)) } }
        state.withLock { $0.sent.append(contentsOf: messages.map(\.jobID)) }
        return messages.map { _ in .accepted }
    }
}

/// A batch with several pushes of a user sends them in waves, one provider round trip each; once
/// a slow first wave is answered the batch gives its slot back, so one batch's later waves do not
/// keep the next batch from being claimed and sent (`BatchSlot`), with at most as many such
/// batches as slots.
@Suite("Batch slots: a batch whose later waves wait on a slow provider gives its slot back")
struct BatchSlotTests {
    @Test(
        "one slot: while a user's second push waits on the provider, the next batch is claimed and sent; with the one trailing place taken, a third batch waits for a slot; every user's pushes in order"
    )
    func laterWavesFreeTheSlot() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("news")
            for (user, token) in [("a", "slow-a"), ("b", "fast-b"), ("c", "slow-c"), ("d", "fast-d")] {
                try await db.registerDevice(user, "apns", token)
            }
            let provider = SlowWaveProvider()
            var a: [Int64] = []
            for _ in 0..<3 { a.append(try #require(try await db.enqueue("a", "news"))) }
            provider.hold(a[1])
            let wakeup = Wakeup()
            var configuration = OutboxConsumer.Configuration()
            configuration.batchSize = 10
            configuration.maxInFlightBatches = 1
            let consumer = OutboxConsumer(
                outbox: db.outbox(),
                providers: ProviderRegistry([.apns: provider]),
                wakeup: wakeup,
                configuration: configuration,
                logger: TestDatabase.logger
            )
            let listener = PostgresListener(
                pool: db.pool,
                channel: "herald_outbox",
                wakeup: wakeup,
                logger: TestDatabase.logger
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await listener.run() }
                group.addTask { try await consumer.run() }
                // a's batch: its first push answered (slowly), its second held by the provider.
                #expect(try await waitUntil(.seconds(10)) { provider.held == [a[1]] })
                #expect(provider.sent == [a[0]])
                // The one slot is free again: b's job goes out beside a's waiting wave.
                let b = try #require(try await db.enqueue("b", "news"))
                #expect(try await waitUntil(.seconds(10)) { provider.sent.contains(b) }, "b sent while a's batch waits")
                // c's batch also has a slow first wave and a held second, but a holds the one
                // trailing place: c's batch keeps the slot, and d waits for it.
                let c = [
                    try #require(try await db.enqueue("c", "news")), try #require(try await db.enqueue("c", "news")),
                ]
                provider.hold(c[1])
                #expect(try await waitUntil(.seconds(10)) { provider.held == [a[1], c[1]] })
                let d = try #require(try await db.enqueue("d", "news"))
                try await Task.sleep(for: .milliseconds(500))
                #expect(!provider.sent.contains(d), "two batches in flight at most with one slot")
                #expect(
                    try await db.int("SELECT count(*) FROM herald.outbox WHERE id = \(d) AND state = 'pending'") == 1
                )
                provider.open()
                #expect(
                    try await waitUntil(.seconds(10)) { try await db.int("SELECT count(*) FROM herald.outbox") == 0 }
                )
                let sent = provider.sent
                #expect(sent.filter { a.contains($0) } == a, "a's pushes in order")
                #expect(sent.filter { c.contains($0) } == c, "c's pushes in order")
                #expect(sent.contains(d))
                #expect(try await db.int("SELECT count(*) FROM herald.inbox") == 7)
                #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner IS NOT NULL") == 0)
                group.cancelAll()
            }
        }
    }
}
