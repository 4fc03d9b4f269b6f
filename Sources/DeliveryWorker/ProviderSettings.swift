import Delivery
import Foundation
import HeraldCore
import Providers
import Queue

/// The network adapters' settings: endpoints, TLS trust, deadlines, pacing, circuit breaker,
/// and each app's credentials (`app.<id>.<provider>.<field>`).
///
/// Secrets are given inline (`…private_key`, env `HERALD_APP_<ID>_APNS_PRIVATE_KEY`) or, better,
/// as a file path (`…private_key_file`); they are held as ``Secret`` and never printed.
struct ProviderSettings: Sendable {
    struct APNsApp: Sendable {
        var teamID: String
        var keyID: String
        var privateKey: Secret
        var topic: String
    }
    struct WebPushApp: Sendable {
        var subject: String
        var publicKey: String
        var privateKey: Secret
    }
    struct App: Sendable {
        var id: String
        var apns: APNsApp?
        /// Service-account JSON.
        var fcm: Secret?
        var expoAccessToken: Secret?
        var webPush: WebPushApp?
    }

    /// Apps with credentials, by Herald app id (`devices.app_id`). Key `app_ids`, comma-separated.
    var apps: [App] = []
    var apnsProductionURL = "https://api.push.apple.com"
    var apnsSandboxURL = "https://api.sandbox.push.apple.com"
    var fcmURL = "https://fcm.googleapis.com"
    /// Overrides every service account's `token_uri` when set.
    var fcmTokenURL: String?
    var expoURL = "https://exp.host"
    /// PEM files trusted in addition to the system roots (a simulator's or staging CA).
    var extraCAFiles: [String] = []
    /// Deadline of one provider request, connect included. Milliseconds; default 10000.
    var requestTimeout: Duration = .seconds(10)
    /// Sends per second per app credential; nil = unpaced. Expo defaults to its documented 600/s.
    var ratePerSecond: [ProviderKind: Double] = [.expo: 600]
    var circuit = CircuitBreaker.Configuration()
    var credentialPause: Duration = .seconds(30)
    /// Record a job in `herald.local_notifications` when no push device took it. Default true.
    var localFallback = true
    /// How long after sending an Expo message its receipt is asked for. Default 15 minutes (Expo
    /// advises waiting about that long); staging shortens it to see `DeviceNotRegistered` sooner.
    var expoReceiptDelay: Duration = .seconds(15 * 60)
    /// How often the maintenance leader polls for due Expo receipts. Default 30 s.
    var expoReceiptPoll: Duration = .seconds(30)

    static let keys: [(key: String, secret: Bool, help: String)] = [
        ("app_ids", false, "apps with credentials, comma-separated (keys app.<id>.*)"),
        ("app.<id>.apns.team_id", false, "APNs team id"),
        ("app.<id>.apns.key_id", false, "APNs auth key id"),
        ("app.<id>.apns.private_key[_file]", true, "APNs .p8 key (PEM), inline or a file"),
        ("app.<id>.apns.topic", false, "APNs topic (bundle id)"),
        ("app.<id>.fcm.service_account[_file]", true, "FCM service-account JSON, inline or a file"),
        ("app.<id>.expo.access_token[_file]", true, "Expo access token (optional)"),
        ("app.<id>.webpush.subject", false, "VAPID subject: mailto: or https: URL"),
        ("app.<id>.webpush.public_key", false, "VAPID public key (base64url, uncompressed P-256)"),
        ("app.<id>.webpush.private_key[_file]", true, "VAPID private key (base64url scalar or PEM)"),
        ("endpoints.apns_production", false, "APNs production base URL (default https://api.push.apple.com)"),
        ("endpoints.apns_sandbox", false, "APNs sandbox base URL (default https://api.sandbox.push.apple.com)"),
        ("endpoints.fcm", false, "FCM base URL (default https://fcm.googleapis.com)"),
        ("endpoints.fcm_token", false, "OAuth token URL; overrides the service account's token_uri"),
        ("endpoints.expo", false, "Expo base URL (default https://exp.host)"),
        ("tls.extra_ca_files", false, "PEM files of extra trusted CAs, comma-separated"),
        ("delivery.request_timeout_ms", false, "deadline of one provider request (default 10000)"),
        ("delivery.local_fallback", false, "record in local_notifications when no push device took a job (default true)"),
        ("pacing.<provider>_per_second", false, "sends/s per app credential (expo default 600; others unpaced)"),
        ("circuit.failure_threshold", false, "consecutive failed messages that open the circuit (default 20)"),
        ("circuit.open_seconds", false, "first open period, doubling per failed probe (default 5)"),
        ("circuit.max_open_seconds", false, "longest open period (default 60)"),
        ("circuit.credential_pause_seconds", false, "pause of a credential the provider refused (default 30)"),
        ("expo.receipt_delay_seconds", false, "wait after an Expo send before asking for its receipt (default 900)"),
        ("expo.receipt_poll_seconds", false, "how often the leader polls for due Expo receipts (default 30)"),
    ]

    init() {}

    init(reader: HeraldConfiguration.Reader) throws {
        apnsProductionURL = try Self.url(reader, "endpoints.apns_production") ?? apnsProductionURL
        apnsSandboxURL = try Self.url(reader, "endpoints.apns_sandbox") ?? apnsSandboxURL
        fcmURL = try Self.url(reader, "endpoints.fcm") ?? fcmURL
        fcmTokenURL = try Self.url(reader, "endpoints.fcm_token")
        expoURL = try Self.url(reader, "endpoints.expo") ?? expoURL
        extraCAFiles = Self.list(reader.string("tls.extra_ca_files"))
        for file in extraCAFiles where !FileManager.default.isReadableFile(atPath: file) {
            throw ConfigurationError(key: "tls.extra_ca_files", reason: "\(file) is not a readable file")
        }
        requestTimeout = .milliseconds(try reader.int("delivery.request_timeout_ms", default: 10_000, range: 100...120_000))
        localFallback = try reader.bool("delivery.local_fallback", default: true)
        for kind in [ProviderKind.apns, .fcm, .expo, .webpush] {
            let key = "pacing.\(kind.rawValue)_per_second"
            let rate = try reader.int(key, default: Int(ratePerSecond[kind] ?? 0), range: 0...1_000_000)
            ratePerSecond[kind] = rate > 0 ? Double(rate) : nil
        }
        circuit.failureThreshold = try reader.int("circuit.failure_threshold", default: 20, range: 1...100_000)
        circuit.openDuration = .seconds(try reader.int("circuit.open_seconds", default: 5, range: 1...3600))
        circuit.maxOpenDuration = .seconds(try reader.int("circuit.max_open_seconds", default: 60, range: 1...86_400))
        expoReceiptDelay = .seconds(try reader.int("expo.receipt_delay_seconds", default: 900, range: 0...86_400))
        expoReceiptPoll = .seconds(try reader.int("expo.receipt_poll_seconds", default: 30, range: 1...3600))
        guard circuit.maxOpenDuration >= circuit.openDuration else {
            throw ConfigurationError(key: "circuit.max_open_seconds", reason: "must be at least circuit.open_seconds")
        }
        credentialPause = .seconds(try reader.int("circuit.credential_pause_seconds", default: 30, range: 1...86_400))

        for id in Self.list(reader.string("app_ids")) {
            guard id.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
                throw ConfigurationError(key: "app_ids", reason: "app id \"\(id.prefix(40))\" must be letters, digits or -")
            }
            let p = "app.\(id)"
            var app = App(id: id)
            if let teamID = reader.string("\(p).apns.team_id") {
                guard let keyID = reader.string("\(p).apns.key_id"), let topic = reader.string("\(p).apns.topic"),
                    let key = try Self.secret(reader, "\(p).apns.private_key")
                else {
                    throw ConfigurationError(
                        key: "\(p).apns", reason: "team_id, key_id, topic and private_key(_file) are all required")
                }
                app.apns = APNsApp(teamID: teamID, keyID: keyID, privateKey: key, topic: topic)
            }
            app.fcm = try Self.secret(reader, "\(p).fcm.service_account")
            app.expoAccessToken = try Self.secret(reader, "\(p).expo.access_token")
            if let subject = reader.string("\(p).webpush.subject") {
                guard let publicKey = reader.string("\(p).webpush.public_key"),
                    let key = try Self.secret(reader, "\(p).webpush.private_key")
                else {
                    throw ConfigurationError(
                        key: "\(p).webpush", reason: "subject, public_key and private_key(_file) are all required")
                }
                app.webPush = WebPushApp(subject: subject, publicKey: publicKey, privateKey: key)
            }
            apps.append(app)
        }
    }

    /// Parses every app's keys and credentials the way `herald run` will, so `check-config` finds
    /// a corrupt key before a deployment does. Throws on the first that does not load, naming the
    /// app, the provider and the setting, never the key.
    func validateCredentials() throws {
        for app in apps {
            let p = "app.\(app.id)"
            if let apns = app.apns {
                let credentials = APNsCredentials(
                    teamID: apns.teamID, keyID: apns.keyID, privateKeyPEM: apns.privateKey, topic: apns.topic)
                do {
                    _ = try APNsProvider.signingKey(app: app.id, credentials)
                } catch {
                    throw ConfigurationError(key: "\(p).apns.private_key", reason: "\(error)")
                }
            }
            if let json = app.fcm {
                do {
                    _ = try FCMProvider.signingKey(app: app.id, FCMServiceAccount.parse(json: json))
                } catch {
                    throw ConfigurationError(key: "\(p).fcm.service_account", reason: "fcm: app \(app.id): \(error)")
                }
            }
            if let expo = app.expoAccessToken, expo.reveal().isEmpty || expo.reveal().contains(where: \.isWhitespace) {
                throw ConfigurationError(key: "\(p).expo.access_token", reason: "expo: app \(app.id): the access token is empty or has spaces")
            }
            if let web = app.webPush {
                do {
                    try VAPIDCredentials(subject: web.subject, publicKey: web.publicKey, privateKey: web.privateKey)
                        .validate(app: app.id)
                } catch {
                    throw ConfigurationError(key: "\(p).webpush.private_key", reason: "\(error)")
                }
            }
        }
    }

    /// Rows for `check-config`: every credential shown as where it came from, never its value.
    var summary: [(String, String)] {
        var rows: [(String, String)] = [
            ("app_ids", apps.map(\.id).joined(separator: ",")),
            ("endpoints.apns_production", apnsProductionURL), ("endpoints.apns_sandbox", apnsSandboxURL),
            ("endpoints.fcm", fcmURL), ("endpoints.fcm_token", fcmTokenURL ?? "(service account token_uri)"),
            ("endpoints.expo", expoURL), ("tls.extra_ca_files", extraCAFiles.joined(separator: ",")),
            ("delivery.request_timeout_ms", "\(Int(requestTimeout.seconds * 1000))"),
            ("delivery.local_fallback", "\(localFallback)"),
            ("circuit.failure_threshold", "\(circuit.failureThreshold)"),
            ("circuit.open_seconds", "\(circuit.openDuration.components.seconds)"),
            ("circuit.max_open_seconds", "\(circuit.maxOpenDuration.components.seconds)"),
            ("circuit.credential_pause_seconds", "\(credentialPause.components.seconds)"),
            ("expo.receipt_delay_seconds", "\(expoReceiptDelay.components.seconds)"),
            ("expo.receipt_poll_seconds", "\(expoReceiptPoll.components.seconds)"),
        ]
        for kind in [ProviderKind.apns, .fcm, .expo, .webpush] {
            rows.append(("pacing.\(kind.rawValue)_per_second", ratePerSecond[kind].map { "\(Int($0))" } ?? "unpaced"))
        }
        for app in apps {
            let p = "app.\(app.id)"
            if let a = app.apns {
                rows += [("\(p).apns.team_id", a.teamID), ("\(p).apns.key_id", a.keyID), ("\(p).apns.topic", a.topic),
                         ("\(p).apns.private_key", "*** (set)")]
            }
            if app.fcm != nil { rows.append(("\(p).fcm.service_account", "*** (set)")) }
            if app.expoAccessToken != nil { rows.append(("\(p).expo.access_token", "*** (set)")) }
            if let w = app.webPush {
                rows += [("\(p).webpush.subject", w.subject), ("\(p).webpush.public_key", w.publicKey),
                         ("\(p).webpush.private_key", "*** (set)")]
            }
        }
        return rows
    }

    static func list(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static func url(_ reader: HeraldConfiguration.Reader, _ key: String) throws -> String? {
        guard let s = reader.string(key) else { return nil }
        guard let url = URL(string: s), let scheme = url.scheme, ["https", "http"].contains(scheme), url.host != nil
        else { throw ConfigurationError(key: key, reason: "must be an http(s) URL") }
        return s.hasSuffix("/") ? String(s.dropLast()) : s
    }

    /// `<key>` inline or `<key>_file`; a file that cannot be read is an error naming the path.
    static func secret(_ reader: HeraldConfiguration.Reader, _ key: String) throws -> Secret? {
        if let path = reader.string("\(key)_file") {
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8),
                !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
            else { throw ConfigurationError(key: "\(key)_file", reason: "cannot read \(path) (missing, empty or not UTF-8)") }
            // Files written by editors and `echo` end with a newline that no credential contains.
            return Secret(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        if let inline = reader.string(key, secret: true), !inline.isEmpty { return Secret(inline) }
        return nil
    }
}
