import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// Seed 001 (a sports club: web service-worker push + iOS), replayed end to end through the worker.
@Suite("Seed 001 sports club: payload schema and the preference model")
struct Seed001SportsClubTests {
    /// The three event types of the seed, each with its default route.
    static func addEventTypes(_ db: TestDatabase, ttl: String = "1 day") async throws {
        try await db.addSeedCategory("scheduled_match_new", ttl: ttl, defaultRoute: "/schema")
        try await db.addSeedCategory("availability_poll_reminder", ttl: ttl, defaultRoute: "/schema")
        try await db.addSeedCategory("admin_announcement", ttl: ttl, defaultRoute: "/")
    }

    static let webPushKeys = #"{"p256dh": "BOr2XqS5f0rVbK3dQYkqW7c1pZ8w", "auth": "k1Xy2Zq3"}"#

    static func payload(_ eventType: String, title: String = "Ny match i schemat") -> String {
        """
        {"eventType": "\(eventType)", "title": "\(title)", "body": "Tisdag 19:00 på PDL Center.",
         "metadata": {"matchId": "m-81"}}
        """
    }

    @Test("seed 001 payload schema: data carries eventType, route, metadata and sentAtIso to web push and iOS")
    func payloadSchema() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.addEventTypes(db)
            try await db.registerDevice("player", "webpush", "https://push.example/sub/1", options: Self.webPushKeys)
            try await db.registerDevice("player", "apns", "player-iphone")
            let withRoute = try #require(
                try await db.enqueueJSON(
                    "player",
                    "scheduled_match_new",
                    payload: """
                        {"eventType": "scheduled_match_new", "title": "Ny match i schemat", "body": "Tisdag 19:00 på PDL Center.",
                         "route": "/schema/m-81", "metadata": {"matchId": "m-81"}}
                        """
                )
            )
            let defaultRoute = try #require(
                try await db.enqueueJSON(
                    "player",
                    "admin_announcement",
                    payload:
                        #"{"eventType": "admin_announcement", "title": "Underhåll", "body": "Appen är nere i kväll."}"#
                )
            )
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(
                providers: ProviderRegistry([.webpush: provider, .apns: provider]),
                clock: clock
            )
            #expect(try await consumer.runOnce() == 2)

            let sentAt = Dispatcher.iso8601(clock.now())
            for token in ["https://push.example/sub/1", "player-iphone"] {
                let sent = provider.sent(to: token)
                #expect(sent.map(\.jobID) == [withRoute, defaultRoute])
                let match = try #require(sent.first)
                #expect(match.title == "Ny match i schemat")
                #expect(match.body == "Tisdag 19:00 på PDL Center.")
                #expect(match.data["eventType"] == "scheduled_match_new")
                #expect(match.data["route"] == "/schema/m-81")
                #expect(match.metadata == ["matchId": "m-81"])
                #expect(match.data["sentAtIso"] == sentAt)
                // Without a route the event type's default applies (the seed's table: admin_announcement → "/").
                let announcement = try #require(sent.last)
                #expect(announcement.data["eventType"] == "admin_announcement")
                #expect(announcement.data["route"] == "/")
                #expect(announcement.route == "/")
                #expect(announcement.data["sentAtIso"] == sentAt)
            }
            #expect(sentAt.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil)
        }
    }

    @Test("seed 001 delivery rules 1–2: enabled=false mutes all, eventToggles mutes one event type")
    func enabledAndEventToggles() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.addEventTypes(db)
            try await db.setPreferences(
                "muted",
                """
                {"enabled": false, "eventToggles": {"scheduled_match_new": true, "availability_poll_reminder": true,
                 "admin_announcement": true}, "quietHours": {"enabled": false, "startHour": 22, "endHour": 7}}
                """
            )
            try await db.setPreferences(
                "no-polls",
                """
                {"enabled": true, "eventToggles": {"scheduled_match_new": true, "availability_poll_reminder": false,
                 "admin_announcement": true}, "quietHours": {"enabled": false, "startHour": 22, "endHour": 7}}
                """
            )
            // "defaults" has no row yet (first sign-in): everything is on.
            for user in ["muted", "no-polls", "defaults"] {
                try await db.registerDevice(user, "apns", "\(user)-iphone")
            }
            let users = ["muted", "no-polls", "defaults"]
            for type in ["scheduled_match_new", "availability_poll_reminder", "admin_announcement"] {
                #expect(try await db.enqueueManyJSON(users, type, payload: Self.payload(type)) == 3)
            }
            let jobs = try await users.asyncMap { try await db.jobIDs($0) }
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 9)

            // Rule 1: enabled=false mutes every event type.
            #expect(provider.sent(to: "muted-iphone").isEmpty)
            for job in jobs[0] {
                #expect(try await db.decisions(job) == [["suppressed", "suppressed", "disabled_by_user"]])
            }
            // Rule 2: only the toggled-off event type is muted.
            #expect(
                provider.sent(to: "no-polls-iphone").map { $0.data["eventType"] }
                    == ["scheduled_match_new", "admin_announcement"]
            )
            #expect(try await db.decisions(jobs[1][1]) == [["suppressed", "suppressed", "category_muted"]])
            #expect(provider.sent(to: "defaults-iphone").count == 3)
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE user_id = 'muted'") == 0)
        }
    }

    @Test(
        "seed 001 delivery rule 3: quiet hours (startHour 22, endHour 7) in the user's time zone delay delivery to the quiet-hour end"
    )
    func quietHoursDeferToEnd() async throws {
        try await TestDatabase.withFresh { db in
            // Held jobs wait until tomorrow morning: give them a TTL that outlives the night.
            try await Self.addEventTypes(db, ttl: "3 days")
            try await db.setPreferences(
                "sleeper",
                """
                {"enabled": true, "quietHours": {"enabled": true, "startHour": 22, "endHour": 7},
                 "timeZone": "Europe/Stockholm"}
                """
            )
            try await db.setPreferences(
                "night-owl",
                """
                {"enabled": true, "quietHours": {"enabled": false, "startHour": 22, "endHour": 7},
                 "timeZone": "Europe/Stockholm"}
                """
            )
            // Same window, but in New York it is late afternoon when it is 23:30 in Stockholm.
            try await db.setPreferences(
                "new-yorker",
                """
                {"enabled": true, "quietHours": {"enabled": true, "startHour": 22, "endHour": 7},
                 "timeZone": "America/New_York"}
                """
            )
            for user in ["sleeper", "night-owl", "new-yorker"] {
                try await db.registerDevice(user, "webpush", "https://push.example/\(user)", options: Self.webPushKeys)
            }
            // No zone in the preferences: the iPhone's registered zone applies.
            try await db.setPreferences(
                "device-zone",
                #"{"quietHours": {"enabled": true, "startHour": 22, "endHour": 7}}"#
            )
            try await db.registerDevice(
                "device-zone",
                "apns",
                "device-zone-iphone",
                options: #"{"timeZone": "Europe/Stockholm"}"#
            )
            #expect(
                try await db.enqueueManyJSON(
                    ["sleeper", "night-owl", "new-yorker", "device-zone"],
                    "availability_poll_reminder",
                    payload: Self.payload("availability_poll_reminder", title: "Svara på omröstningen")
                ) == 4
            )
            let held = try #require(try await db.jobIDs("sleeper").first)
            let heldByDeviceZone = try #require(try await db.jobIDs("device-zone").first)

            let night = try await db.localInstant("23:30", daysAhead: 1, zone: "Europe/Stockholm")
            let morning = try await db.localInstant("07:00", daysAhead: 2, zone: "Europe/Stockholm")
            let provider = ScriptedProvider()
            let clock = ManualClock(night)
            let consumer = db.consumer(
                providers: ProviderRegistry([.webpush: provider, .apns: provider]),
                clock: clock
            )
            #expect(try await consumer.runOnce() == 4)
            #expect(provider.sent.map(\.device.userID).sorted() == ["new-yorker", "night-owl"])
            for job in [held, heldByDeviceZone] {
                #expect(try await db.decisions(job) == [["deferred", "pending", "quiet_hours"]])
                // Held until the quiet-hour end, 07:00 Stockholm time.
                #expect(try await db.instant("SELECT run_at FROM herald.outbox WHERE id = \(job)") == morning)
            }

            clock.set(morning - 60)
            #expect(try await consumer.runOnce() == 0)
            clock.set(morning + 1)
            #expect(try await consumer.runOnce() == 2)
            #expect(provider.sent(to: "device-zone-iphone").count == 1)
            let delivered = try #require(provider.sent(to: "https://push.example/sleeper").first)
            #expect(delivered.title == "Svara på omröstningen")
            #expect(delivered.data["eventType"] == "availability_poll_reminder")
            #expect(delivered.data["sentAtIso"] == Dispatcher.iso8601(morning + 1))
            #expect(
                try await db.decisions(held) == [["deferred", "pending", "quiet_hours"], ["attempt", "done", "ok"]]
            )
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }
}
