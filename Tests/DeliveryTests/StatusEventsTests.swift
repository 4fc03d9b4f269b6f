import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// `NOTIFY herald_events`: what an acknowledgement did that a backend may want to act on.
@Suite("Status events: NOTIFY herald_events from each acknowledging statement")
struct StatusEventsTests {
    struct Event: Decodable, Equatable {
        var deadLetters: [Int64]
        var alerts: [Int64]
        var disabledDevices: [Int64]
    }

    /// Runs one consumer batch while a dedicated connection LISTENs; returns the events received.
    static func events(_ db: TestDatabase, batch: Int, providers: ProviderRegistry) async throws -> [Event] {
        try await db.pool.withConnection { listener in
            try await listener.execute("LISTEN herald_events", name: "listen_events")
            let consumer = db.consumer(providers: providers, batchSize: batch)
            _ = try await consumer.runOnce()
            var received: [PostgresConnection.Notification] = []
            for _ in 0..<8 {
                let more = try await listener.waitForNotifications(timeout: .milliseconds(250))
                received += more
                if !received.isEmpty && more.isEmpty { break }
            }
            #expect(received.allSatisfy { $0.channel == "herald_events" && $0.payload.utf8.count < 8000 })
            return try received.map { try JSONDecoder().decode(Event.self, from: Data($0.payload.utf8)) }
        }
    }

    @Test("a dead letter, a critical alert and a disabled device are announced, with their ids")
    func announced() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat", maxAttempts: 1)
            try await db.addCategory("sep", priority: "critical", maxAttempts: 1)
            let gone = try await db.registerDevice("rider", "apns", "gone")
            try await db.registerDevice("poison", "apns", "poison")
            let provider = ScriptedProvider()
            provider.answer("gone", with: DeliveryOutcome(.tokenInvalid, reason: .unregistered))
            provider.answer("poison", with: DeliveryOutcome(.payloadRejected, reason: .badPayload))
            _ = try await db.enqueue("rider", "chat")
            let dead = try #require(try await db.enqueue("poison", "chat"))
            let alerted = try #require(try await db.enqueue("nobody", "sep"))
            let events = try await Self.events(db, batch: 10, providers: ProviderRegistry([.apns: provider]))
            #expect(events == [Event(deadLetters: [dead], alerts: [alerted], disabledDevices: [gone])])
        }
    }

    @Test(
        "an acknowledgement with nothing to announce sends nothing; 700 dead letters come in notifications under 8,000 bytes"
    )
    func quietAndSplit() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat", maxAttempts: 1)
            try await db.registerDevice("fine", "apns", "fine")
            _ = try await db.enqueue("fine", "chat")
            let provider = ScriptedProvider()
            #expect(try await Self.events(db, batch: 10, providers: ProviderRegistry([.apns: provider])).isEmpty)

            try await db.exec(
                "SELECT herald.register_device('p' || g, 'apns', 'poison-' || g) FROM generate_series(1, 700) g"
            )
            for g in 1...700 {
                provider.answer("poison-\(g)", with: DeliveryOutcome(.payloadRejected, reason: .badPayload))
            }
            _ = try await db.outbox().enqueueMany(
                users: (1...700).map { "p\($0)" },
                category: "chat",
                payloadJSON: #"{"title":"t","body":"b"}"#
            )
            let events = try await Self.events(db, batch: 800, providers: ProviderRegistry([.apns: provider]))
            #expect(events.count == 3)  // 300 + 300 + 100 ids
            #expect(Set(events.flatMap(\.deadLetters)).count == 700)
        }
    }
}
