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
package struct ProviderSettings: Sendable {
    package struct APNsApp: Sendable {
        package var teamID: String
        package var keyID: String
        package var privateKey: Secret
        package var topic: String
    }
    package struct WebPushApp: Sendable {
        package var subject: String
        package var publicKey: String
        package var privateKey: Secret
    }
    package struct App: Sendable {
        package var id: String
        package var apns: APNsApp?
        /// Service-account JSON.
        package var fcm: Secret?
        package var expoAccessToken: Secret?
        package var webPush: WebPushApp?
    }

    /// Apps with credentials, by Herald app id (`devices.app_id`). Key `app_ids`, comma-separated.
    package var apps: [App] = []
    package var apnsProductionURL = Setting.apnsProductionURL.defaultValue!
    package var apnsSandboxURL = Setting.apnsSandboxURL.defaultValue!
    package var fcmURL = Setting.fcmURL.defaultValue!
    /// Overrides every service account's `token_uri` when set.
    package var fcmTokenURL: String?
    package var expoURL = Setting.expoURL.defaultValue!
    /// PEM files trusted in addition to the system roots (a simulator's or staging CA).
    package var extraCAFiles: [String] = []
    /// Deadline of one provider request, connect included. Milliseconds; default 10000.
    package var requestTimeout: Duration = .seconds(10)
    /// Sends per second per app credential; nil = unpaced. Expo defaults to its documented 600/s.
    package var ratePerSecond: [ProviderKind: Double] = [.expo: 600]
    package var circuit = CircuitBreaker.Configuration()
    package var credentialPause: Duration = .seconds(30)
    /// Record a job in `herald.local_notifications` when no push device took it. Default true.
    package var localFallback = true
    /// How long after sending an Expo message its receipt is asked for. Default 15 minutes (Expo
    /// advises waiting about that long); staging shortens it to see `DeviceNotRegistered` sooner.
    package var expoReceiptDelay: Duration = .seconds(15 * 60)
    /// How often the maintenance leader polls for due Expo receipts. Default 30 s.
    package var expoReceiptPoll: Duration = .seconds(30)

    package init() {}

    package init(reader: HeraldConfiguration.Reader) throws {
        typealias S = Setting
        apnsProductionURL = try Self.url(reader, S.apnsProductionURL)!
        apnsSandboxURL = try Self.url(reader, S.apnsSandboxURL)!
        fcmURL = try Self.url(reader, S.fcmURL)!
        fcmTokenURL = try Self.url(reader, S.fcmTokenURL)
        expoURL = try Self.url(reader, S.expoURL)!
        extraCAFiles = Self.list(reader.string(S.extraCAFiles))
        for file in extraCAFiles where !FileManager.default.isReadableFile(atPath: file) {
            throw ConfigurationError(key: "tls.extra_ca_files", reason: "\(file) is not a readable file")
        }
        requestTimeout = .milliseconds(try reader.int(S.requestTimeout))
        localFallback = try reader.bool(S.localFallback)
        for kind in [ProviderKind.apns, .fcm, .expo, .webpush] {
            let rate = try reader.int(
                S.pacing,
                key: S.pacing.key(provider: kind.rawValue),
                default: Int(ratePerSecond[kind] ?? 0)
            )
            ratePerSecond[kind] = rate > 0 ? Double(rate) : nil
        }
        circuit.failureThreshold = try reader.int(S.failureThreshold)
        circuit.openDuration = .seconds(try reader.int(S.openSeconds))
        circuit.maxOpenDuration = .seconds(try reader.int(S.maxOpenSeconds))
        expoReceiptDelay = .seconds(try reader.int(S.expoReceiptDelay))
        expoReceiptPoll = .seconds(try reader.int(S.expoReceiptPoll))
        guard circuit.maxOpenDuration >= circuit.openDuration else {
            throw ConfigurationError(key: "circuit.max_open_seconds", reason: "must be at least circuit.open_seconds")
        }
        credentialPause = .seconds(try reader.int(S.credentialPauseSeconds))

        for id in Self.list(reader.string(S.appIDs)) {
            guard id.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
                throw ConfigurationError(
                    key: "app_ids",
                    reason: "app id \"\(id.prefix(40))\" must be letters, digits or -"
                )
            }
            let p = "app.\(id)"
            var app = App(id: id)
            if let teamID = reader.string(S.apnsTeamID, key: S.apnsTeamID.key(id: id)) {
                guard let keyID = reader.string(S.apnsKeyID, key: S.apnsKeyID.key(id: id)),
                    let topic = reader.string(S.apnsTopic, key: S.apnsTopic.key(id: id)),
                    let key = try Self.secret(reader, S.apnsPrivateKey.key(id: id))
                else {
                    throw ConfigurationError(
                        key: "\(p).apns",
                        reason: "team_id, key_id, topic and private_key(_file) are all required"
                    )
                }
                app.apns = APNsApp(teamID: teamID, keyID: keyID, privateKey: key, topic: topic)
            }
            app.fcm = try Self.secret(reader, S.fcmServiceAccount.key(id: id))
            app.expoAccessToken = try Self.secret(reader, S.expoAccessToken.key(id: id))
            if let subject = reader.string(S.webPushSubject, key: S.webPushSubject.key(id: id)) {
                guard let publicKey = reader.string(S.webPushPublicKey, key: S.webPushPublicKey.key(id: id)),
                    let key = try Self.secret(reader, S.webPushPrivateKey.key(id: id))
                else {
                    throw ConfigurationError(
                        key: "\(p).webpush",
                        reason: "subject, public_key and private_key(_file) are all required"
                    )
                }
                app.webPush = WebPushApp(subject: subject, publicKey: publicKey, privateKey: key)
            }
            apps.append(app)
        }
    }

    /// Parses every app's keys and credentials the way `herald run` will, so `check-config` finds
    /// a corrupt key before a deployment does. Throws on the first that does not load, naming the
    /// app, the provider and the setting, never the key.
    package func validateCredentials() throws {
        for app in apps {
            let p = "app.\(app.id)"
            if let apns = app.apns {
                let credentials = APNsCredentials(
                    teamID: apns.teamID,
                    keyID: apns.keyID,
                    privateKeyPEM: apns.privateKey,
                    topic: apns.topic
                )
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
                throw ConfigurationError(
                    key: "\(p).expo.access_token",
                    reason: "expo: app \(app.id): the access token is empty or has spaces"
                )
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
    package var summary: [(String, String)] {
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
                rows += [
                    ("\(p).apns.team_id", a.teamID), ("\(p).apns.key_id", a.keyID), ("\(p).apns.topic", a.topic),
                    ("\(p).apns.private_key", "*** (set)"),
                ]
            }
            if app.fcm != nil { rows.append(("\(p).fcm.service_account", "*** (set)")) }
            if app.expoAccessToken != nil { rows.append(("\(p).expo.access_token", "*** (set)")) }
            if let w = app.webPush {
                rows += [
                    ("\(p).webpush.subject", w.subject), ("\(p).webpush.public_key", w.publicKey),
                    ("\(p).webpush.private_key", "*** (set)"),
                ]
            }
        }
        return rows
    }

    package static func list(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    package static func url(_ reader: HeraldConfiguration.Reader, _ setting: Setting) throws -> String? {
        guard let s = reader.string(setting) else { return nil }
        guard let url = URL(string: s), let scheme = url.scheme, ["https", "http"].contains(scheme), url.host != nil
        else { throw ConfigurationError(key: setting.key, reason: "must be an http(s) URL") }
        return s.hasSuffix("/") ? String(s.dropLast()) : s
    }

    /// `<key>` inline or `<key>_file`; a file that cannot be read is an error naming the path.
    package static func secret(_ reader: HeraldConfiguration.Reader, _ key: String) throws -> Secret? {
        if let path = reader.string("\(key)_file") {
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8),
                !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
            else {
                throw ConfigurationError(
                    key: "\(key)_file",
                    reason: "cannot read \(path) (missing, empty or not UTF-8)"
                )
            }
            // Files written by editors and `echo` end with a newline that no credential contains.
            return Secret(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        if let inline = reader.string(key, secret: true), !inline.isEmpty { return Secret(inline) }
        return nil
    }
}
