import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// Seed 004 (a transit journey planner: FCM/APNs + web), replayed end to end through the worker.
@Suite("Seed 004 transit: scheduled departures, quiet hours, rate limits, rapid updates, fallback, sync")
struct Seed004TransitTests {
    static func departure(_ destination: String, minutes: Int = 10) -> String {
        """
        {"title": "Time to leave for \(destination)", "body": "Leave now to catch 4 at Odenplan in \(minutes) minutes",
         "route": "/journeys/81", "metadata": {"journeyId": "81", "crowding": "low", "arrival": "08:42"}}
        """
    }

    @Test(
        "seed 004 departure delivery: a scheduled departure (deliverAt) is held until due; a stale one past expiresAt is dropped"
    )
    func scheduledAndExpiredDepartures() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "departure_alert",
                priority: "high",
                apnsCategory: "DEPARTURE",
                androidChannel: "departure_alerts"
            )
            try await db.registerDevice("rider", "fcm", "rider-android")
            let start = SystemClock().now()
            let scheduled = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "departure_alert",
                    payload: Self.departure("Work"),
                    options: #"{"deliverAt": "\#(iso(start + 1_200))", "dedupKey": "journey:81:2026-11-23"}"#
                )
            )
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 0)
            clock.set(start + 1_190)
            #expect(try await consumer.runOnce() == 0)

            // Meanwhile a connection alert whose train leaves in 5 minutes is queued, but the worker
            // only gets to it after the train has left.
            let stale = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "departure_alert",
                    payload: Self.departure("the airport", minutes: 5),
                    options: #"{"expiresAt": "\#(iso(SystemClock().now() + 300))"}"#
                )
            )
            clock.set(start + 1_201)
            #expect(try await consumer.runOnce() == 2)
            #expect(provider.sent.map(\.jobID) == [scheduled])
            let sent = try #require(provider.sent.first)
            #expect(sent.title == "Time to leave for Work")
            #expect(sent.route == "/journeys/81")
            #expect(sent.actionCategory == "DEPARTURE")  // Start Journey / Snooze 5 min / Cancel
            #expect(sent.androidChannel == "departure_alerts")
            #expect(sent.priority == .high)
            #expect(sent.metadata["crowding"] == "low")
            #expect(try await db.decisions(scheduled) == [["attempt", "done", "ok"]])
            #expect(try await db.decisions(stale) == [["expired", "expired", "expired_before_delivery"]])
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test(
        "seed 004 quiet hours: regular updates queue until the window ends and arrive as one summary; critical delays still go out"
    )
    func quietHoursQueueThenSummary() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "journey_update",
                quietHours: "defer",
                coalesce: """
                    {"summarizeAbove": 3, "summaryTitle": "While quiet hours were on",
                     "summaryBody": "{count} journey updates", "summaryRoute": "/journeys"}
                    """,
                ttl: "3 days"
            )
            try await db.addSeedCategory("critical_delay", priority: "critical", ttl: "3 days", sound: "urgent.caf")
            try await db.setPreferences(
                "commuter",
                """
                {"quietHours": {"enabled": true, "start": "22:00", "end": "07:00"}, "timeZone": "Europe/London"}
                """
            )
            try await db.registerDevice("commuter", "fcm", "commuter-android")
            var updates: [Int64] = []
            for i in 1...5 {
                updates.append(
                    try #require(
                        try await db.enqueueJSON(
                            "commuter",
                            "journey_update",
                            payload:
                                #"{"title": "Journey 81 update \#(i)", "body": "Platform changed to \#(i)", "route": "/journeys/81"}"#
                        )
                    )
                )
            }
            let critical = try #require(
                try await db.enqueueJSON(
                    "commuter",
                    "critical_delay",
                    payload:
                        #"{"title": "Train cancelled", "body": "Your 06:50 is cancelled. New plan: bus 4 at 06:40", "route": "/journeys/81/alternatives"}"#
                )
            )

            let night = try await db.localInstant("23:30", daysAhead: 1, zone: "Europe/London")
            let end = try await db.localInstant("07:00", daysAhead: 2, zone: "Europe/London")
            let provider = ScriptedProvider()
            let clock = ManualClock(night)
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 6)
            // The critical delay goes out at once; regular updates are queued for the window's end.
            #expect(provider.sent.map(\.jobID) == [critical])
            for job in updates {
                #expect(try await db.decisions(job) == [["deferred", "pending", "quiet_hours"]])
                #expect(try await db.instant("SELECT run_at FROM herald.outbox WHERE id = \(job)") == end)
            }

            clock.set(end - 1)
            #expect(try await consumer.runOnce() == 0)
            clock.set(end + 1)
            // Five queued updates are more than the category's threshold (3): no flood at 07:00…
            #expect(try await consumer.runOnce() == 5)
            #expect(provider.sent.count == 1)
            for job in updates {
                #expect(try await db.decisions(job).last?[0] == "summarized")
            }
            // …but one summary.
            let summary = try #require(try await db.openSummary("commuter"))
            #expect(summary.count == 5)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.count == 2)
            let morning = try #require(provider.sent.last)
            #expect(morning.title == "While quiet hours were on")
            #expect(morning.body == "5 journey updates")
            #expect(morning.route == "/journeys")
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test(
        "seed 004 rate limiting: more than 5 in 10 minutes throttles normal-priority notifications; urgent ones pass; throttling is logged"
    )
    func perUserRateLimit() async throws {
        try await TestDatabase.withFresh { db in
            let limit = #"{"perUser": {"max": 5, "windowSeconds": 600}}"#
            try await db.addSeedCategory("journey_update", rateLimit: limit)
            try await db.addSeedCategory("delay_urgent", priority: "high", rateLimit: limit)
            try await db.registerDevice("rider", "apns", "rider-iphone")
            for i in 1...5 {
                try await db.enqueueJSON(
                    "rider",
                    "journey_update",
                    payload: #"{"title": "Update \#(i)", "body": "Journey 81 on time"}"#
                )
            }
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 5)
            #expect(provider.sent.count == 5)

            // Within the same 10 minutes: a sixth regular update, and an urgent delay.
            let sixth = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "journey_update",
                    payload: #"{"title": "Update 6", "body": "Journey 81 on time"}"#
                )
            )
            let urgent = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "delay_urgent",
                    payload: #"{"title": "Delay detected", "body": "Leave 12 minutes later", "route": "/journeys/81"}"#
                )
            )
            clock.catchUp()
            #expect(try await consumer.runOnce() == 2)
            #expect(provider.sent.count == 6)
            #expect(provider.sent.last?.jobID == urgent)
            #expect(try await db.decisions(urgent) == [["attempt", "done", "ok"]])
            #expect(try await db.decisions(sixth) == [["summarized", "summarized", "rate_limited"]])
            // The throttled one waits for a free slot in the window, then goes out as itself.
            let held = try #require(try await db.openSummary("rider"))
            #expect(held.count == 1)
            #expect(held.runAt > clock.now() && held.runAt <= clock.now() + 600)
            clock.set(held.runAt - 1)
            #expect(try await consumer.runOnce() == 0)
            clock.set(held.runAt + 1)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.count == 7)
            #expect(provider.sent.last?.title == "Update 6")
            #expect(provider.sent.last?.data["summaryCount"] == nil)
        }
    }

    @Test(
        "seed 004 rapid updates: delays within 2 minutes become one 'Multiple updates received' notification with the latest timing"
    )
    func trailingCoalescing() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("delay_update", coalesce: #"{"mode": "trailing", "windowSeconds": 120}"#)
            try await db.registerDevice("rider", "fcm", "rider-android")
            func delay(_ minutes: Int) -> String {
                #"{"title": "Delay on journey 81", "body": "Leave \#(minutes) minutes later", "route": "/journeys/81"}"#
            }
            let options = #"{"coalesceKey": "journey:81"}"#
            let provider = ScriptedProvider()
            let clock = ManualClock()
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider]), clock: clock)
            var jobs: [Int64] = []
            var due = Date(timeIntervalSince1970: 0)
            for minutes in [4, 7, 12] {
                jobs.append(
                    try #require(
                        try await db.enqueueJSON("rider", "delay_update", payload: delay(minutes), options: options)
                    )
                )
                clock.catchUp()
                #expect(try await consumer.runOnce() == 1)
                #expect(provider.sent.isEmpty)
                let summary = try #require(try await db.openSummary("rider"))
                // Every new delay restarts the 2-minute wait.
                #expect(abs(summary.runAt.timeIntervalSince(clock.now() + 120)) < 0.01)
                due = summary.runAt
                clock.advance(by: 50)
                #expect(try await consumer.runOnce() == 0)
            }
            for job in jobs {
                #expect(try await db.decisions(job) == [["summarized", "summarized", "debounced"]])
            }
            #expect(try await db.openSummary("rider")?.count == 3)
            clock.set(due + 0.01)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.count == 1)
            let sent = try #require(provider.sent.first)
            #expect(sent.title == "Delay on journey 81")
            #expect(sent.body == "Multiple updates received: Leave 12 minutes later")
            #expect(sent.data["summaryCount"] == "3")
            #expect(
                try await db.rows("SELECT body, summary_count FROM herald.inbox WHERE user_id = 'rider'")
                    == [["Multiple updates received: Leave 12 minutes later", "3"]]
            )
        }
    }

    @Test("seed 004 fallback: a rider whose only device is local gets a local notification; the log records the method")
    func localFallback() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("departure_alert", priority: "high")
            // Permission denied on the phone: the app only polls local notifications.
            let local = try await db.registerDevice("web-rider", "local", "web-rider-app")
            // A rider whose push token died keeps the local recording as the way the app shows it.
            let deadPush = try await db.registerDevice("phone-rider", "fcm", "phone-rider-dead")
            let phoneLocal = try await db.registerDevice("phone-rider", "local", "phone-rider-app")
            #expect(
                try await db.enqueueManyJSON(
                    ["web-rider", "phone-rider"],
                    "departure_alert",
                    payload: Self.departure("Work")
                ) == 2
            )
            let webJob = try #require(try await db.jobIDs("web-rider").first)
            let phoneJob = try #require(try await db.jobIDs("phone-rider").first)
            let fcm = ScriptedProvider()
            fcm.answer("phone-rider-dead", with: DeliveryOutcome(.tokenInvalid, reason: .unregistered))
            let fallback = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: fcm, .local: fallback]), clock: clock)
            #expect(try await consumer.runOnce() == 2)

            #expect(
                try await db.rows(
                    """
                    SELECT user_id, device_id, title, route, data->>'eventType', data->'metadata' IS NOT NULL
                    FROM herald.local_notifications ORDER BY user_id
                    """
                ) == [
                    ["phone-rider", "\(phoneLocal)", "Time to leave for Work", "/journeys/81", "departure_alert", "t"],
                    ["web-rider", "\(local)", "Time to leave for Work", "/journeys/81", "departure_alert", "t"],
                ]
            )
            #expect(
                try await db.rows(
                    "SELECT provider, outcome, status, reason FROM herald.delivery_log WHERE job_id = \(webJob)"
                )
                    == [["local", "accepted", "done", "recorded"]]
            )
            #expect(
                try await db.rows(
                    "SELECT provider, device_id, outcome, status FROM herald.delivery_log WHERE job_id = \(phoneJob) ORDER BY device_id"
                )
                    == [
                        ["fcm", "\(deadPush)", "token_invalid", "done"],
                        ["local", "\(phoneLocal)", "accepted", "done"],
                    ]
            )
            #expect(try await db.scalar("SELECT active FROM herald.devices WHERE id = \(deadPush)") == "f")
        }
    }

    @Test(
        "seed 004 cross-platform sync: a notification dismissed on the phone is removed from the user's other devices"
    )
    func dismissSyncsOtherDevices() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("departure_alert", priority: "high")
            let phone = try await db.registerDevice("rider", "fcm", "rider-android")
            try await db.registerDevice("rider", "apns", "rider-ipad")
            try await db.registerDevice(
                "rider",
                "webpush",
                "https://push.example/rider",
                options: #"{"p256dh": "BOr2Xq", "auth": "k1Xy"}"#
            )
            let job = try #require(
                try await db.enqueueJSON("rider", "departure_alert", payload: Self.departure("Work"))
            )
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(
                providers: ProviderRegistry([.fcm: provider, .apns: provider, .webpush: provider]),
                clock: clock
            )
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.count == 3)
            let shownCollapse = try #require(provider.sent.first?.collapseID)
            let inboxID = try #require(try await db.scalar("SELECT id FROM herald.inbox WHERE job_id = \(job)"))

            #expect(try await db.int("SELECT herald.dismiss('rider', ARRAY[\(inboxID)]::bigint[], \(phone))") == 1)
            #expect(
                try await db.rows(
                    "SELECT read_at IS NOT NULL, deleted_at IS NOT NULL FROM herald.inbox WHERE id = \(inboxID)"
                )
                    == [["t", "t"]]
            )
            let sync = try #require(try await db.jobIDs("rider", category: "herald.sync").first)
            clock.catchUp()
            #expect(try await consumer.runOnce() == 1)
            let synced = provider.sent.filter { $0.jobID == sync }
            #expect(synced.map(\.device.token).sorted() == ["https://push.example/rider", "rider-ipad"])
            #expect(
                synced.allSatisfy {
                    $0.silent && $0.badge == 0
                        && $0.metadata == ["action": "dismiss", "ids": inboxID, "badge": "0"]
                }
            )
            #expect(shownCollapse == "herald-\(job)")
            #expect(try await db.decisions(sync) == [["attempt", "done", "ok"], ["attempt", "done", "ok"]])
        }
    }

    @Test(
        "seed 004 delay tiers and Android channels: minor delays update silently, significant ones notify, critical ones are urgent; marketing is opt-in"
    )
    func delayTiersChannelsOptIn() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("journey_update", androidChannel: "journey_updates")
            try await db.addSeedCategory("delay_alert", priority: "high", androidChannel: "delay_alerts")
            try await db.addSeedCategory("critical_delay", priority: "critical", androidChannel: "delay_alerts")
            try await db.addSeedCategory("marketing", priority: "low", optIn: true, androidChannel: "marketing")
            try await db.setPreferences("fan", #"{"eventToggles": {"marketing": true}}"#)
            try await db.registerDevice("rider", "fcm", "rider-android")
            try await db.registerDevice("fan", "fcm", "fan-android")
            let minor = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "journey_update",
                    payload:
                        #"{"title": "Journey 81 adjusted", "body": "Departure moved by 2 minutes", "metadata": {"delayMinutes": "2"}}"#,
                    options: #"{"silent": true}"#
                )
            )
            let significant = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "delay_alert",
                    payload: #"{"title": "Delay detected", "body": "Leave 6 minutes later"}"#
                )
            )
            let critical = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "critical_delay",
                    payload:
                        #"{"title": "You will miss your connection", "body": "New arrival 09:12. See alternatives"}"#
                )
            )
            #expect(
                try await db.enqueueManyJSON(
                    ["rider", "fan"],
                    "marketing",
                    payload: #"{"title": "Try our new app", "body": "Now with live maps"}"#
                ) == 2
            )
            let riderMarketing = try #require(try await db.jobIDs("rider", category: "marketing").first)
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 5)

            func one(_ job: Int64) throws -> PushMessage { try #require(provider.sent.first { $0.jobID == job }) }
            // Minor: a silent data update, no alert, no history row, no badge.
            let quiet = try one(minor)
            #expect(quiet.silent && quiet.interruptionLevel == nil)
            #expect(quiet.androidChannel == "journey_updates")
            #expect(quiet.metadata["delayMinutes"] == "2")
            // Significant: a notification on the delay channel.
            let notify = try one(significant)
            #expect(!notify.silent && notify.priority == .high && notify.androidChannel == "delay_alerts")
            #expect(notify.interruptionLevel == "time-sensitive")
            // Critical: urgent.
            let urgent = try one(critical)
            #expect(urgent.priority == .critical && urgent.interruptionLevel == "critical")
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE job_id = \(minor)") == 0)
            #expect(Set(provider.sent(to: "rider-android").filter { !$0.silent }.map(\.badge)) == [1, 2])
            // Marketing: only to the user who opted in, at low priority.
            #expect(try await db.decisions(riderMarketing) == [["suppressed", "suppressed", "not_opted_in"]])
            let ad = try #require(provider.sent(to: "fan-android").first)
            #expect(ad.priority == .low && ad.interruptionLevel == "passive" && ad.androidChannel == "marketing")
        }
    }

    @Test(
        "seed 004 cross-platform sync during quiet hours: a dismiss at night reaches the other devices at once (a silent sync alerts no one)"
    )
    func dismissSyncIgnoresQuietHours() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("critical_delay", priority: "critical")
            try await db.addSeedCategory("delay_update", priority: "normal")
            // Quiet hours that cover the present moment (UTC hour H until H+2).
            let hour = try await db.int("SELECT extract(hour FROM now() AT TIME ZONE 'UTC')::int")
            try await db.setPreferences(
                "rider",
                """
                {"quietHours": {"enabled": true, "startHour": \(hour), "endHour": \((hour + 2) % 24)}, "timeZone": "UTC"}
                """
            )
            let phone = try await db.registerDevice("rider", "fcm", "rider-android")
            try await db.registerDevice("rider", "apns", "rider-ipad")
            let job = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "critical_delay",
                    payload:
                        #"{"title": "Last train cancelled", "body": "Night bus N4 leaves 00:12", "route": "/journeys/81"}"#
                )
            )
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider, .apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.count == 2)  // critical: through quiet hours on both devices

            let inboxID = try #require(try await db.scalar("SELECT id FROM herald.inbox WHERE job_id = \(job)"))
            #expect(try await db.int("SELECT herald.dismiss('rider', ARRAY[\(inboxID)]::bigint[], \(phone))") == 1)
            let sync = try #require(try await db.jobIDs("rider", category: "herald.sync").first)
            // Proof that quiet hours are on: an ordinary update at the same moment is held.
            let update = try #require(
                try await db.enqueueJSON(
                    "rider",
                    "delay_update",
                    payload: #"{"title": "Delay", "body": "N4 is 3 minutes late"}"#
                )
            )
            clock.catchUp()
            #expect(try await consumer.runOnce() == 2)
            #expect(try await db.decisions(update) == [["deferred", "pending", "quiet_hours"]])
            // The iPad must drop the dismissed alert now, not at the end of the quiet hours.
            #expect(try await db.decisions(sync) == [["attempt", "done", "ok"]])
            #expect(provider.sent(to: "rider-ipad").last?.jobID == sync)
        }
    }
}
