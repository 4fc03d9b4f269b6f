import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

@Suite("Expo receipt store (herald.expo_tickets)")
struct ExpoReceiptStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func ticket(
        _ id: String,
        device: Int64,
        job: Int64 = 1,
        message: String = #"{"to":"ExponentPushToken[a]"}"#,
        attempt: Int = 1,
        checkAfter: TimeInterval = 900
    ) -> ExpoTicket {
        ExpoTicket(
            ticketID: id,
            deviceID: device,
            jobID: job,
            appID: "club",
            messageJSON: message,
            attempt: attempt,
            sentAt: t0,
            checkAt: t0.addingTimeInterval(checkAfter)
        )
    }

    static func object(_ json: String) -> NSDictionary? {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? NSDictionary
    }

    @Test("records tickets once, skips unknown devices, and returns due ones oldest first")
    func recordAndDue() async throws {
        try await TestDatabase.withFresh { db in
            let a = try await db.registerDevice("u1", "expo", "ExponentPushToken[a]")
            let b = try await db.registerDevice("u2", "expo", "ExponentPushToken[b]")
            let store = PostgresExpoReceiptStore(pool: db.pool)
            let tricky =
                #"{"to":"ExponentPushToken[a]","title":"Say \"hi\" \\ é 👋","data":{"k":"v"},"expiration":1800007200}"#
            try await store.record([
                Self.ticket("t-late", device: a, checkAfter: 1000),
                Self.ticket("t-early", device: b, job: 7, message: tricky, checkAfter: 900),
                Self.ticket("t-ghost", device: 999_999),
            ])
            try await store.record([Self.ticket("t-early", device: a, job: 8)])  // duplicate id: ignored
            #expect(try await db.int("SELECT count(*) FROM herald.expo_tickets") == 2)

            #expect(try await store.due(at: Self.t0.addingTimeInterval(899), limit: 10).isEmpty)
            let due = try await store.due(at: Self.t0.addingTimeInterval(2000), limit: 10)
            #expect(due.map(\.ticketID) == ["t-early", "t-late"])
            let early = try #require(due.first)
            #expect(early.deviceID == b)
            #expect(early.jobID == 7)
            #expect(early.appID == "club")
            #expect(early.attempt == 1)
            #expect(early.sentAt == Self.t0)
            #expect(early.checkAt == Self.t0.addingTimeInterval(900))
            #expect(Self.object(early.messageJSON) == Self.object(tricky))
            #expect(try await store.due(at: Self.t0.addingTimeInterval(2000), limit: 1).map(\.ticketID) == ["t-early"])
        }
    }

    @Test("settles every resolution in one statement and disables dead devices")
    func settle() async throws {
        try await TestDatabase.withFresh { db in
            var devices: [Int64] = []
            for i in 0..<6 { devices.append(try await db.registerDevice("u\(i)", "expo", "ExponentPushToken[d\(i)]")) }
            let store = PostgresExpoReceiptStore(pool: db.pool)
            try await store.record((0..<6).map { Self.ticket("t\($0)", device: devices[$0]) })
            let later = Self.t0.addingTimeInterval(3000)
            var replacement = Self.ticket("t4-resent", device: devices[4], attempt: 2, checkAfter: 2500)
            replacement.sentAt = Self.t0.addingTimeInterval(900)
            try await store.settle([
                ExpoTicketUpdate(ticketID: "t0", deviceID: devices[0], resolution: .ok),
                ExpoTicketUpdate(
                    ticketID: "t1",
                    deviceID: devices[1],
                    resolution: .failed(reason: .invalidCredentials)
                ),
                ExpoTicketUpdate(ticketID: "t2", deviceID: devices[2], resolution: .deviceNotRegistered),
                ExpoTicketUpdate(ticketID: "t3", deviceID: devices[3], resolution: .recheck(at: later)),
                ExpoTicketUpdate(ticketID: "t4", deviceID: devices[4], resolution: .resent(replacement: replacement)),
                ExpoTicketUpdate(ticketID: "t5", deviceID: devices[5], resolution: .expired),
            ])
            let rows = try await db.rows(
                "SELECT ticket_id, status, coalesce(error, ''), attempt::text FROM herald.expo_tickets ORDER BY ticket_id"
            )
            #expect(
                rows.map { $0.map { $0 ?? "" } } == [
                    ["t1", "error", "invalid_credentials", "1"],
                    ["t2", "error", "device_not_registered", "1"],
                    ["t3", "pending", "", "1"],
                    ["t4-resent", "pending", "", "2"],
                    ["t5", "expired", "", "1"],
                ]
            )
            #expect(
                try await db.scalar("SELECT disabled_reason FROM herald.devices WHERE id = \(devices[2])")
                    == "device_not_registered"
            )
            #expect(try await db.int("SELECT count(*) FROM herald.devices WHERE NOT active") == 1)
            // What a receipt changed is in the job's history (herald explain): errors, the dead
            // device, the resend and the missing receipt; an ok or a recheck adds nothing.
            let logged = try await db.rows(
                "SELECT device_id::text, event, outcome, status, reason FROM herald.delivery_log ORDER BY device_id"
            )
            #expect(
                logged == [
                    ["\(devices[1])", "receipt", "error", "done", "invalid_credentials"],
                    ["\(devices[2])", "receipt", "token_invalid", "done", "device_not_registered"],
                    ["\(devices[4])", "receipt", "retry", "done", "resent"],
                    ["\(devices[5])", "receipt", "no_receipt", "done", "receipt_expired"],
                ]
            )
            // Rechecked and resent tickets come due again at their new times.
            #expect(try await store.due(at: Self.t0.addingTimeInterval(2000), limit: 10).isEmpty)
            #expect(try await store.due(at: later, limit: 10).map(\.ticketID) == ["t4-resent", "t3"])

            // Settled rows are pruned after their retention; pending ones never.
            #expect(try await store.prune(olderThan: .seconds(3600), limit: 100) == 0)
            try await db.exec(
                "UPDATE herald.expo_tickets SET settled_at = now() - interval '2 hours' WHERE settled_at IS NOT NULL"
            )
            #expect(try await store.prune(olderThan: .seconds(3600), limit: 100) == 3)
            #expect(try await db.int("SELECT count(*) FROM herald.expo_tickets WHERE status = 'pending'") == 2)
        }
    }

    @Test("a deleted device takes its tickets with it")
    func cascade() async throws {
        try await TestDatabase.withFresh { db in
            let a = try await db.registerDevice("u1", "expo", "ExponentPushToken[a]")
            let store = PostgresExpoReceiptStore(pool: db.pool)
            try await store.record([Self.ticket("t1", device: a)])
            try await db.exec("DELETE FROM herald.devices WHERE id = \(a)")
            #expect(try await db.int("SELECT count(*) FROM herald.expo_tickets") == 0)
        }
    }
}
