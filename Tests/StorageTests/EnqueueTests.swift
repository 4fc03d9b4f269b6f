import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

@Suite("Enqueue: the public SQL interface")
struct EnqueueTests {
    struct BadInput: Sendable, CustomTestStringConvertible {
        let label: String
        let category: String
        let payload: String
        let options: String
        let sqlState: String
        let message: String
        var testDescription: String { label }
    }

    static let badInputs: [BadInput] = [
        .init(
            label: "unknown category",
            category: "nope",
            payload: #"{"title":"a","body":"b"}"#,
            options: "{}",
            sqlState: "23503",
            message: "unknown category \"nope\""
        ),
        .init(
            label: "payload without body",
            category: "chat",
            payload: #"{"title":"a"}"#,
            options: "{}",
            sqlState: "22023",
            message: "must have \"title\" and \"body\""
        ),
        .init(
            label: "payload without title",
            category: "chat",
            payload: #"{"body":"b"}"#,
            options: "{}",
            sqlState: "22023",
            message: "must have \"title\" and \"body\""
        ),
        .init(
            label: "payload not an object",
            category: "chat",
            payload: #"["title"]"#,
            options: "{}",
            sqlState: "22023",
            message: "payload must be a JSON object"
        ),
        .init(
            label: "title not a string",
            category: "chat",
            payload: #"{"title":1,"body":"b"}"#,
            options: "{}",
            sqlState: "22023",
            message: "payload.title must be a string"
        ),
        .init(
            label: "metadata with a number",
            category: "chat",
            payload: #"{"title":"a","body":"b","metadata":{"n":1}}"#,
            options: "{}",
            sqlState: "22023",
            message: "metadata must map keys to strings"
        ),
        .init(
            label: "metadata not an object",
            category: "chat",
            payload: #"{"title":"a","body":"b","metadata":"x"}"#,
            options: "{}",
            sqlState: "22023",
            message: "metadata must be an object"
        ),
        .init(
            label: "metadata key that collides on FCM",
            category: "chat",
            payload: #"{"title":"a","body":"b","metadata":{"route":"/x"}}"#,
            options: "{}",
            sqlState: "22023",
            message: "metadata key \"route\" is reserved"
        ),
        .init(
            label: "metadata key FCM reserves",
            category: "chat",
            payload: #"{"title":"a","body":"b","metadata":{"google.c.a":"1"}}"#,
            options: "{}",
            sqlState: "22023",
            message: "metadata key \"google.c.a\" is reserved"
        ),
        .init(
            label: "oversize message",
            category: "chat",
            payload: #"{"title":"a","body":"\#(String(repeating: "é", count: 2000))"}"#,
            options: "{}",
            sqlState: "22001",
            message: "the limit is 3584 bytes"
        ),
        .init(
            label: "unknown payload key",
            category: "chat",
            payload: #"{"title":"a","body":"b","tilte":"c"}"#,
            options: "{}",
            sqlState: "22023",
            message: "unknown payload key \"tilte\""
        ),
        .init(
            label: "unknown option",
            category: "chat",
            payload: #"{"title":"a","body":"b"}"#,
            options: #"{"dedupkey":"x"}"#,
            sqlState: "22023",
            message: "unknown option \"dedupkey\""
        ),
        .init(
            label: "bad priority",
            category: "chat",
            payload: #"{"title":"a","body":"b"}"#,
            options: #"{"priority":"urgent"}"#,
            sqlState: "22023",
            message: "options.priority must be one of"
        ),
        .init(
            label: "bad timestamp",
            category: "chat",
            payload: #"{"title":"a","body":"b"}"#,
            options: #"{"deliverAt":"tomorrow-ish"}"#,
            sqlState: "22007",
            message: "not a valid timestamp"
        ),
        .init(
            label: "collapse id over 64 bytes",
            category: "chat",
            payload: #"{"title":"a","body":"b"}"#,
            options: #"{"collapseId":"\#(String(repeating: "c", count: 65))"}"#,
            sqlState: "22023",
            message: "at most 64 bytes"
        ),
        .init(
            label: "expiry in the past",
            category: "chat",
            payload: #"{"title":"a","body":"b"}"#,
            options: #"{"expiresAt":"2001-01-01T00:00:00Z"}"#,
            sqlState: "22008",
            message: "already in the past"
        ),
    ]

    @Test(
        "bad input is refused with a clear error and SQLSTATE, inside the caller's transaction",
        arguments: badInputs
    )
    func rejectsBadInput(_ input: BadInput) async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            let error = await #expect(throws: PostgresError.self) {
                _ = try await db.outbox().enqueue(
                    user: "u1",
                    category: input.category,
                    payloadJSON: input.payload,
                    optionsJSON: input.options
                )
            }
            #expect(error?.sqlState == input.sqlState)
            #expect(error?.message.contains(input.message) == true, "message was: \(error?.message ?? "nil")")
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test("a refused enqueue rolls back the caller's own transaction: nothing half-written")
    func rejectionRollsBackCallerTransaction() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.exec("CREATE TABLE public.messages (id int)")
            await #expect(throws: PostgresError.self) {
                try await db.exec(
                    """
                    BEGIN;
                    INSERT INTO public.messages VALUES (1);
                    SELECT herald.enqueue('u1', 'chat', '{"title":"a","body":"b"}');
                    SELECT herald.enqueue('u1', 'chat', '{"title":"a"}');
                    COMMIT;
                    """
                )
            }
            try await db.exec("ROLLBACK")
            #expect(try await db.int("SELECT count(*) FROM public.messages") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test("enqueue → claim → ack: delivered once, recorded, and gone from the hot table")
    func roundTrip() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat", priority: "high")
            let device = try await db.registerDevice("alice", "local", "alice-tablet")
            let id = try #require(
                try await db.outbox().enqueue(
                    user: "alice",
                    category: "chat",
                    payloadJSON:
                        #"{"title":"Sam","body":"Is the bread still there?","route":"/c/42","metadata":{"conversationId":"42"}}"#
                )
            )
            let local = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
            let consumer = db.consumer(providers: ProviderRegistry([.local: local]))
            #expect(try await consumer.runOnce() == 1)

            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            let log = try await db.rows(
                "SELECT device_id, provider, event, outcome, status, attempt FROM herald.delivery_log WHERE job_id = \(id)"
            )
            #expect(log == [["\(device)", "local", "attempt", "accepted", "done", "1"]])
            let shown = try await db.rows(
                "SELECT title, body, route, data->>'eventType', data->>'metadata', collapse_id FROM herald.local_notifications WHERE job_id = \(id)"
            )
            #expect(shown.count == 1)
            #expect(shown.first?[0] == "Sam")
            #expect(shown.first?[2] == "/c/42")
            #expect(shown.first?[3] == "chat")
            #expect(shown.first?[4] == #"{"conversationId": "42"}"#)
            #expect(shown.first?[5] == "herald-\(id)")
        }
    }

    @Test("enqueue_many fans out in one statement; a dedup key covers each user once; enqueue returns NULL then")
    func fanOutAndDedup() async throws {
        try await TestDatabase.withFresh { db in
            try await db.exec(
                "INSERT INTO herald.categories (name, dedup_window) VALUES ('announcement', '1 hour')"
            )
            let users = (1...50).map { "member-\($0)" } + ["member-1"]
            let outbox = db.outbox()
            let payload = #"{"title":"Meeting","body":"Tonight"}"#
            #expect(
                try await outbox.enqueueMany(
                    users: users,
                    category: "announcement",
                    payloadJSON: payload,
                    optionsJSON: #"{"dedupKey":"a-1"}"#
                ) == 50
            )
            #expect(
                try await outbox.enqueueMany(
                    users: users,
                    category: "announcement",
                    payloadJSON: payload,
                    optionsJSON: #"{"dedupKey":"a-1"}"#
                ) == 0
            )
            #expect(
                try await outbox.enqueue(
                    user: "member-7",
                    category: "announcement",
                    payloadJSON: payload,
                    optionsJSON: #"{"dedupKey":"a-1"}"#
                ) == nil
            )
            #expect(
                try await outbox.enqueue(
                    user: "newcomer",
                    category: "announcement",
                    payloadJSON: payload,
                    optionsJSON: #"{"dedupKey":"a-1"}"#
                ) != nil
            )
            // Once the window has passed, the key can be used again.
            try await db.exec("UPDATE herald.dedup_keys SET expires_at = now() - interval '1 second'")
            #expect(
                try await outbox.enqueue(
                    user: "member-7",
                    category: "announcement",
                    payloadJSON: payload,
                    optionsJSON: #"{"dedupKey":"a-1"}"#
                ) != nil
            )
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 52)
        }
    }

    @Test(
        "three enqueue_many calls of one dedup key to overlapping new users, in different orders, at once: no deadlock, one job per user"
    )
    func concurrentFanOutsLockInUserOrder() async throws {
        // Each call reserves the key per user (`dedup_keys`) and creates the users' recipient
        // rows; a new row's inserter holds it until commit, so two calls that reached the same
        // users in different orders would each wait for the other. Both lock in user order.
        try await TestDatabase.withFresh { db in
            try await db.exec(
                "INSERT INTO herald.categories (name, dedup_window) VALUES ('announcement', '1 hour')"
            )
            let outbox = db.outbox()
            let payload = #"{"title":"Meeting","body":"Tonight"}"#
            for round in 0..<6 {
                // Overlapping sets of different sizes, each given in a different order, of users
                // no recipient row exists for yet.
                let first = (0..<1_500).map { "r\(round)-u\($0)" }
                let second = (700..<4_000).reversed().map { "r\(round)-u\($0)" }
                let third = (0..<4_000).shuffled().map { "r\(round)-u\($0)" }
                let counts = try await withThrowingTaskGroup(of: Int.self) { tasks in
                    for users in [first, second, third] {
                        tasks.addTask {
                            try await outbox.enqueueMany(
                                users: users,
                                category: "announcement",
                                payloadJSON: payload,
                                optionsJSON: #"{"dedupKey":"round-\#(round)"}"#
                            )
                        }
                    }
                    return try await tasks.reduce(0, +)
                }
                #expect(counts == 4_000)
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 24_000)
            #expect(try await db.int("SELECT count(DISTINCT (user_id, dedup_key)) FROM herald.outbox") == 24_000)
            #expect(try await db.int("SELECT count(*) FROM herald.recipients") == 24_000)
        }
    }

    @Test("cancel(dedup_key) removes pending scheduled jobs, logs why, and frees the key")
    func cancelScheduled() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("expiry_warning")
            let id = try #require(
                try await db.enqueue(
                    "donor",
                    "expiry_warning",
                    options: #"{"dedupKey":"listing:9","deliverAt":"2099-01-01T00:00:00Z"}"#
                )
            )
            #expect(try await db.int("SELECT herald.cancel('listing:9')") == 1)
            #expect(try await db.int("SELECT herald.cancel('listing:9')") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            #expect(
                try await db.rows("SELECT event, status, reason FROM herald.delivery_log WHERE job_id = \(id)")
                    == [["cancelled", "cancelled", "cancelled_by_key"]]
            )
            #expect(try await db.enqueue("donor", "expiry_warning", options: #"{"dedupKey":"listing:9"}"#) != nil)
        }
    }

    @Test("register_device upserts by token, validates input, and unregister removes it")
    func devices() async throws {
        try await TestDatabase.withFresh { db in
            let first = try await db.registerDevice("alice", "apns", "tok-1")
            let again = try await db.registerDevice("bob", "apns", "tok-1")  // same phone, new account
            #expect(first == again)
            #expect(try await db.scalar("SELECT user_id FROM herald.devices WHERE id = \(first)") == "bob")
            await #expect(throws: PostgresError.self) { try await db.registerDevice("alice", "pager", "x") }
            await #expect(throws: PostgresError.self) {
                try await db.exec("SELECT herald.register_device('a', 'webpush', 'https://push.example/1')")
            }
            await #expect(throws: PostgresError.self) {
                try await db.exec(#"SELECT herald.register_device('a', 'apns', 't', '{"timeZone":"Mars/Olympus"}')"#)
            }
            #expect(try await db.scalar("SELECT herald.unregister_device('apns', 'tok-1')") == "t")
            #expect(try await db.scalar("SELECT herald.unregister_device('apns', 'tok-1')") == "f")
        }
    }
}
