import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// Seed 000 (Foodshare, iOS via APNs from a Supabase backend), replayed end to end through the
/// worker against the real PostgreSQL: `runOnce()` with a manual clock, no sleeps.
@Suite("Seed 000 Foodshare: nearby listings, messages, expiry warnings, badges")
struct Seed000FoodshareTests {
    static let listingCoalesce = """
        {"mode": "leading", "count": 3, "windowSeconds": 300, "summaryTitle": "New listings near you",
         "summaryBody": "{count} more listings near you", "summaryRoute": "/listings"}
        """

    @Test("seed 000 req 1.1–1.5: listings within radius, more than 3 in 5 minutes become one summary")
    func nearbyListingsBurst() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "new_listing",
                coalesce: Self.listingCoalesce,
                sound: "listing.caf",
                apnsCategory: "LISTING"
            )
            // 1 km = 0.008993° of latitude: the listings lie 1.1 km from "near" and 32 km from "far".
            try await db.setPreferences("near", #"{"location": {"lat": 59.30, "lon": 18.0, "radiusKm": 5}}"#)
            try await db.setPreferences("far", #"{"location": {"lat": 59.60, "lon": 18.0, "radiusKm": 5}}"#)
            try await db.registerDevice("near", "apns", "near-iphone")
            try await db.registerDevice("far", "apns", "far-iphone")

            // Five listings created within a minute; the backend fans each out to candidate recipients.
            for i in 1...5 {
                #expect(
                    try await db.enqueueManyJSON(
                        ["near", "far"],
                        "new_listing",
                        payload: """
                            {"title": "Sourdough loaf #\(i)", "body": "{distanceKm} away · expires 18:00",
                             "route": "/listings/\(i)", "metadata": {"listingId": "\(i)", "expiresAt": "18:00"}}
                            """,
                        options: #"{"geo": {"lat": 59.31, "lon": 18.0}}"#
                    ) == 2
                )
            }
            let nearJobs = try await db.jobIDs("near")
            let farJobs = try await db.jobIDs("far")
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)

            #expect(try await consumer.runOnce() == 10)
            // Req 1.4: nothing reaches the user whose 5 km circle does not cover the listings.
            #expect(provider.sent(to: "far-iphone").isEmpty)
            for job in farJobs {
                #expect(try await db.decisions(job) == [["suppressed", "suppressed", "out_of_radius"]])
            }
            // Req 1.5: the first three go out at once (req 1.1), with distance and expiry (req 1.2)
            // and the listing's deep link (req 1.3); the 4th and 5th wait for the summary.
            let first = provider.sent(to: "near-iphone")
            #expect(first.map(\.title) == ["Sourdough loaf #1", "Sourdough loaf #2", "Sourdough loaf #3"])
            #expect(first.allSatisfy { $0.body == "1.1 km away · expires 18:00" })
            #expect(first.map(\.route) == ["/listings/1", "/listings/2", "/listings/3"])
            #expect(first.allSatisfy { $0.data["distanceKm"] == "1.1" && $0.metadata["expiresAt"] == "18:00" })
            // Req 6.3 and 6.5: a medium-priority category is "active", with its own sound.
            #expect(first.allSatisfy { $0.interruptionLevel == "active" && $0.sound == "listing.caf" })
            for job in nearJobs.prefix(3) {
                #expect(try await db.decisions(job) == [["attempt", "done", "ok"]])
            }
            for job in nearJobs.suffix(2) {
                #expect(try await db.decisions(job) == [["summarized", "summarized", "coalesced"]])
            }
            let summary = try #require(try await db.openSummary("near"))
            #expect(summary.count == 2)
            // Due when the 5-minute window of the burst closes.
            #expect(abs(summary.runAt.timeIntervalSince(clock.now() + 300)) < 1)

            // Not before the window's end…
            clock.set(summary.runAt - 1)
            #expect(try await consumer.runOnce() == 0)
            // …then exactly one grouped notification with the count.
            clock.set(summary.runAt + 1)
            #expect(try await consumer.runOnce() == 1)
            let all = provider.sent(to: "near-iphone")
            #expect(all.count == 4)
            let grouped = try #require(all.last)
            #expect(grouped.title == "New listings near you")
            #expect(grouped.body == "2 more listings near you")
            #expect(grouped.route == "/listings")
            #expect(grouped.data["summaryCount"] == "2")
            #expect(try await db.decisions(summary.id) == [["attempt", "done", "ok"]])
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            // Req 8.1: the history holds the three listings and the summary, nothing for "far".
            #expect(
                try await db.rows(
                    "SELECT title, summary_count FROM herald.inbox WHERE user_id = 'near' ORDER BY id"
                ) == [
                    ["Sourdough loaf #1", "0"], ["Sourdough loaf #2", "0"], ["Sourdough loaf #3", "0"],
                    ["New listings near you", "2"],
                ]
            )
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE user_id = 'far'") == 0)
        }
    }

    static func message(_ conversation: Int, _ body: String) -> String {
        """
        {"title": "Sam", "body": "\(body)", "route": "/conversations/\(conversation)?reply=1",
         "metadata": {"conversationId": "\(conversation)"}}
        """
    }

    static func conversation(_ id: Int) -> String { #"{"context": "conversation:\#(id)"}"# }

    @Test("seed 000 req 2.5: while a conversation is open on screen (herald.set_presence), its messages are suppressed")
    func presenceSuppression() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("new_message", priority: "high", apnsCategory: "MESSAGE_REPLY")
            try await db.registerDevice("donor", "apns", "donor-iphone")
            // The donor has conversation 42 open and visible.
            try await db.exec("SELECT herald.set_presence('donor', 'conversation:42', '5 minutes')")
            let hidden = try #require(
                try await db.enqueueJSON(
                    "donor",
                    "new_message",
                    payload: Self.message(42, "On my way"),
                    options: Self.conversation(42)
                )
            )
            let other = try #require(
                try await db.enqueueJSON(
                    "donor",
                    "new_message",
                    payload: Self.message(43, "Is it still there?"),
                    options: Self.conversation(43)
                )
            )
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 2)
            #expect(provider.sent.map(\.jobID) == [other])
            #expect(try await db.decisions(hidden) == [["suppressed", "suppressed", "presence"]])
            #expect(try await db.decisions(other) == [["attempt", "done", "ok"]])

            // The donor leaves the conversation: its messages notify again.
            try await db.exec("SELECT herald.set_presence('donor', 'conversation:42', '0 seconds')")
            let after = try #require(
                try await db.enqueueJSON(
                    "donor",
                    "new_message",
                    payload: Self.message(42, "Still there?"),
                    options: Self.conversation(42)
                )
            )
            clock.catchUp()
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.map(\.jobID) == [other, after])
        }
    }

    @Test("seed 000 req 2.1–2.4, 2.6, 6.2: sender name, 100-character preview, Reply action, badge = unread count")
    func messagePreviewAndBadge() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "new_message",
                priority: "high",
                sound: "message.caf",
                apnsCategory: "MESSAGE_REPLY",
                previewChars: 100
            )
            try await db.registerDevice("donor", "apns", "donor-iphone")
            let longBody = String(repeating: "Is the bread still available? ", count: 5)  // 150 characters
            #expect(longBody.count == 150)
            let long = try #require(
                try await db.enqueueJSON(
                    "donor",
                    "new_message",
                    payload: Self.message(43, longBody),
                    options: Self.conversation(43)
                )
            )
            let short = try #require(
                try await db.enqueueJSON(
                    "donor",
                    "new_message",
                    payload: Self.message(43, "Thanks!"),
                    options: Self.conversation(43)
                )
            )
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 2)

            let sent = provider.sent(to: "donor-iphone")
            #expect(sent.map(\.jobID) == [long, short])
            // Req 2.2: sender's name and the first 100 characters of the message.
            let preview = try #require(sent.first)
            #expect(preview.title == "Sam")
            #expect(preview.body == String(longBody.prefix(100)) + "…")
            // Req 2.3–2.4, 6.2, 6.5: reply-ready deep link, Reply action category, time-sensitive, own sound.
            #expect(preview.route == "/conversations/43?reply=1")
            #expect(preview.actionCategory == "MESSAGE_REPLY")
            #expect(preview.interruptionLevel == "time-sensitive")
            #expect(preview.sound == "message.caf")
            #expect(sent.last?.body == "Thanks!")
            // Req 2.6: the badge counts unread messages.
            #expect(sent.map(\.badge) == [1, 2])
            // The history keeps the whole message (req 8.1).
            #expect(
                try await db.rows("SELECT job_id, body FROM herald.inbox WHERE user_id = 'donor' ORDER BY id")
                    == [["\(long)", longBody], ["\(short)", "Thanks!"]]
            )

            // The donor reads the long one in the app: the next badge is 1 unread + the new one.
            let read = try #require(try await db.scalar("SELECT id FROM herald.inbox WHERE job_id = \(long)"))
            #expect(try await db.int("SELECT herald.mark_read('donor', ARRAY[\(read)]::bigint[])") == 1)
            let next = try #require(
                try await db.enqueueJSON(
                    "donor",
                    "new_message",
                    payload: Self.message(43, "See you at 6"),
                    options: Self.conversation(43)
                )
            )
            clock.catchUp()
            // The read also queued a silent badge sync; it goes out in the same batch.
            #expect(try await consumer.runOnce() == 2)
            let visible = provider.sent(to: "donor-iphone").filter { !$0.silent }
            #expect(visible.map(\.jobID) == [long, short, next])
            #expect(visible.last?.badge == 2)
            #expect(try await db.unreadCount("donor") == 2)
        }
    }

    @Test(
        "seed 000 req 5.1–5.5: one expiry warning per listing, scheduled ahead, cancelled when the listing is claimed"
    )
    func expiryWarningsCancelled() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory(
                "expiry_warning",
                apnsCategory: "LISTING_EXPIRY",
                defaultRoute: "/listings/mine"
            )
            try await db.registerDevice("owner", "apns", "owner-iphone")
            let start = SystemClock().now()
            func warning(_ listing: Int) -> String {
                """
                {"title": "Your listing expires soon", "body": "Bagels #\(listing) expire in 2 hours",
                 "route": "/listings/\(listing)/edit?focus=expiry", "metadata": {"listingId": "\(listing)"}}
                """
            }
            func options(_ listing: Int) -> String {
                #"{"deliverAt": "\#(iso(start + 3_600))", "dedupKey": "expiry:listing-\#(listing)"}"#
            }
            let claimed = try #require(
                try await db.enqueueJSON("owner", "expiry_warning", payload: warning(7), options: options(7))
            )
            let kept = try #require(
                try await db.enqueueJSON("owner", "expiry_warning", payload: warning(8), options: options(8))
            )
            // Req 5.4: a second warning for the same listing is refused by its key.
            #expect(
                try await db.enqueueJSON("owner", "expiry_warning", payload: warning(7), options: options(7)) == nil
            )

            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 0)  // scheduled: nothing is due yet

            // Req 5.5: listing 7 is claimed, so its warning is cancelled.
            #expect(try await db.int("SELECT herald.cancel('expiry:listing-7')") == 1)
            #expect(try await db.int("SELECT herald.cancel('expiry:listing-7')") == 0)
            #expect(try await db.decisions(claimed) == [["cancelled", "cancelled", "cancelled_by_key"]])

            clock.set(start + 3_600 - 5)
            #expect(try await consumer.runOnce() == 0)
            clock.set(start + 3_601)
            #expect(try await consumer.runOnce() == 1)
            let sent = provider.sent
            #expect(sent.map(\.jobID) == [kept])
            // Req 5.2–5.3: the Extend / Mark Unavailable actions and the edit view with expiry focused.
            #expect(sent.first?.actionCategory == "LISTING_EXPIRY")
            #expect(sent.first?.route == "/listings/8/edit?focus=expiry")
            #expect(try await db.decisions(kept) == [["attempt", "done", "ok"]])
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test(
        "seed 000 req 8.4 + seed 003 req 10.4: mark_read updates the badge and silently syncs the user's other devices, not the one read on"
    )
    func markReadSyncsBadge() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("reservation_update", priority: "high")
            let iphone = try await db.registerDevice("recipient", "apns", "recipient-iphone")
            try await db.registerDevice("recipient", "apns", "recipient-ipad")
            for status in ["accepted", "completed", "cancelled"] {
                try await db.enqueueJSON(
                    "recipient",
                    "reservation_update",
                    payload:
                        #"{"title": "Reservation \#(status)", "body": "Sourdough loaf", "route": "/reservations/9"}"#
                )
            }
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 3)
            #expect(provider.sent(to: "recipient-iphone").map(\.badge) == [1, 2, 3])
            #expect(provider.sent(to: "recipient-ipad").map(\.badge) == [1, 2, 3])
            let inbox = try await db.rows("SELECT id FROM herald.inbox WHERE user_id = 'recipient' ORDER BY id")
                .compactMap { $0[0] }
            #expect(inbox.count == 3)

            // The user reads two of them on the iPhone.
            #expect(
                try await db.int(
                    "SELECT herald.mark_read('recipient', ARRAY[\(inbox[0]), \(inbox[1])]::bigint[], \(iphone))"
                ) == 2
            )
            #expect(try await db.unreadCount("recipient") == 1)
            let sync = try #require(try await db.jobIDs("recipient", category: "herald.sync").first)
            clock.catchUp()
            #expect(try await consumer.runOnce() == 1)
            // Only the iPad hears about it: a silent push carrying the new badge and what was read.
            #expect(provider.sent(to: "recipient-iphone").count == 3)
            let pushed = try #require(provider.sent(to: "recipient-ipad").last)
            #expect(pushed.jobID == sync)
            #expect(pushed.silent)
            #expect(pushed.interruptionLevel == nil)
            #expect(pushed.badge == 1)
            #expect(pushed.metadata == ["action": "read", "ids": "\(inbox[0]),\(inbox[1])", "badge": "1"])
            #expect(try await db.decisions(sync) == [["attempt", "done", "ok"]])
            // A sync is not a notification: no history row, no badge increment.
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE user_id = 'recipient'") == 3)

            // "Clear all" from the web (no device): both phones learn the badge is 0.
            #expect(try await db.int("SELECT herald.mark_all_read('recipient')") == 1)
            clock.catchUp()
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent(to: "recipient-iphone").last?.metadata["action"] == "read_all")
            #expect(provider.sent(to: "recipient-iphone").last?.badge == 0)
            #expect(provider.sent(to: "recipient-ipad").last?.badge == 0)
        }
    }
}
