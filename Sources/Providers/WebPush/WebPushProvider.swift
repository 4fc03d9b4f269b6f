import AsyncHTTPClient
import Crypto
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHTTP1

/// Web Push adapter settings.
package struct WebPushConfiguration: Sendable {
    /// VAPID identity per Herald app id (`device.appID`). A device whose app is missing gets
    /// `credentialsBroken("app_not_configured")`. Default empty.
    package var apps: [String: VAPIDCredentials]
    /// `TTL` header, in seconds, for messages without an expiry (`expiresAt` ≤ 0). Default 86 400 (1 day).
    /// Messages with an expiry send the seconds left, clamped to 0…``maxTTL``.
    package var defaultTTL: Int
    /// Upper bound of the `TTL` header, in seconds. Default 2 592 000 (30 days, autopush's limit).
    package var maxTTL: Int
    /// Requests in flight per `send` call. Default 32.
    package var maxConcurrentRequests: Int

    package init(
        apps: [String: VAPIDCredentials], defaultTTL: Int = 86_400, maxTTL: Int = 2_592_000,
        maxConcurrentRequests: Int = 32
    ) {
        self.apps = apps
        self.defaultTTL = defaultTTL
        self.maxTTL = maxTTL
        self.maxConcurrentRequests = maxConcurrentRequests
    }
}

/// Delivers to browser push subscriptions (RFC 8030) with `aes128gcm` encryption (RFC 8291) and
/// VAPID (RFC 8292).
///
/// `device.token` is the subscription endpoint and `device.p256dh` / `device.auth` its keys.
/// The encrypted plaintext is one UTF-8 JSON object for the site's service worker:
///
/// ```json
/// {"title": "…", "body": "…", "subtitle": "…", "route": "/orders/7", "data": {"eventType": "…"},
///  "badge": 3, "tag": "<collapseID>", "silent": false, "image": "https://…", "jobID": 42}
/// ```
/// `title`, `body`, `data`, `tag`, `silent` and `jobID` are always present; the rest only when set.
///
/// Classification: 201/202 (any 2xx) accepted; 404/410 `tokenInvalid`;
/// 400/413 `payloadRejected`; 401/403 `credentialsBroken`, except that a refused *cached* VAPID token
/// (typically past its `exp` by the push service's clock) is dropped, re-minted and retried once;
/// 429 and 5xx retry (with `Retry-After`); no response → ``DeliveryOutcome/transportFailure(_:latency:)``.
/// Checked before any request: an endpoint that is not an absolute `https` URL is
/// `tokenInvalid("invalid_endpoint")` (the subscription can never work, so the device is disabled),
/// missing or malformed `p256dh`/`auth` is `tokenInvalid("invalid_subscription")`, and a plaintext over
/// 3 993 bytes (encrypted body over 4 096) is `payloadRejected("payload_too_large")`.
package final class WebPushProvider: PushProvider {
    package let name = "webpush"
    private let configuration: WebPushConfiguration
    private let client: HTTPClient
    private let requestTimeout: Duration
    private let now: @Sendable () -> Date
    private let authorizers: [String: VAPIDAuthorizer]

    /// Validates every app's VAPID credentials; throws ``ProviderConfigurationError`` naming the app.
    package init(
        configuration: WebPushConfiguration, client: HTTPClient, requestTimeout: Duration,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        guard configuration.defaultTTL >= 0, configuration.maxTTL >= 0 else {
            throw ProviderConfigurationError("webpush: TTLs must not be negative")
        }
        guard configuration.maxConcurrentRequests >= 1 else {
            throw ProviderConfigurationError("webpush: maxConcurrentRequests must be at least 1")
        }
        var authorizers: [String: VAPIDAuthorizer] = [:]
        for (app, credentials) in configuration.apps {
            authorizers[app] = try VAPIDAuthorizer(credentials: credentials, app: app, now: now)
        }
        self.configuration = configuration
        self.client = client
        self.requestTimeout = requestTimeout
        self.now = now
        self.authorizers = authorizers
    }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        await RequestDriver.sendEach(messages, concurrency: configuration.maxConcurrentRequests, gate: gate) {
            await self.deliver($0, logger: logger)
        }
    }

    // MARK: - One message

    private func deliver(_ message: PushMessage, logger: Logger) async -> DeliveryOutcome {
        let outcome = await attempt(message, logger: logger)
        if outcome.disposition == .accepted {
            logger.trace("Web Push accepted", metadata: metadata(message))
        } else {
            var meta = metadata(message)
            meta["push.reason"] = "\(outcome.reason)"
            logger.debug("Web Push not accepted", metadata: meta)
        }
        return outcome
    }

    private func attempt(_ message: PushMessage, logger: Logger) async -> DeliveryOutcome {
        let device = message.device
        guard let authorizer = authorizers[device.appID] else {
            return DeliveryOutcome(.credentialsBroken, reason: "app_not_configured")
        }
        guard let url = URL(string: device.token), url.scheme?.lowercased() == "https",
            let origin = VAPIDAuthorizer.origin(of: url)
        else {
            return DeliveryOutcome(.tokenInvalid, reason: "invalid_endpoint")
        }
        guard let p256dh = device.p256dh.flatMap(Base64URL.decode), let auth = device.auth.flatMap(Base64URL.decode),
            auth.count == 16, (try? WebPushCrypto.parsePublicKey(p256dh)) != nil
        else {
            return DeliveryOutcome(.tokenInvalid, reason: "invalid_subscription")
        }

        guard let fitted = BodyFit.encode(message, { m in
            let text = Self.plaintext(for: m)
            return text.count <= WebPushCrypto.maxPlaintextLength ? Array(text) : nil
        }) else {
            return DeliveryOutcome(.payloadRejected, reason: "payload_too_large")
        }
        let plaintext = Data(fitted)
        let body: Data
        do {
            body = try WebPushCrypto.encrypt(plaintext: plaintext, userAgentPublicKey: p256dh, authSecret: auth)
        } catch {
            return DeliveryOutcome(.tokenInvalid, reason: "invalid_subscription")
        }
        guard body.count <= WebPushCrypto.maxBodyLength else {
            return DeliveryOutcome(.payloadRejected, reason: "payload_too_large")
        }

        let start = ContinuousClock.now
        var retriedAuthorization = false
        while true {
            let authorization: (value: String, fresh: Bool)
            do {
                authorization = try await authorizer.authorization(origin: origin)
            } catch {
                return DeliveryOutcome(.credentialsBroken, reason: "vapid_signing_failed")
            }
            var request = HTTPClientRequest(url: device.token)
            request.method = .POST
            request.headers = headers(for: message, authorization: authorization.value)
            request.body = .bytes(ByteBuffer(bytes: body))

            let status: Int
            let responseHeaders: HTTPHeaders
            do {
                let response = try await client.execute(request, deadline: .now() + requestTimeout.timeAmount)
                status = Int(response.status.code)
                responseHeaders = response.headers
                _ = try? await response.body.collect(upTo: 64 * 1024)  // drain; the body is never read
            } catch {
                return .transportFailure(error, latency: (ContinuousClock.now - start).seconds)
            }

            if (status == 401 || status == 403) && !authorization.fresh && !retriedAuthorization {
                // A cached token the push service refuses is most likely past `exp` by its clock:
                // mint a new one and try once more.
                retriedAuthorization = true
                await authorizer.invalidate(origin: origin)
                logger.debug("Web Push VAPID token refused; re-minting", metadata: metadata(message))
                continue
            }
            var outcome = Self.classify(status: status, headers: responseHeaders, now: now())
            outcome.latency = (ContinuousClock.now - start).seconds
            return outcome
        }
    }

    private func headers(for message: PushMessage, authorization: String) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Encoding", value: "aes128gcm")
        headers.add(name: "Content-Type", value: "application/octet-stream")
        headers.add(name: "TTL", value: String(ttl(for: message)))
        headers.add(name: "Urgency", value: Self.urgency(message.priority, silent: message.silent))
        if let topic = Self.topic(collapseID: message.collapseID) { headers.add(name: "Topic", value: topic) }
        headers.add(name: "Authorization", value: authorization)
        return headers
    }

    private func metadata(_ message: PushMessage) -> Logger.Metadata {
        [
            "push.provider": "webpush", "device.token_hash": "\(message.device.tokenHash)",
            "app.id": "\(message.device.appID)",
        ]
    }

    /// Seconds until `expiresAt`, clamped to 0…maxTTL; `defaultTTL` when the message has no expiry.
    package func ttl(for message: PushMessage) -> Int {
        guard message.expiresAt > 0 else { return min(configuration.defaultTTL, configuration.maxTTL) }
        let left = message.expiresAt - now().timeIntervalSince1970
        guard left > 0 else { return 0 }
        return min(Int(left.rounded(.down)), configuration.maxTTL)
    }

    // MARK: - Pure mapping (tested without sockets)

    /// RFC 8030 `Urgency`: critical and high → `high`, normal → `normal`, low and every silent
    /// message → `low` (delivered when the device is on power or Wi-Fi).
    package static func urgency(_ priority: Priority, silent: Bool = false) -> String {
        if silent { return "low" }
        switch priority {
        case .critical, .high: return "high"
        case .normal: return "normal"
        case .low: return "low"
        }
    }

    /// RFC 8030 `Topic`: base64url of the first 24 bytes of SHA-256(collapseID), 32 characters;
    /// nil for an empty collapse id. Hashing keeps it within the alphabet and length limit.
    package static func topic(collapseID: String) -> String? {
        guard !collapseID.isEmpty else { return nil }
        return Base64URL.encode(Data(SHA256.hash(data: Data(collapseID.utf8))).prefix(24))
    }

    /// The service-worker payload (see the type's documentation), as UTF-8 JSON with sorted keys,
    /// written straight into bytes (``JSONWriter``).
    package static func plaintext(for message: PushMessage) -> Data {
        var json = JSONWriter(capacity: 768)
        json.beginObject()
        if let badge = message.badge { json.int("badge", badge) }
        json.string("body", message.body)
        json.beginObject("data")
        var keys = Array(message.data.keys.filter { $0 != "metadata" && $0 != "summarizedIds" })
        if !message.metadata.isEmpty { keys.append("metadata") }
        if !message.summarizedIDs.isEmpty { keys.append("summarizedIds") }
        for key in keys.sorted() {
            switch key {
            case "metadata": json.strings(key, message.metadata)
            case "summarizedIds": json.integers(key, message.summarizedIDs)
            default: json.string(key, message.data[key]!)
            }
        }
        json.endObject()
        if let image = message.imageURL { json.string("image", image) }
        json.int("jobID", Int(message.jobID))
        if let route = message.route { json.string("route", route) }
        json.bool("silent", message.silent)
        if let subtitle = message.subtitle { json.string("subtitle", subtitle) }
        json.string("tag", message.collapseID)
        json.string("title", message.title)
        json.endObject()
        return Data(json.bytes)
    }

    /// Maps a push service's status to an outcome.
    package static func classify(status: Int, headers: HTTPHeaders, now: Date = Date()) -> DeliveryOutcome {
        switch status {
        case 200...299: return .accepted
        case 404: return DeliveryOutcome(.tokenInvalid, reason: "subscription_not_found")
        case 410: return DeliveryOutcome(.tokenInvalid, reason: "subscription_gone")
        case 413: return DeliveryOutcome(.payloadRejected, reason: "payload_too_large")
        case 400: return DeliveryOutcome(.payloadRejected, reason: "bad_request")
        case 401: return DeliveryOutcome(.credentialsBroken, reason: "vapid_unauthorized")
        case 403: return DeliveryOutcome(.credentialsBroken, reason: "vapid_forbidden")
        case 429:
            return DeliveryOutcome(
                .retry, reason: "rate_limited", retryAfter: DeliveryOutcome.retryAfter(headers, now: now))
        case 500...599:
            return DeliveryOutcome(
                .retry, reason: "server_error", retryAfter: DeliveryOutcome.retryAfter(headers, now: now))
        case 400...499: return DeliveryOutcome(.payloadRejected, reason: "unexpected_status")
        default: return DeliveryOutcome(.retry, reason: "unexpected_status")
        }
    }
}
