import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import ProviderSimulator
import Providers
import Queue
import Testing

/// Secrets and device tokens never reach logs, errors, metrics or the CLI.
@Suite("Secrets never appear in output", .serialized)
struct SecretsTests {
    /// Substrings of a secret that would give it away: every 24-byte window of each line of it.
    static func fingerprints(_ secret: String) -> [String] {
        var out: [String] = []
        for line in secret.split(whereSeparator: \.isNewline) {
            let text = String(line).trimmingCharacters(in: .whitespaces)
            guard !text.hasPrefix("-----"), text.count >= 12 else { continue }
            let chars = Array(text)
            let window = min(24, chars.count)
            var i = 0
            while i + window <= chars.count {
                out.append(String(chars[i..<(i + window)]))
                i += window
            }
        }
        return out
    }

    @Test(
        "a live worker through every provider error path, at trace level, plus the CLI: no secret bytes in any output"
    )
    func noSecretInOutput() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                let expoAccessToken = "expo-access-" + UUID().uuidString
                live.simulator.context.keyring.requireExpoAccessToken(expoAccessToken)
                try await db.addCategory(
                    "alerts",
                    priority: "critical",
                    maxAttempts: 2,
                    base: "1 second",
                    cap: "1 second"
                )

                // Devices on every provider; tokens that each error path will hit.
                var tokens: [String] = []
                func register(
                    _ user: String,
                    _ provider: String,
                    _ token: String,
                    _ options: String = "{}"
                ) async throws {
                    tokens.append(token)
                    try await db.exec(
                        "SELECT herald.register_device('\(user)', '\(provider)', '\(token)', '\(options)'::jsonb)"
                    )
                }
                let apnsTokens = (0..<6).map { LiveSimulator.apnsToken(0xBEEF00 + $0) }
                for (i, t) in apnsTokens.enumerated() { try await register("apns\(i)", "apns", t) }
                let fcmTokens = (0..<4).map { "fcm-secret-token-\($0)-" + UUID().uuidString }
                for (i, t) in fcmTokens.enumerated() { try await register("fcm\(i)", "fcm", t) }
                let expoTokens = (0..<3).map { "ExponentPushToken[secret\($0)\(UUID().uuidString.prefix(8))]" }
                for (i, t) in expoTokens.enumerated() { try await register("expo\(i)", "expo", t) }
                var subscriptions: [(endpoint: String, p256dh: String, auth: String)] = []
                for i in 0..<3 {
                    let s = WebPushService.createSubscription(context: live.simulator.context)
                    subscriptions.append(s)
                    try await register(
                        "web\(i)",
                        "webpush",
                        s.endpoint,
                        #"{"p256dh": "\#(s.p256dh)", "auth": "\#(s.auth)"}"#
                    )
                    tokens += [s.p256dh, s.auth]
                }

                // Faults on every error class.
                let f = live.simulator.faults
                _ = try f.add(FaultRule(provider: "apns", token: apnsTokens[0], status: 410, reason: "Unregistered"))
                _ = try f.add(FaultRule(provider: "apns", token: apnsTokens[1], status: 400, reason: "BadDeviceToken"))
                _ = try f.add(
                    FaultRule(
                        provider: "apns",
                        token: apnsTokens[2],
                        status: 429,
                        reason: "TooManyRequests",
                        retryAfter: 1
                    )
                )
                _ = try f.add(
                    FaultRule(provider: "apns", token: apnsTokens[3], status: 500, reason: "InternalServerError")
                )
                _ = try f.add(
                    FaultRule(provider: "apns", token: apnsTokens[4], status: 403, reason: "InvalidProviderToken")
                )
                _ = try f.add(FaultRule(provider: "apns", token: apnsTokens[5], remaining: 1, dropConnection: true))
                _ = try f.add(FaultRule(provider: "fcm", token: fcmTokens[0], status: 404, reason: "UNREGISTERED"))
                _ = try f.add(FaultRule(provider: "fcm", token: fcmTokens[1], status: 400, reason: "INVALID_ARGUMENT"))
                _ = try f.add(
                    FaultRule(provider: "fcm", token: fcmTokens[2], status: 503, reason: "UNAVAILABLE", retryAfter: 1)
                )
                _ = try f.add(
                    FaultRule(provider: "expo", token: expoTokens[0], status: 200, reason: "DeviceNotRegistered")
                )
                _ = try f.add(
                    FaultRule(
                        provider: "webpush",
                        token: String(subscriptions[0].endpoint.split(separator: "/").last!),
                        status: 410
                    )
                )
                _ = try f.add(
                    FaultRule(
                        provider: "webpush",
                        token: String(subscriptions[1].endpoint.split(separator: "/").last!),
                        status: 413
                    )
                )

                let users =
                    (0..<6).map { "apns\($0)" } + (0..<4).map { "fcm\($0)" } + (0..<3).map { "expo\($0)" }
                    + (0..<3).map { "web\($0)" } + ["nobody"]
                _ = try await db.outbox().enqueueMany(
                    users: users,
                    category: "alerts",
                    payloadJSON: #"{"title":"Alert","body":"Something happened"}"#
                )

                // Secrets given inline (env), the way a careless deployment would.
                var env = live.workerEnvironment
                let apnsKey = try String(contentsOfFile: live.manifest.apns.keyFile, encoding: .utf8)
                let serviceAccount = try String(contentsOfFile: live.manifest.fcm.serviceAccountFile, encoding: .utf8)
                env["HERALD_APP_DEFAULT_APNS_PRIVATE_KEY_FILE"] = nil
                env["HERALD_APP_DEFAULT_APNS_PRIVATE_KEY"] = apnsKey
                env["HERALD_APP_DEFAULT_FCM_SERVICE_ACCOUNT_FILE"] = nil
                env["HERALD_APP_DEFAULT_FCM_SERVICE_ACCOUNT"] = serviceAccount
                env["HERALD_APP_DEFAULT_EXPO_ACCESS_TOKEN"] = expoAccessToken
                env["HERALD_DATABASE_URL"] = db.url
                env["HERALD_LOG_LEVEL"] = "trace"
                env["HERALD_DELIVERY_REQUEST_TIMEOUT_MS"] = "2000"
                let port = freePort()
                env["HERALD_HTTP_PORT"] = "\(port)"
                let vapidPrivate = try String(contentsOfFile: live.manifest.webpush.privateKeyFile, encoding: .utf8)
                env["HERALD_APP_DEFAULT_WEBPUSH_PRIVATE_KEY_FILE"] = nil
                env["HERALD_APP_DEFAULT_WEBPUSH_PRIVATE_KEY"] = vapidPrivate

                var output = ""
                let (worker, pipe) = try HeraldBinary.start(["run"], environment: env)
                let reader = Task { await readToEndOffPool(pipe) }
                _ = try await waitUntil(.seconds(30)) {
                    let due = try await db.int("SELECT count(*) FROM herald.outbox WHERE run_at <= now()")
                    let logged = try await db.int("SELECT count(*) FROM herald.delivery_log")
                    return due == 0 && logged > 20
                }
                try await Task.sleep(for: .seconds(3))  // retries after Retry-After / backoff
                let (_, metrics) = try await httpGet("http://127.0.0.1:\(port)/metrics")
                output += metrics
                kill(worker.processIdentifier, SIGTERM)
                await waitUntilExitOffPool(worker)
                output += String(decoding: await reader.value, as: UTF8.self)

                // The CLI on the same database: status, dead letters, explain, check-config.
                for arguments in [
                    ["status"], ["dlq", "list"], ["dlq", "list", "--json"], ["check-config"],
                    ["check-config", "--json"], ["explain", "--user", "apns0"],
                ] {
                    let (_, text) = try await HeraldBinary.run(arguments, environment: env)
                    output += text
                }
                let ids = try await db.rows("SELECT id FROM herald.dead_letters").compactMap { $0[0] }
                for id in ids.prefix(3) {
                    output += try await HeraldBinary.run(["dlq", "show", id], environment: env).1
                }

                // A broken key: the startup error names the setting, not the key.
                var broken = env
                broken["HERALD_APP_DEFAULT_APNS_PRIVATE_KEY"] = apnsKey.replacingOccurrences(of: "A", with: "B")
                output += try await HeraldBinary.run(["run"], environment: broken).1
                // check-config loads every key too: each corrupt one fails it, naming app and provider.
                var brokenFCM = env
                brokenFCM["HERALD_APP_DEFAULT_FCM_SERVICE_ACCOUNT"] = serviceAccount.replacingOccurrences(
                    of: "A",
                    with: "B"
                )
                var brokenVAPID = env
                brokenVAPID["HERALD_APP_DEFAULT_WEBPUSH_PRIVATE_KEY"] = String(vapidPrivate.reversed())
                for (setting, corrupt) in [
                    ("app.default.apns.private_key", broken), ("app.default.fcm.service_account", brokenFCM),
                    ("app.default.webpush.private_key", brokenVAPID),
                ] {
                    let (status, text) = try await HeraldBinary.run(["check-config"], environment: corrupt)
                    #expect(status != 0, "check-config accepted a corrupt \(setting)")
                    #expect(text.contains(setting) && text.contains("app default"), "\(text)")
                    output += text
                }
                #expect(try await HeraldBinary.run(["check-config"], environment: env).0 == 0)

                let vapidKeys =
                    try JSONSerialization.jsonObject(
                        with: Data(contentsOf: URL(fileURLWithPath: live.manifest.webpush.vapidFile))
                    ) as? [String: String] ?? [:]
                let account =
                    try JSONSerialization.jsonObject(with: Data(serviceAccount.utf8)) as? [String: String] ?? [:]
                var secrets: [(String, String)] = [
                    ("expo access token", expoAccessToken), ("vapid private key", vapidPrivate),
                    ("vapid private key (file)", vapidKeys["privateKey"] ?? ""),
                ]
                secrets += Self.fingerprints(apnsKey).map { ("apns key", $0) }
                secrets += Self.fingerprints(account["private_key"] ?? "").map { ("service account key", $0) }
                secrets += tokens.map { ("device token", $0) }
                secrets += subscriptions.map { ("subscription endpoint", $0.endpoint) }
                for (kind, secret) in secrets where !secret.isEmpty {
                    #expect(!output.contains(secret), "\(kind) appears in the output")
                }
                // Something was actually exercised: errors happened and were logged.
                #expect(output.contains("credential") || output.contains("credentials"))
                #expect(try await db.int("SELECT count(*) FROM herald.devices WHERE disabled_at IS NOT NULL") >= 3)
                #expect(
                    try await db.int("SELECT count(DISTINCT reason) FROM herald.delivery_log WHERE event = 'attempt'")
                        >= 5
                )
            }
        }
    }
}
