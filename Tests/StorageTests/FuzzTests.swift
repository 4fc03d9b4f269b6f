import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// Random and adversarial input for the public SQL functions.
struct FuzzInput {
    var random: SplitMix64

    static let nasty: [String] = [
        "", " ", "a", "'; DROP TABLE herald.outbox; --", "\" OR 1=1 --", "$$; SELECT pg_sleep(10); $$",
        "Robert'); DELETE FROM herald.devices;--", "%s%n%x", "${jndi:ldap://x}", "<script>alert(1)</script>",
        "\u{202E}gnp.exe", "e\u{301}", "\u{FEFF}bom", "tab\there", "new\nline",
        "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        "\u{0}", "nul\u{0}inside", "\u{7F}\u{1}\u{2}", "Ω≈ç√∫", "😀", "\\", "\\u0000", "\\ud800",
    ]

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &random) < p }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }

    mutating func string() -> String {
        switch int(0...9) {
        case 0: return String(repeating: pick(["x", "é", "😀", "\u{1F469}\u{200D}\u{1F467}"]), count: int(500...2000))
        case 1: return String(repeating: "a", count: int(3000...20000))
        case 2, 3: return pick(Self.nasty)
        case 4: return (0..<int(1...40)).map { _ in String(UnicodeScalar(UInt8(int(1...127)))) }.joined()
        default: return "u\(int(0...50))"
        }
    }

    /// A JSON string literal for `s` (what a backend's JSON encoder would send).
    static func literal(_ s: String) -> String {
        let data = try! JSONSerialization.data(withJSONObject: [s], options: [.fragmentsAllowed])
        let text = String(decoding: data, as: UTF8.self)
        return String(text.dropFirst().dropLast())
    }

    mutating func jsonValue(depth: Int = 0) -> String {
        switch int(0...7) {
        case 0: return "null"
        case 1: return pick(["true", "false"])
        case 2: return pick(["0", "-1", "1e308", "1e999999", "3.14", "-0", "12345678901234567890123"])
        case 3 where depth < 3:
            return "[" + (0..<int(0...3)).map { _ in jsonValue(depth: depth + 1) }.joined(separator: ",") + "]"
        case 4 where depth < 3:
            return "{"
                + (0..<int(0...3)).map { _ in Self.literal(string()) + ":" + jsonValue(depth: depth + 1) }
                .joined(separator: ",") + "}"
        default: return Self.literal(string())
        }
    }

    /// Text that is unusual but valid: SQL fragments, emoji, RTL marks, escapes, near-limit sizes.
    mutating func validText() -> String {
        switch int(0...5) {
        case 0: return String(repeating: "😀", count: int(1...700))  // up to 2,800 bytes
        case 1:
            return pick(
                Self.nasty.filter {
                    !$0.isEmpty && !$0.contains("\u{0}") && $0.trimmingCharacters(in: .whitespaces) != ""
                        && !$0.unicodeScalars.contains { $0.value == 0 }
                }
            )
        default: return "t\(int(0...1000)) " + pick(["hello", "café", "'; DROP TABLE x; --", "🚌 in 5 min", "a\nb"])
        }
    }

    /// A payload and options a careful backend would send, with unusual but valid content.
    mutating func plausible() -> (payload: String, options: String) {
        var fields = ["\"title\":" + Self.literal(validText()), "\"body\":" + Self.literal(validText())]
        if chance(0.3) { fields.append("\"route\":" + Self.literal("/r/" + validText())) }
        if chance(0.3) {
            fields.append("\"metadata\":{" + Self.literal(validText()) + ":" + Self.literal(validText()) + "}")
        }
        var options: [String] = []
        if chance(0.3) {
            options.append("\"priority\":" + pick(["\"critical\"", "\"high\"", "\"normal\"", "\"low\""]))
        }
        if chance(0.2) { options.append("\"dedupKey\":" + Self.literal("k\(int(0...50))")) }
        if chance(0.2) { options.append("\"collapseId\":" + Self.literal("c\(int(0...9))")) }
        if chance(0.1) {
            options.append("\"deliverAt\":\"" + Self.iso(Date().addingTimeInterval(Double(int(-3600...3600)))) + "\"")
        }
        if chance(0.1) { options.append("\"silent\":" + pick(["true", "false"])) }
        return ("{" + fields.joined(separator: ",") + "}", "{" + options.joined(separator: ",") + "}")
    }

    mutating func payload() -> String {
        switch int(0...19) {
        case 0:
            return pick([
                "", "{", "null", "[]", "42", "\"title\"", "{\"title\":", "{}", "not json",
                "{\"title\":\"a\",\"body\":\"b\"}garbage",
            ])
        case 1: return String(repeating: "[", count: int(1000...20000)) + String(repeating: "]", count: int(0...10))
        case 2:
            return "{\"title\":\"t\",\"body\":\"b\",\"metadata\":" + String(repeating: "{\"k\":", count: 3000) + "1"
                + String(repeating: "}", count: 3000) + "}"
        case 3: return "{\"title\":\"\\ud800\",\"body\":\"lone surrogate\"}"
        case 4: return "{\"title\":\"a\\u0000b\",\"body\":\"escaped NUL\"}"
        default: break
        }
        var fields: [String] = []
        if chance(0.93) { fields.append("\"title\":" + (chance(0.9) ? Self.literal(string()) : jsonValue())) }
        if chance(0.93) { fields.append("\"body\":" + (chance(0.9) ? Self.literal(string()) : jsonValue())) }
        if chance(0.3) { fields.append("\"route\":" + Self.literal("/" + string())) }
        if chance(0.3) {
            let entries = (0..<int(0...5)).map { _ in
                Self.literal(string()) + ":" + (chance(0.85) ? Self.literal(string()) : jsonValue())
            }
            fields.append("\"metadata\":{" + entries.joined(separator: ",") + "}")
        }
        if chance(0.1) { fields.append("\"metadata\":" + jsonValue()) }
        if chance(0.1) {
            fields.append(Self.literal(pick(["unknown", "Title", "aps", "data", string()])) + ":" + jsonValue())
        }
        if chance(0.1) { fields.append("\"subtitle\":" + jsonValue()) }
        if chance(0.05) { fields.append("\"actions\":" + jsonValue()) }
        return "{" + fields.shuffled(using: &random).joined(separator: ",") + "}"
    }

    mutating func timestamp() -> String {
        pick([
            "\"1900-01-01T00:00:00Z\"", "\"9999-12-31T23:59:59Z\"", "\"infinity\"", "\"-infinity\"", "\"2026-13-45\"",
            "\"yesterday\"", "\"2026-02-30T10:00:00Z\"", "1700000000", "\"\"", "\"2199-12-31T00:00:00Z\"",
            "\"2000-01-01T00:00:00Z\"", "\"\(Self.iso(Date().addingTimeInterval(Double(int(-86_400...86_400)))))\"",
            "\"epoch\"", "\"now\"", "null",
        ])
    }

    static func iso(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        return f.string(from: date)
    }

    mutating func options() -> String {
        if chance(0.1) { return pick(["", "[]", "null", "\"x\"", "{", "{\"priority\":}"]) }
        var fields: [String] = []
        for _ in 0..<int(0...4) {
            switch int(0...11) {
            case 0:
                fields.append(
                    "\"priority\":"
                        + (chance(0.6) ? pick(["\"critical\"", "\"high\"", "\"normal\"", "\"low\""]) : jsonValue())
                )
            case 1: fields.append("\"deliverAt\":" + timestamp())
            case 2: fields.append("\"expiresAt\":" + timestamp())
            case 3: fields.append("\"dedupKey\":" + (chance(0.7) ? Self.literal("k\(int(0...20))") : jsonValue()))
            case 4: fields.append("\"collapseId\":" + Self.literal(chance(0.5) ? "c\(int(0...9))" : string()))
            case 5: fields.append("\"silent\":" + (chance(0.7) ? pick(["true", "false"]) : jsonValue()))
            case 6:
                fields.append(
                    "\"geo\":"
                        + pick([
                            "{\"lat\":51.5,\"lon\":-0.1}", "{\"lat\":91,\"lon\":0}", "{\"lat\":\"x\"}", jsonValue(),
                        ])
                )
            case 7: fields.append("\"requires\":" + jsonValue())
            case 8: fields.append("\"coalesceKey\":" + Self.literal(string()))
            case 9: fields.append("\"excludeDevice\":" + jsonValue())
            case 10: fields.append("\"mandatory\":" + jsonValue())
            default: fields.append(Self.literal(string()) + ":" + jsonValue())
            }
        }
        return "{" + fields.joined(separator: ",") + "}"
    }
}

@Suite("Fuzz: random and adversarial input to enqueue, enqueue_many and register_device")
struct FuzzTests {
    /// SQLSTATE classes a refusal may carry: data exceptions (22), integrity (23), program
    /// limits such as nesting depth (54). Anything else — an internal error, a dropped
    /// connection — fails the test.
    static func isClearRefusal(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError, error.kind == .query, let state = error.sqlState else {
            return false
        }
        return state.hasPrefix("22") || state.hasPrefix("23") || state.hasPrefix("54") || state == "P0001"
    }

    @Test("3,000 seeded cases: each is accepted and accounted for after draining, or refused with a clear error")
    func fuzzPublicFunctions() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("fuzz", maxAttempts: 2)
            try await db.addCategory("fuzz_critical", priority: "critical", maxAttempts: 2)
            let register = PostgresStatement(
                name: "fuzz_register",
                sql: "SELECT herald.register_device($1, $2, $3, $4::jsonb)"
            )
            var input = FuzzInput(random: SplitMix64(seed: 0x4845_5241_4C44))
            let outbox = db.outbox()
            var accepted: [Int64] = []
            var refused: [String: Int] = [:]
            var registered = 0
            var deduplicated = 0
            let categories = ["fuzz", "fuzz_critical", "fuzz", "nope", "", "FUZZ"]
            for _ in 0..<3000 {
                do {
                    switch input.int(0...11) {
                    case 10, 11:
                        // Plausible input with odd content: expected to be accepted.
                        let (payload, options) = input.plausible()
                        let id = try await outbox.enqueue(
                            user: "p\(input.int(0...200))",
                            category: input.pick(["fuzz", "fuzz_critical"]),
                            payloadJSON: payload,
                            optionsJSON: options
                        )
                        if let id { accepted.append(id) } else { deduplicated += 1 }
                    case 0...5:
                        let id = try await outbox.enqueue(
                            user: input.string(),
                            category: input.pick(categories),
                            payloadJSON: input.payload(),
                            optionsJSON: input.options()
                        )
                        if let id { accepted.append(id) } else { deduplicated += 1 }
                    case 6, 7:
                        let users = (0..<input.int(0...20)).map { _ in input.string() }
                        let count = try await outbox.enqueueMany(
                            users: users,
                            category: input.pick(categories),
                            payloadJSON: input.payload(),
                            optionsJSON: input.options()
                        )
                        #expect(count <= users.count)
                    default:
                        _ = try await db.pool.query(
                            register,
                            [
                                input.string(),
                                input.pick(["apns", "fcm", "expo", "webpush", "local", "sms", "", "APNS"]),
                                input.string(), input.options(),
                            ]
                        )
                        registered += 1
                    }
                } catch {
                    #expect(Self.isClearRefusal(error), "unclear refusal: \(error)")
                    let state = (error as? PostgresError)?.sqlState ?? "?"
                    refused[state, default: 0] += 1
                }
            }
            // Every call was answered; enqueue_many's ids are not returned, so count them in SQL.
            let inOutbox = try await db.int("SELECT count(*) FROM herald.outbox")
            #expect(accepted.count + deduplicated > 300, "accepted path exercised: \(accepted.count)")
            #expect(refused.values.reduce(0, +) > 1000, "refusal path exercised: \(refused)")
            #expect(inOutbox >= accepted.count)

            // Drain: everything due is delivered (sink for every provider) or settled by a rule.
            var providers = ProviderRegistry()
            for kind in ProviderKind.allCases { providers[kind] = SinkProvider() }
            let consumer = db.consumer(providers: providers, batchSize: 500)
            while try await consumer.runOnce() > 0 {}

            // Nothing lost: each accepted job is either still scheduled for later (deliverAt in the
            // future, or a retry) or has a recorded end in the delivery log.
            let unaccounted = try await db.int(
                """
                SELECT count(*) FROM unnest(ARRAY[\(accepted.map(String.init).joined(separator: ","))]::bigint[]) AS a(id)
                WHERE NOT EXISTS (SELECT 1 FROM herald.outbox o WHERE o.id = a.id AND o.state = 'pending' AND o.run_at > now())
                  AND NOT EXISTS (SELECT 1 FROM herald.delivery_log l WHERE l.job_id = a.id
                                  AND l.status IN ('done', 'suppressed', 'expired', 'dead', 'summarized'))
                """
            )
            #expect(unaccounted == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE state = 'running'") == 0)
            #expect(
                try await db.int("SELECT count(*) FROM herald.outbox WHERE run_at <= now() AND state = 'pending'") == 0
            )
            // The database is still healthy after all of it.
            #expect(try await db.int("SELECT 1") == 1)
            print(
                "fuzz: accepted \(accepted.count) (+\(deduplicated) deduplicated), registered \(registered), refused \(refused.sorted { $0.key < $1.key })"
            )
        }
    }
}
