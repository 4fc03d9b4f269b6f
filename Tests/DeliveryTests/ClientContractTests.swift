import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import ProviderSimulator
import Providers
import Queue
import Testing

/// What the client contract (`docs/clients.md`) promises, checked on what the simulator received
/// over real sockets and on what the SQL API answers: summaries that list their items,
/// notifications in the device's language, and what the app can ask back.
@Suite("Client contract: summary items, localization, history, actions, diagnosis")
struct ClientContractTests {
    static func json(_ text: String) -> [String: Any] { PlatformFidelityTests.json(text) }

    /// Moves a manual clock past the wall clock, so jobs enqueued just now are due (enqueue
    /// stamps them with the database's time; a loaded machine takes seconds to enqueue).
    static func catchUp(_ clock: ManualClock) {
        clock.set(max(clock.now(), Date() + 1))
    }

    /// The data object each platform's client reads (APNs: the top level; FCM: `message.data`;
    /// Expo and Web Push: `data`).
    static func data(_ provider: String, _ payload: String) -> [String: Any] {
        let body = json(payload)
        switch provider {
        case "apns": return body
        case "fcm": return ((body["message"] as? [String: Any]) ?? body)["data"] as? [String: Any] ?? [:]
        default: return body["data"] as? [String: Any] ?? [:]
        }
    }

    /// Title and body as each platform shows them.
    static func shown(_ provider: String, _ payload: String) -> (title: String?, body: String?) {
        let body = json(payload)
        switch provider {
        case "apns":
            let alert = (body["aps"] as? [String: Any])?["alert"] as? [String: Any]
            return (alert?["title"] as? String, alert?["body"] as? String)
        case "fcm":
            let notification = ((body["message"] as? [String: Any]) ?? body)["notification"] as? [String: Any]
            return (notification?["title"] as? String, notification?["body"] as? String)
        default:
            return (body["title"] as? String, body["body"] as? String)
        }
    }

    @Test(
        "seed 004: a grouped notification lists its journeys ({titles}, newest first) and carries their ids (summarizedIds) on every platform"
    )
    func summariesListTheirItems() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                // More than two departures due at once fold into one summary (seed 004 "multiple
                // journeys departing within 5 minutes").
                try await db.addSeedCategory(
                    "departure",
                    coalesce:
                        #"{"summarizeAbove": 2, "summaryTitle": "{count} journeys departing", "summaryBody": "{titles}"}"#
                )
                let kinds = ["apns", "fcm", "expo", "webpush"]
                for kind in kinds { _ = try await ProviderFleet.register(kind, count: 1, db: db, live: live) }
                var ids: [String: [Int64]] = [:]
                for journey in ["Bus 4 to Centrum", "Tram 7 to Hamnen", "Train 12 to Lund"] {
                    for kind in kinds {
                        let id = try #require(
                            try await db.outbox().enqueue(
                                user: "\(kind)-0",
                                category: "departure",
                                payloadJSON: #"{"title":"\#(journey)","body":"Leaves in 5 min"}"#
                            )
                        )
                        ids[kind, default: []].append(id)
                    }
                }
                try await ProviderEndToEndTests.deliver(db, live)
                for kind in kinds {
                    let records = live.records.records(provider: kind)
                    #expect(records.count == 1, "\(kind): one grouped notification, got \(records.count)")
                    let record = try #require(records.first)
                    let shown = Self.shown(kind, record.payload)
                    #expect(shown.title == "3 journeys departing", "\(kind)")
                    #expect(shown.body == "Train 12 to Lund, Tram 7 to Hamnen, Bus 4 to Centrum", "\(kind)")
                    let data = Self.data(kind, record.payload)
                    let newestFirst = ids[kind, default: []].reversed().map { Int($0) }
                    if kind == "fcm" {
                        // FCM data is a flat map of strings.
                        #expect(data["summarizedIds"] as? String == newestFirst.map(String.init).joined(separator: ","))
                        #expect(data["summaryCount"] as? String == "3")
                    } else {
                        #expect(data["summarizedIds"] as? [Int] == newestFirst, "\(kind): \(data)")
                    }
                }
                // The inbox keeps the summary as shown.
                #expect(
                    try await db.rows("SELECT DISTINCT title, body, summary_count FROM herald.inbox") == [
                        ["3 journeys departing", "Train 12 to Lund, Tram 7 to Hamnen, Bus 4 to Centrum", "3"]
                    ]
                )
            }
        }
    }

    @Test("a summary that keeps growing across batches lists the newest 50 items; its count stays exact")
    func summaryItemsAreBounded() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "digest",
                coalesce: #"{"mode": "trailing", "windowSeconds": 600, "summaryBody": "{count}: {titles}"}"#
            )
            try await db.registerDevice("reader", "local", "reader-phone")
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.local: provider]), clock: clock)
            var ids: [Int64] = []
            // Three batches of 25 fold into one pending summary.
            for batch in 0..<3 {
                for i in 0..<25 {
                    ids.append(
                        try #require(
                            try await db.outbox().enqueue(
                                user: "reader",
                                category: "digest",
                                payloadJSON: #"{"title":"Item \#(batch * 25 + i)","body":"b"}"#
                            )
                        )
                    )
                }
                Self.catchUp(clock)
                while try await consumer.runOnce() > 0 {}
            }
            let stored = try await db.rows(
                "SELECT summary_count, cardinality(summarized_ids), summarized_ids[1], summarized_titles[1] FROM herald.outbox"
            )
            #expect(stored == [["75", "50", String(ids[74]), "Item 74"]])
            Self.catchUp(clock)
            clock.advance(by: 610)
            #expect(try await consumer.runOnce() == 1)
            let sent = try #require(provider.sent.last)
            #expect(sent.summarizedIDs == Array(ids.reversed().prefix(50)))
            #expect(sent.body.hasPrefix("75: Item 74, Item 73"))
            #expect(sent.body.count <= 100 + 1, "the titles fit the 100-character preview")
        }
    }

    @Test(
        "seed 001: each device gets the payload's variant for its locale (sv-SE → sv → the payload's own), summaries and the inbox too"
    )
    func localizedPerDevice() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("match_update")
                try await db.addSeedCategory("result", coalesce: #"{"summarizeAbove": 1}"#)
                _ = try await db.registerDevice(
                    "anna",
                    "apns",
                    LiveSimulator.apnsToken(0x5E),
                    options: #"{"locale":"sv-SE"}"#
                )
                _ = try await db.registerDevice("bo", "fcm", "fcm-bo", options: #"{"locale":"sv_FI"}"#)
                _ = try await db.registerDevice(
                    "cara",
                    "expo",
                    "ExponentPushToken[cara]",
                    options: #"{"locale":"en-GB"}"#
                )
                let s = WebPushService.createSubscription(context: live.simulator.context)
                _ = try await db.registerDevice(
                    "dan",
                    "webpush",
                    s.endpoint,
                    options: #"{"locale":"de","p256dh":"\#(s.p256dh)","auth":"\#(s.auth)"}"#
                )
                let users = ["anna", "bo", "cara", "dan"]
                _ = try await db.outbox().enqueueMany(
                    users: users,
                    category: "match_update",
                    payloadJSON: """
                        {"title":"Match moved","body":"Now at 15:30","subtitle":"U12",
                         "localized":{"sv":{"title":"Matchen flyttad","body":"Nu klockan 15:30"},
                                      "sv-FI":{"title":"Matchen har flyttats"}}}
                        """
                )
                try await ProviderEndToEndTests.deliver(db, live)
                func shown(_ kind: String) throws -> (title: String?, body: String?) {
                    Self.shown(kind, try #require(live.records.records(provider: kind).last).payload)
                }
                #expect(try shown("apns") == ("Matchen flyttad", "Nu klockan 15:30"))
                // The exact tag wins; fields it lacks come from its language, then the payload's own.
                #expect(try shown("fcm") == ("Matchen har flyttats", "Nu klockan 15:30"))
                #expect(try shown("expo") == ("Match moved", "Now at 15:30"))
                #expect(try shown("webpush") == ("Match moved", "Now at 15:30"))
                #expect(
                    try await db.rows("SELECT user_id, title FROM herald.inbox ORDER BY user_id") == [
                        ["anna", "Matchen flyttad"], ["bo", "Matchen har flyttats"], ["cara", "Match moved"],
                        ["dan", "Match moved"],
                    ]
                )

                // A summary in Herald's own words, in each device's language.
                for user in users {
                    for i in 1...2 {
                        _ = try await db.outbox().enqueue(
                            user: user,
                            category: "result",
                            payloadJSON: #"{"title":"Result \#(i)","body":"2-1"}"#
                        )
                    }
                }
                try await ProviderEndToEndTests.deliver(db, live)
                #expect(try shown("apns").body == "2 nya aviseringar")
                #expect(try shown("fcm").body == "2 nya aviseringar")
                #expect(try shown("expo").body == "2 new notifications")
                #expect(try shown("webpush").body == "2 neue Benachrichtigungen")
            }
        }
    }

    @Test("coalesce.localized: a category's summary template per language; distances read as the locale writes them")
    func localizedTemplatesAndDistances() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "new_listing",
                coalesce: """
                    {"summarizeAbove": 1, "summaryTitle": "New listings", "summaryBody": "{count} listings near you",
                     "localized": {"sv": {"title": "Nya annonser", "body": "{count} annonser nära dig"}}}
                    """
            )
            try await db.addSeedCategory("pickup")
            try await db.setPreferences("sven", #"{"location": {"lat": 59.3293, "lon": 18.0686, "radiusKm": 10}}"#)
            try await db.setPreferences("emma", #"{"location": {"lat": 59.3293, "lon": 18.0686, "radiusKm": 10}}"#)
            _ = try await db.registerDevice("sven", "local", "sven-phone", options: #"{"locale":"sv-SE"}"#)
            _ = try await db.registerDevice("emma", "local", "emma-phone", options: #"{"locale":"en-US"}"#)
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.local: provider]), clock: clock)
            // About 3.19 km north of the users.
            _ = try await db.outbox().enqueueMany(
                users: ["sven", "emma"],
                category: "pickup",
                payloadJSON: #"{"title":"Bread","body":"{distanceKm} away"}"#,
                optionsJSON: #"{"geo": {"lat": 59.3580, "lon": 18.0686}}"#
            )
            Self.catchUp(clock)
            while try await consumer.runOnce() > 0 {}
            let sven = try #require(provider.sent(to: "sven-phone").first)
            let emma = try #require(provider.sent(to: "emma-phone").first)
            #expect(sven.body == "3,2 km away")
            #expect(emma.body == "3.2 km away")
            #expect(sven.data["distanceKm"] == "3.2", "the data payload stays machine-readable")

            for user in ["sven", "emma"] {
                for i in 1...3 {
                    _ = try await db.outbox().enqueue(
                        user: user,
                        category: "new_listing",
                        payloadJSON: #"{"title":"Listing \#(i)","body":"b"}"#
                    )
                }
            }
            Self.catchUp(clock)
            Self.catchUp(clock)
            while try await consumer.runOnce() > 0 {}
            let svenSummary = try #require(provider.sent(to: "sven-phone").last)
            let emmaSummary = try #require(provider.sent(to: "emma-phone").last)
            #expect((svenSummary.title, svenSummary.body) == ("Nya annonser", "3 annonser nära dig"))
            #expect((emmaSummary.title, emmaSummary.body) == ("New listings", "3 listings near you"))
        }
    }

    @Test("enqueue refuses a malformed localized payload or a metadata key named summarizedIds, with a clear error")
    func localizedValidation() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            func state(_ payload: String) async -> String? {
                await db.sqlState(asRole: nil, user: nil, "SELECT herald.enqueue('u', 'chat', $q$\(payload)$q$::jsonb)")
            }
            #expect(
                await state(#"{"title":"t","body":"b","localized":{"sv":{"title":"T","body":"B","subtitle":"S"}}}"#)
                    == nil
            )
            #expect(await state(#"{"title":"t","body":"b","localized":["sv"]}"#) == "22023")
            #expect(await state(#"{"title":"t","body":"b","localized":{"not a tag":{"title":"x"}}}"#) == "22023")
            #expect(await state(#"{"title":"t","body":"b","localized":{"sv":{"title":"x","route":"/r"}}}"#) == "22023")
            #expect(await state(#"{"title":"t","body":"b","localized":{"sv":{"title":1}}}"#) == "22023")
            #expect(await state(#"{"title":"t","body":"b","localized":{"sv":{"title":"  "}}}"#) == "22023")
            #expect(await state(#"{"title":"t","body":"b","metadata":{"summarizedIds":"1"}}"#) == "22023")
            let longTitle = String(repeating: "å", count: 800)  // 1,600 bytes
            #expect(await state(#"{"title":"t","body":"b","localized":{"sv":{"title":"\#(longTitle)"}}}"#) == "22001")
            // A long localized body is fine: the push shows a preview that fits.
            let longBody = String(repeating: "ord ", count: 800)
            #expect(await state(#"{"title":"t","body":"b","localized":{"sv":{"body":"\#(longBody)"}}}"#) == nil)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 2, "nothing refused was written")
        }
    }

    @Test(
        "seed 004: history, record_action and diagnose answer an app user about their own notifications, 42501 about anyone else's"
    )
    func historyActionsAndDiagnosis() async throws {
        try await withRoleAndDatabase("client_app") { app, db in
            try await db.addSeedCategory("departure", priority: "high", maxAttempts: 1)
            try await db.addSeedCategory("alarm", priority: "critical", maxAttempts: 1)
            try await db.exec("SELECT herald.grant_app_role('\(app)')")
            let phone = try await db.registerDevice(
                "rider",
                "apns",
                "rider-phone",
                options: #"{"permission":"denied","locale":"sv-SE"}"#
            )
            let other = try await db.registerDevice(
                "other",
                "apns",
                "other-phone",
                options: #"{"permission":"granted"}"#
            )
            #expect(
                try await db.rows("SELECT id, permission FROM herald.devices ORDER BY id") == [
                    [String(phone), "denied"], [String(other), "granted"],
                ]
            )
            #expect(
                await db.sqlState(
                    asRole: app,
                    user: "rider",
                    #"SELECT herald.register_device('rider', 'apns', 'rider-phone', '{"permission":"maybe"}')"#
                ) == "22023"
            )

            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(
                providers: ProviderRegistry([.apns: provider, .local: ScriptedProvider()]),
                clock: clock
            )
            let delivered = try #require(try await db.enqueue("rider", "departure", title: "Bus 4 leaves 08:12"))
            Self.catchUp(clock)
            while try await consumer.runOnce() > 0 {}
            // The next one fails for good: a critical one leaves its alert (status failed); a
            // normal one goes to the app's notification center (fallback).
            provider.answer("rider-phone", with: DeliveryOutcome(.retry, reason: .unavailable))
            try await db.enqueue("rider", "alarm", title: "Bus 4 cancelled")
            Self.catchUp(clock)
            while try await consumer.runOnce() > 0 {}
            try await db.enqueue("rider", "departure", title: "Tram 7 delayed")
            Self.catchUp(clock)
            while try await consumer.runOnce() > 0 {}
            try await db.enqueue("other", "departure", title: "Not yours")
            Self.catchUp(clock)
            while try await consumer.runOnce() > 0 {}

            let history = try await db.asRole(
                app,
                user: "rider",
                "SELECT title, status, action FROM herald.history('rider')"
            ).rows
            #expect(
                history == [
                    ["Tram 7 delayed", "fallback", nil], ["Bus 4 cancelled", "failed", nil],
                    ["Bus 4 leaves 08:12", "delivered", nil],
                ]
            )
            let inboxID = try #require(
                Int64(
                    try await db.scalar(
                        "SELECT id FROM herald.inbox WHERE job_id = \(delivered)"
                    ) ?? ""
                )
            )
            #expect(
                try await db.asRole(app, user: "rider", "SELECT herald.record_action('rider', \(inboxID), 'opened')")
                    .scalar == "t"
            )
            #expect(
                try await db.asRole(
                    app,
                    user: "rider",
                    "SELECT action FROM herald.history('rider', 5) WHERE inbox_id = \(inboxID)"
                ).scalar == "opened"
            )
            #expect(
                try await db.scalar("SELECT read_at IS NOT NULL FROM herald.inbox WHERE id = \(inboxID)") == "t",
                "an opened notification is read"
            )
            #expect(
                try await db.asRole(app, user: "rider", "SELECT count(*) FROM herald.history('rider', 1)").scalar == "1"
            )

            // Another user's notification id answers false; asking about another user is refused.
            let othersInbox = try #require(try await db.scalar("SELECT id FROM herald.inbox WHERE user_id = 'other'"))
            #expect(
                try await db.asRole(
                    app,
                    user: "rider",
                    "SELECT herald.record_action('rider', \(othersInbox), 'opened')"
                ).scalar == "f"
            )
            for sql in [
                "SELECT * FROM herald.history('other')",
                "SELECT herald.record_action('other', \(othersInbox), 'opened')",
                "SELECT herald.diagnose('other')",
            ] {
                #expect(await db.sqlState(asRole: app, user: "rider", sql) == "42501", "\(sql)")
            }
            #expect(
                await db.sqlState(
                    asRole: app,
                    user: "rider",
                    "SELECT herald.record_action('rider', \(inboxID), 'drop table')"
                ) == "22023"
            )

            let text = try #require(
                try await db.asRole(app, user: "rider", "SELECT herald.diagnose('rider')::text").scalar
            )
            let diagnosis = Self.json(text)
            let devices = try #require(diagnosis["devices"] as? [[String: Any]])
            #expect(devices.count == 1)
            #expect(devices.first?["permission"] as? String == "denied")
            #expect(devices.first?["provider"] as? String == "apns")
            #expect((devices.first?["lastOutcome"] as? [String: Any])?["reason"] as? String == "unavailable")
            #expect(!text.contains("rider-phone"), "a diagnosis never shows a device token")
            let attempts = try #require(diagnosis["attempts"] as? [[String: Any]])
            #expect(
                attempts.contains { $0["outcome"] as? String == "retry" && $0["reason"] as? String == "unavailable" }
            )
            #expect(attempts.contains { $0["event"] as? String == "fallback" })
            let decisions = try #require(diagnosis["decisions"] as? [[String: Any]])
            #expect(decisions.contains { $0["event"] as? String == "dead" })
            let codes = (diagnosis["suggestions"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String }
            #expect(codes.contains("permission_denied") && codes.contains("provider_errors"), "\(codes)")
        }
    }
}
