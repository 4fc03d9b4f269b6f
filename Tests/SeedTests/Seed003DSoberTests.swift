import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// Seed 003 (DSober, designated drivers, iOS + Android), replayed end to end through the worker.
@Suite("Seed 003 DSober: safety-critical alerts, retries and in-app fallback, ride requests")
struct Seed003DSoberTests {
    static func sepAlert(_ driver: String) -> String {
        """
        {"title": "SEP failure: \(driver)", "body": "\(driver) failed SEP verification at Spring Formal, 23:28",
         "route": "/admin/alerts", "metadata": {"ddName": "\(driver)", "event": "Spring Formal"}}
        """
    }

    @Test(
        "seed 003 req 4.1–4.3, 8.2–8.4, 11.5: a mandatory critical SEP alert reaches an admin who disabled everything, during quiet hours"
    )
    func mandatoryCriticalBypassesPreferencesAndQuietHours() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "sep_failure",
                priority: "critical",
                mandatory: true,
                quietHours: "bypass",
                ttl: "3 days",
                sound: "sep_alarm.caf",
                defaultRoute: "/admin/alerts"
            )
            // A revocation is mandatory too, but "only" high priority: preferences and quiet hours still do not apply.
            try await db.addSeedCategory("dd_revoked", priority: "high", mandatory: true, ttl: "3 days")
            try await db.addSeedCategory("event_status", ttl: "3 days")
            // The admin turned everything off, even the SEP toggle, and sleeps 22:00–07:00 in Chicago.
            try await db.setPreferences(
                "admin",
                """
                {"enabled": false, "eventToggles": {"sep_failure": false, "dd_revoked": false, "event_status": false},
                 "quietHours": {"enabled": true, "start": "22:00", "end": "07:00"}, "timeZone": "America/Chicago"}
                """
            )
            try await db.registerDevice("admin", "apns", "admin-iphone")
            try await db.registerDevice("admin", "fcm", "admin-android")
            let sep = try #require(try await db.enqueueJSON("admin", "sep_failure", payload: Self.sepAlert("Max")))
            let revoked = try #require(
                try await db.enqueueJSON(
                    "admin",
                    "dd_revoked",
                    payload:
                        #"{"title": "DD status revoked", "body": "Reason: missed check-in. Contact Alex (admin).", "route": "/session"}"#
                )
            )
            let status = try #require(
                try await db.enqueueJSON(
                    "admin",
                    "event_status",
                    payload: #"{"title": "Spring Formal is now active", "body": "Drive safe"}"#
                )
            )

            let night = try await db.localInstant("23:30", daysAhead: 1, zone: "America/Chicago")
            let provider = ScriptedProvider()
            let clock = ManualClock(night)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider, .fcm: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 3)

            #expect(try await db.decisions(sep) == [["attempt", "done", "ok"], ["attempt", "done", "ok"]])
            #expect(try await db.decisions(revoked) == [["attempt", "done", "ok"], ["attempt", "done", "ok"]])
            #expect(try await db.decisions(status) == [["suppressed", "suppressed", "disabled_by_user"]])
            let alerts = provider.sent.filter { $0.jobID == sep }
            #expect(alerts.count == 2)
            // Req 4.3, 11.1, 11.5: critical priority, overriding Do Not Disturb, with its distinct sound.
            #expect(
                alerts.allSatisfy {
                    $0.priority == .critical && $0.interruptionLevel == "critical" && $0.sound == "sep_alarm.caf"
                        && $0.route == "/admin/alerts"
                }
            )
            #expect(alerts.first?.metadata == ["ddName": "Max", "event": "Spring Formal"])
            #expect(provider.sent.filter { $0.jobID == revoked }.count == 2)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test(
        "seed 003 req 9.1, 9.3–9.4: a failing critical alert retries 3 times with exponential backoff, then dead-letters with an in-app alert"
    )
    func retriesThenDeadLetterAndInAppAlert() async throws {
        try await TestDatabase.withFresh { db in
            // One attempt plus three retries; backoff ceilings 5 s, 10 s, 20 s.
            try await db.addSeedCategory(
                "sep_failure",
                priority: "critical",
                mandatory: true,
                quietHours: "bypass",
                maxAttempts: 4,
                backoffBase: "5 seconds",
                backoffCap: "1 minute"
            )
            try await db.registerDevice("admin-a", "apns", "admin-a-offline")
            try await db.registerDevice("admin-b", "fcm", "admin-b-phone")
            let provider = ScriptedProvider()
            provider.answer("admin-a-offline", with: DeliveryOutcome(.retry, reason: .unavailable))
            #expect(
                try await db.enqueueManyJSON(["admin-a", "admin-b"], "sep_failure", payload: Self.sepAlert("Max")) == 2
            )
            let failing = try #require(try await db.jobIDs("admin-a").first)
            let fine = try #require(try await db.jobIDs("admin-b").first)
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider, .fcm: provider]), clock: clock)

            #expect(try await consumer.runOnce() == 2)
            #expect(try await db.decisions(fine) == [["attempt", "done", "ok"]])
            for ceiling in [5.0, 10.0, 20.0] {
                let due = try await db.instant("SELECT run_at FROM herald.outbox WHERE id = \(failing)")
                #expect(
                    due >= clock.now() - 0.01 && due <= clock.now() + ceiling + 0.01,
                    "backoff ceiling \(ceiling) s"
                )
                clock.set(due - 0.5)
                #expect(try await consumer.runOnce() == 0)  // not before its backoff
                clock.set(due + 0.01)
                #expect(try await consumer.runOnce() == 1)
            }
            #expect(provider.sent(to: "admin-a-offline").count == 4)
            #expect(
                try await db.rows(
                    "SELECT attempt, outcome, status FROM herald.delivery_log WHERE job_id = \(failing) AND event = 'attempt' ORDER BY id"
                )
                    == [
                        ["1", "retry", "pending"], ["2", "retry", "pending"], ["3", "retry", "pending"],
                        ["4", "retry", "dead"],
                    ]
            )
            #expect(
                try await db.rows(
                    "SELECT event, status, reason FROM herald.delivery_log WHERE job_id = \(failing) AND event <> 'attempt'"
                )
                    == [["dead", "dead", "attempts_exhausted: unavailable"]]
            )
            #expect(
                try await db.rows("SELECT attempts, last_error FROM herald.dead_letters WHERE job_id = \(failing)")
                    == [["4", "attempts_exhausted: unavailable"]]
            )
            // Req 9.4: the in-app fallback, and only for the admin who never got the push.
            #expect(
                try await db.rows("SELECT user_id, kind, title, route FROM herald.inbox WHERE kind = 'alert'")
                    == [["admin-a", "alert", "SEP failure: Max", "/admin/alerts"]]
            )
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            // The alert and the delivered notification count in the badge the next claim reads.
            #expect(
                try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'admin-a'")
                    == db.unreadCount("admin-a")
            )
            #expect(try await db.recipientRowDrift() == [])
        }
    }

    @Test("seed 003 req 2.1–2.5: several pending ride requests each go out as their own high-priority notification")
    func rideRequestsAreNeverGrouped() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "ride_request",
                priority: "high",
                sound: "ride.caf",
                androidChannel: "ride_requests",
                defaultRoute: "/rides/queue"
            )
            // Another category of the same app does group bursts: the rides must not be caught by it.
            try await db.addSeedCategory(
                "group_activity",
                coalesce: #"{"mode": "leading", "count": 1, "windowSeconds": 300}"#
            )
            try await db.registerDevice("dd", "fcm", "dd-android")
            let riders = ["Ana", "Ben", "Cleo", "Dev", "Eli", "Fay"]
            var rides: [Int64] = []
            for (i, rider) in riders.enumerated() {
                rides.append(
                    try #require(
                        try await db.enqueueJSON(
                            "dd",
                            "ride_request",
                            payload: """
                                {"title": "Ride request from \(rider)", "body": "Pickup: 12 Elm St · requested 23:\(10 + i)",
                                 "metadata": {"rideId": "r-\(i)", "rider": "\(rider)"}}
                                """
                        )
                    )
                )
            }
            for i in 1...3 {
                try await db.enqueueJSON(
                    "dd",
                    "group_activity",
                    payload: #"{"title": "New photo \#(i)", "body": "Formal"}"#
                )
            }
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 9)

            let sentRides = provider.sent.filter { rides.contains($0.jobID) }
            #expect(sentRides.map(\.title) == riders.map { "Ride request from \($0)" })
            #expect(Set(sentRides.map(\.collapseID)).count == riders.count)
            #expect(
                sentRides.allSatisfy {
                    $0.priority == .high && $0.sound == "ride.caf" && $0.androidChannel == "ride_requests"
                        && $0.route == "/rides/queue"
                }
            )
            for ride in rides {
                #expect(try await db.decisions(ride) == [["attempt", "done", "ok"]])
            }
            // The contrast: the photo burst was grouped.
            #expect(provider.sent.filter { $0.title.hasPrefix("New photo") }.count == 1)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE summary_key = 'group_activity'") == 1)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'ride_request'") == 0)
        }
    }
}
