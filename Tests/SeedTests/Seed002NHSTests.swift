import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// Seed 002 (an NHS chapter app on Expo push, iOS + Android), replayed end to end through the worker.
@Suite("Seed 002 NHS: org fan-out, dedup, quotas, BLE capability, mute, summaries, dead Expo tokens")
struct Seed002NHSTests {
    static func expo(_ name: String) -> String { "ExponentPushToken[\(name)]" }

    static func announcement(_ id: Int, org: String = "org-1") -> String {
        """
        {"title": "Chapter meeting #\(id)", "body": "Tonight 19:00 in room 4", "route": "/announcements?highlight=\(id)",
         "metadata": {"type": "announcement", "itemId": "\(id)", "orgId": "\(org)"}}
        """
    }

    @Test(
        "seed 002 req 1.1–1.4, 9.2, 12.2: org-wide fan-out with enqueue_many, 1-hour dedup, dead Expo tokens disable the device"
    )
    func fanOutDedupDeadTokens() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "announcement",
                dedupWindow: "1 hour",
                androidChannel: "announcements",
                defaultRoute: "/announcements"
            )
            try await db.registerDevice("m1", "expo", Self.expo("m1-ios"))
            try await db.registerDevice("m2", "expo", Self.expo("m2-android"))
            let m3Old = try await db.registerDevice("m3", "expo", Self.expo("m3-old-phone"))
            try await db.registerDevice("m3", "expo", Self.expo("m3-new-phone"))
            let m4Only = try await db.registerDevice("m4", "expo", Self.expo("m4-uninstalled"))
            let members = ["m1", "m2", "m3", "m4"]
            let provider = ScriptedProvider()
            provider.answer(
                Self.expo("m3-old-phone"),
                with: DeliveryOutcome(.tokenInvalid, reason: .deviceNotRegistered)
            )
            provider.answer(
                Self.expo("m4-uninstalled"),
                with: DeliveryOutcome(.tokenInvalid, reason: .deviceNotRegistered)
            )

            // Req 1.1 + 2.5: one set-based fan-out to the whole organization (a duplicate member counts once).
            let key = #"{"dedupKey": "announcement:55", "scope": "org-1"}"#
            #expect(
                try await db.enqueueManyJSON(
                    members + ["m1"],
                    "announcement",
                    payload: Self.announcement(55),
                    options: key
                ) == 4
            )
            // Req 12.2: the same announcement again within the hour is not enqueued for anyone.
            #expect(
                try await db.enqueueManyJSON(members, "announcement", payload: Self.announcement(55), options: key) == 0
            )
            #expect(try await db.enqueueJSON("m2", "announcement", payload: Self.announcement(55), options: key) == nil)
            #expect(
                try await db.scalar(
                    "SELECT bool_and(expires_at - created_at = interval '1 hour') FROM herald.dedup_keys"
                ) == "t"
            )
            let m3Job = try #require(try await db.jobIDs("m3").first)
            let m4Job = try #require(try await db.jobIDs("m4").first)

            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 4)
            #expect(provider.sent.count == 5)
            // Req 1.2–1.4, 10.1: title, preview, deep link with the item highlighted, type/item/org in the data.
            let m1 = try #require(provider.sent(to: Self.expo("m1-ios")).first)
            #expect(m1.title == "Chapter meeting #55")
            #expect(m1.route == "/announcements?highlight=55")
            #expect(m1.metadata == ["type": "announcement", "itemId": "55", "orgId": "org-1"])
            #expect(m1.androidChannel == "announcements")
            // Req 9.2: dead tokens are disabled at once; a member with another phone still gets it.
            #expect(
                try await db.rows(
                    "SELECT id, active, disabled_reason FROM herald.devices WHERE NOT active ORDER BY id"
                )
                    == [["\(m3Old)", "f", "device_not_registered"], ["\(m4Only)", "f", "device_not_registered"]]
            )
            #expect(
                try await db.rows(
                    "SELECT outcome, status FROM herald.delivery_log WHERE job_id = \(m3Job) AND event = 'attempt' ORDER BY device_id"
                )
                    == [["token_invalid", "done"], ["accepted", "done"]]
            )
            #expect(
                try await db.decisions(m4Job) == [
                    ["attempt", "suppressed", "device_not_registered"],
                    ["suppressed", "suppressed", "no_active_device"],
                ]
            )

            // An hour later the key is free again; the disabled tokens are never tried again.
            try await db.exec("UPDATE herald.dedup_keys SET expires_at = now() - interval '1 second'")
            #expect(
                try await db.enqueueManyJSON(members, "announcement", payload: Self.announcement(55), options: key) == 4
            )
            let m4Again = try #require(try await db.jobIDs("m4").first)
            clock.catchUp()
            #expect(try await consumer.runOnce() == 4)
            #expect(provider.sent.count == 8)
            #expect(provider.sent(to: Self.expo("m3-old-phone")).count == 1)
            #expect(provider.sent(to: Self.expo("m4-uninstalled")).count == 1)
            #expect(try await db.decisions(m4Again) == [["suppressed", "suppressed", "no_active_device"]])
        }
    }

    @Test("seed 002 req 12.1: at most 10 announcements per day per organization (rate_limit perScope, option scope)")
    func perOrganizationQuota() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "announcement",
                rateLimit: #"{"perScope": {"max": 10, "windowSeconds": 86400}, "over": "suppress"}"#
            )
            try await db.registerDevice("member", "expo", Self.expo("member"))
            var ids: [Int64] = []
            for i in 1...12 {
                // The 6th comes from another organization the member also belongs to.
                let org = i == 6 ? "org-2" : "org-1"
                ids.append(
                    try #require(
                        try await db.enqueueJSON(
                            "member",
                            "announcement",
                            payload: Self.announcement(i, org: org),
                            options: #"{"scope": "\#(org)"}"#
                        )
                    )
                )
            }
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 12)

            // Ten from org-1 and the one from org-2 go out; org-1's eleventh is over its daily quota.
            #expect(provider.sent.count == 11)
            #expect(provider.sent.filter { $0.metadata["orgId"] == "org-1" }.count == 10)
            #expect(provider.sent.filter { $0.metadata["orgId"] == "org-2" }.count == 1)
            #expect(try await db.decisions(ids[11]) == [["suppressed", "suppressed", "scope_quota"]])
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE scope = 'org-1'") == 10)

            // A day later org-1 has room again.
            try await db.exec("UPDATE herald.inbox SET created_at = created_at - interval '1 day 1 minute'")
            let tomorrow = try #require(
                try await db.enqueueJSON(
                    "member",
                    "announcement",
                    payload: Self.announcement(13),
                    options: #"{"scope": "org-1"}"#
                )
            )
            clock.catchUp()
            #expect(try await consumer.runOnce() == 1)
            #expect(try await db.decisions(tomorrow) == [["attempt", "done", "ok"]])
        }
    }

    @Test("seed 002 req 4.1–4.5, 13.1: BLE sessions go out high priority, only to devices with Bluetooth enabled")
    func bleCapabilityFilter() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("ble_session", priority: "high", defaultRoute: "/attendance/ble?autoscan=1")
            try await db.registerDevice("m1", "expo", Self.expo("m1"), options: #"{"attributes": {"bluetooth": true}}"#)
            try await db.registerDevice(
                "m2",
                "expo",
                Self.expo("m2"),
                options: #"{"attributes": {"bluetooth": false}}"#
            )
            try await db.registerDevice("m3", "expo", Self.expo("m3"))
            try await db.registerDevice(
                "m4",
                "expo",
                Self.expo("m4-phone"),
                options: #"{"attributes": {"bluetooth": true}}"#
            )
            try await db.registerDevice(
                "m4",
                "expo",
                Self.expo("m4-tablet"),
                options: #"{"attributes": {"bluetooth": false}}"#
            )
            #expect(
                try await db.enqueueManyJSON(
                    ["m1", "m2", "m3", "m4"],
                    "ble_session",
                    payload: """
                        {"title": "Check-in open: Food drive", "body": "Session runs 15 minutes. Open now to check in",
                         "metadata": {"type": "ble_session", "itemId": "s-9", "orgId": "org-1"}}
                        """,
                    options: #"{"requires": {"bluetooth": true}}"#
                ) == 4
            )
            let m2Job = try #require(try await db.jobIDs("m2").first)
            let m3Job = try #require(try await db.jobIDs("m3").first)
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 4)

            #expect(provider.sent.map(\.device.token).sorted() == [Self.expo("m1"), Self.expo("m4-phone")])
            #expect(provider.sent.allSatisfy { $0.priority == .high && $0.route == "/attendance/ble?autoscan=1" })
            #expect(try await db.decisions(m2Job) == [["suppressed", "suppressed", "no_capable_device"]])
            #expect(try await db.decisions(m3Job) == [["suppressed", "suppressed", "no_capable_device"]])
        }
    }

    @Test("seed 002 req 12.4: mute for 1 hour via mutedUntil; notifications flow again afterwards")
    func muteForAnHour() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("volunteer_hours", defaultRoute: "/volunteer-hours")
            try await db.registerDevice("member", "expo", Self.expo("member"))
            // The app writes the end of the mute as JavaScript's toISOString() does.
            try await db.exec(
                """
                INSERT INTO herald.preferences (user_id, preferences)
                SELECT 'member', jsonb_build_object('mutedUntil',
                    to_char((now() + interval '1 hour') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                """
            )
            let mutedUntil = try await db.instant(
                "SELECT (preferences->>'mutedUntil')::timestamptz FROM herald.preferences"
            )
            let payload =
                #"{"title": "Volunteer hours approved", "body": "3 hours at the food bank", "metadata": {"itemId": "r-1"}}"#
            let muted = try #require(try await db.enqueueJSON("member", "volunteer_hours", payload: payload))
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.isEmpty)
            #expect(try await db.decisions(muted) == [["suppressed", "suppressed", "muted_until"]])

            let later = try #require(try await db.enqueueJSON("member", "volunteer_hours", payload: payload))
            clock.set(mutedUntil + 1)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.map(\.jobID) == [later])
            #expect(try await db.decisions(later) == [["attempt", "done", "ok"]])
        }
    }

    @Test("seed 002 req 12.5: more than 5 pending become one summary; 5 pending still go out one by one")
    func summaryAboveFivePending() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "event",
                coalesce: """
                    {"summarizeAbove": 5, "summaryTitle": "New chapter events",
                     "summaryBody": "{count} new events in your chapter", "summaryRoute": "/events"}
                    """
            )
            try await db.registerDevice("five", "expo", Self.expo("five"))
            try await db.registerDevice("six", "expo", Self.expo("six"))
            for i in 1...6 {
                let users = i <= 5 ? ["five", "six"] : ["six"]
                #expect(
                    try await db.enqueueManyJSON(
                        users,
                        "event",
                        payload:
                            #"{"title": "Event #\#(i)", "body": "Saturday 10:00, town hall", "route": "/events/\#(i)"}"#
                    )
                        == users.count
                )
            }
            let fiveJobs = try await db.jobIDs("five")
            let sixJobs = try await db.jobIDs("six")
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 11)

            // Five pending is not "more than 5": each event is its own notification.
            #expect(provider.sent(to: Self.expo("five")).map(\.title) == (1...5).map { "Event #\($0)" })
            for job in fiveJobs {
                #expect(try await db.decisions(job) == [["attempt", "done", "ok"]])
            }
            // Six pending: none goes alone; they fold into one summary.
            #expect(provider.sent(to: Self.expo("six")).isEmpty)
            for job in sixJobs {
                let log = try await db.decisions(job)
                #expect(log.count == 1 && log.first?[0] == "summarized" && log.first?[1] == "summarized")
            }
            let summary = try #require(try await db.openSummary("six"))
            #expect(summary.count == 6)
            #expect(try await consumer.runOnce() == 1)
            let sent = provider.sent(to: Self.expo("six"))
            #expect(sent.count == 1)
            #expect(sent.first?.title == "New chapter events")
            #expect(sent.first?.body == "6 new events in your chapter")
            #expect(sent.first?.route == "/events")
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }
}
