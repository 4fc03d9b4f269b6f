import AsyncHTTPClient
import Crypto
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP1
import Synchronization

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
    /// Requests written together to one push service (a chunk); a `send` call has at most one
    /// chunk in flight per push-service origin. Default 32.
    package var maxConcurrentRequests: Int

    package init(
        apps: [String: VAPIDCredentials],
        defaultTTL: Int = 86_400,
        maxTTL: Int = 2_592_000,
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
/// Transport: the messages of one `send` are grouped by push-service origin (`scheme://host:port`);
/// each origin's messages leave in chunks of `maxConcurrentRequests`, each chunk written together
/// on one of the ``HTTP2Client``'s connections to that origin, and the origins are served
/// concurrently. A push service that completes TLS without choosing `h2` is remembered as
/// HTTP/1.1-only (for the life of the process, up to 1,024 services) and its messages go through the async-http-client
/// `client`, one request each. A request the service never saw (refused by GOAWAY, or its
/// connection was gone) is resent once at once.
///
/// Classification: 201/202 (any 2xx) accepted; 404/410 `tokenInvalid`;
/// 400/413 `payloadRejected`; 401/403 `credentialsBroken`, except that a refused *cached* VAPID token
/// (typically past its `exp` by the push service's clock) is dropped, re-minted and retried once;
/// 429 and 5xx retry (with `Retry-After`); no response → ``DeliveryOutcome/transportFailure(_:latency:)``.
/// Checked before any request (a device's endpoint and keys once, then kept while they stay the
/// same: ``WebPushSubscriptionCache``, 1,024 devices): an endpoint that is not an absolute `https` URL is
/// `tokenInvalid("invalid_endpoint")` (the subscription can never work, so the device is disabled),
/// missing or malformed `p256dh`/`auth` is `tokenInvalid("invalid_subscription")`, and a plaintext over
/// 3 993 bytes (encrypted body over 4 096) is `payloadRejected("payload_too_large")`.
///
/// - Important: Both clients belong to the caller, who shuts them down.
package final class WebPushProvider: PushProvider {
    package let name = "webpush"

    /// A message ready to leave: encrypted, with its target and headers. A class: it is handed
    /// from the batch to its origin's chunks and rounds, one reference each instead of a copy
    /// of every field.
    private final class Prepared: Sendable {
        let message: PushMessage
        let authorizer: VAPIDAuthorizer
        let target: Target
        /// The request path with its query, exactly as in the subscription endpoint.
        let path: String
        let headers: HPACKHeaders
        let body: ByteBuffer

        init(
            message: PushMessage,
            authorizer: VAPIDAuthorizer,
            target: Target,
            path: String,
            headers: HPACKHeaders,
            body: ByteBuffer
        ) {
            self.message = message
            self.authorizer = authorizer
            self.target = target
            self.path = path
            self.headers = headers
            self.body = body
        }
    }

    /// Where a subscription's pushes go.
    package struct Target: Hashable, Sendable {
        /// The VAPID audience: the RFC 6454 origin.
        package var origin: String
        package var endpoint: HTTP2Endpoint
    }

    private let configuration: WebPushConfiguration
    private let client: HTTPClient
    private let http2: HTTP2Client
    private let requestTimeout: Duration
    private let now: @Sendable () -> Date
    private let authorizers: [String: VAPIDAuthorizer]
    /// Recently sent-to subscriptions, parsed (see ``WebPushSubscriptionCache``).
    private let subscriptions = WebPushSubscriptionCache()
    /// Origins that completed TLS without offering `h2`.
    private let http1Origins = Mutex<Set<String>>([])
    private static let maxHTTP1Origins = 1024

    /// Validates every app's VAPID credentials; throws ``ProviderConfigurationError`` naming the app.
    package init(
        configuration: WebPushConfiguration,
        client: HTTPClient,
        http2: HTTP2Client,
        requestTimeout: Duration,
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
        self.http2 = http2
        self.requestTimeout = requestTimeout
        self.now = now
        self.authorizers = authorizers
    }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)
        var prepared = [Prepared?](repeating: nil, count: messages.count)
        var byTarget: [Target: [Int]] = [:]
        for (i, message) in messages.enumerated() {
            switch prepare(message) {
            case .success(let ready):
                prepared[i] = ready
                byTarget[ready.target, default: []].append(i)
            case .failure(let refused):
                outcomes[i] = refused.outcome
                var meta = metadata(message)
                meta["push.reason"] = "\(refused.outcome.reason)"
                logger.debug("Web Push not sent", metadata: meta)
            }
        }
        let ready = prepared
        let chunkSize = configuration.maxConcurrentRequests
        // Origins are independent: a slow push service does not hold up the others.
        await withTaskGroup(of: [(Int, DeliveryOutcome)].self) { group in
            for (target, indexes) in byTarget {
                group.addTask {
                    let sent = await RequestDriver.sendChunked(
                        messages,
                        indexes: indexes,
                        chunkSize: chunkSize,
                        gate: gate
                    ) {
                        chunk in await self.deliver(chunk.map { ready[$0]! }, to: target, logger: logger)
                    }
                    return indexes.map { ($0, sent[$0] ?? DeliveryOutcome(.retry, reason: .noOutcome)) }
                }
            }
            for await answered in group {
                for (i, outcome) in answered { outcomes[i] = outcome }
            }
        }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    // MARK: - Preparing a message

    private struct Refused: Error {
        var outcome: DeliveryOutcome
        init(_ disposition: DeliveryOutcome.Disposition, _ reason: DeliveryOutcome.Reason) {
            outcome = DeliveryOutcome(disposition, reason: reason)
        }
    }

    /// Checks the subscription, fits and encrypts the payload, and builds the request; a message
    /// that can never be sent gets its outcome here, without a request.
    private func prepare(_ message: PushMessage) -> Result<Prepared, Refused> {
        let device = message.device
        guard let authorizer = authorizers[device.appID] else {
            return .failure(Refused(.credentialsBroken, .appNotConfigured))
        }
        let subscription: WebPushSubscription
        switch subscriptions.subscription(of: device) {
        case .success(let parsed): subscription = parsed
        case .failure(.endpoint): return .failure(Refused(.tokenInvalid, .invalidEndpoint))
        case .failure(.keys): return .failure(Refused(.tokenInvalid, .invalidSubscription))
        }
        guard
            let fitted = BodyFit.encode(
                message,
                { m in
                    let text = Self.plaintext(for: m)
                    return text.count <= WebPushCrypto.maxPlaintextLength ? Array(text) : nil
                }
            )
        else {
            return .failure(Refused(.payloadRejected, .payloadTooLarge))
        }
        let body: Data
        do {
            body = try WebPushCrypto.encrypt(
                plaintext: Data(fitted),
                userAgent: subscription.publicKey,
                userAgentPublicKey: subscription.p256dh,
                authSecret: subscription.auth
            )
        } catch {
            return .failure(Refused(.tokenInvalid, .invalidSubscription))
        }
        guard body.count <= WebPushCrypto.maxBodyLength else {
            return .failure(Refused(.payloadRejected, .payloadTooLarge))
        }
        var headers: HPACKHeaders = Self.fixedHeaders
        headers.add(name: "ttl", value: String(ttl(for: message)))
        headers.add(name: "urgency", value: Self.urgency(message.priority, silent: message.silent))
        if let topic = Self.topic(collapseID: message.collapseID) {
            headers.add(name: "topic", value: topic, indexing: .nonIndexable)
        }
        return .success(
            Prepared(
                message: message,
                authorizer: authorizer,
                target: subscription.target,
                path: subscription.path,
                headers: headers,
                body: ByteBuffer(bytes: body)
            )
        )
    }

    private static let fixedHeaders: HPACKHeaders = [
        "content-encoding": "aes128gcm", "content-type": "application/octet-stream",
    ]

    /// The origin and HTTP/2 endpoint of a subscription endpoint, and the path (with query) to
    /// request there; nil unless it is an absolute `https` URL with a host.
    package static func target(of endpoint: String) -> (Target, path: String)? {
        guard let url = URL(string: endpoint), url.scheme?.lowercased() == "https",
            let origin = VAPIDAuthorizer.origin(of: url),
            var host = url.host, !host.isEmpty
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // The path as written (percent-escapes kept): everything after the authority, without a fragment.
        let afterScheme = endpoint[endpoint.index(endpoint.startIndex, offsetBy: "https://".count)...]
        let rest = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" }.map { afterScheme[$0...] } ?? ""
        var path = String(rest.prefix { $0 != "#" })
        if !path.hasPrefix("/") { path = "/" + path }
        return (Target(origin: origin, endpoint: HTTP2Endpoint(host: host, port: url.port ?? 443)), path)
    }

    // MARK: - Sending

    /// One chunk to one origin, written together. Requests the service never saw go once more,
    /// and so do those whose cached VAPID token was refused (with a fresh token). Never throws.
    private func deliver(_ chunk: [Prepared], to target: Target, logger: Logger) async -> [DeliveryOutcome] {
        let start = ContinuousClock.now
        func latency() -> Duration { ContinuousClock.now - start }
        var outcomes = [DeliveryOutcome?](repeating: nil, count: chunk.count)
        var reminted = [Bool](repeating: false, count: chunk.count)
        var pending = Array(chunk.indices)
        var overHTTP1 = false
        while !pending.isEmpty {
            if overHTTP1 || http1Origins.withLock({ $0.contains(target.origin) }) {
                let answered = await sendOverHTTP1(pending.map { chunk[$0] }, logger: logger)
                for (k, outcome) in zip(pending, answered) { outcomes[k] = outcome }
                break
            }
            // One VAPID token per app for the whole round.
            var tokens: [String: (value: String, fresh: Bool)] = [:]
            var batch: [(k: Int, request: HTTP2Request, fresh: Bool)] = []
            for k in pending {
                let item = chunk[k]
                let app = item.message.device.appID
                if tokens[app] == nil {
                    do {
                        tokens[app] = try await item.authorizer.authorization(origin: target.origin)
                    } catch {
                        outcomes[k] = DeliveryOutcome(.credentialsBroken, reason: .vapidSigningFailed)
                        continue
                    }
                }
                let token = tokens[app]!
                batch.append(
                    (
                        k,
                        HTTP2Request(
                            path: item.path,
                            headers: item.headers,
                            authorization: token.value,
                            body: item.body
                        ), token.fresh
                    )
                )
            }
            pending = []
            let results = await http2.executeResendingUnsent(
                batch.map(\.request),
                to: target.endpoint,
                timeout: requestTimeout
            )
            var refusedApps: Set<String> = []
            for ((k, _, fresh), result) in zip(batch, results) {
                let message = chunk[k].message
                switch result {
                case .failure(.http2NotNegotiated):
                    // Nothing was sent; the origin speaks HTTP/1.1 only, and the next round uses it.
                    // Remembered up to a bound (subscriptions name their services): past it, such
                    // a service costs a TLS handshake per chunk and is still served.
                    overHTTP1 = true
                    let remembered = http1Origins.withLock { origins in
                        origins.count < Self.maxHTTP1Origins && origins.insert(target.origin).inserted
                    }
                    if remembered {
                        logger.info(
                            "Web Push service does not offer HTTP/2; using HTTP/1.1",
                            metadata: [
                                "push.provider": "webpush", "push.origin": "\(target.origin)",
                            ]
                        )
                    }
                    pending.append(k)
                case .failure(let error):
                    outcomes[k] = DeliveryOutcome.transportFailure(error, latency: latency())
                case .success(let response):
                    if (response.status == 401 || response.status == 403) && !fresh && !reminted[k] {
                        // A cached token the push service refuses is most likely past `exp` by
                        // its clock: mint a new one and try once more.
                        reminted[k] = true
                        refusedApps.insert(message.device.appID)
                        pending.append(k)
                        continue
                    }
                    var outcome = Self.classify(
                        status: response.status,
                        retryAfter: response.header("retry-after"),
                        now: now()
                    )
                    outcome.latency = latency()
                    outcomes[k] = outcome
                }
            }
            for app in refusedApps {
                logger.debug(
                    "Web Push VAPID token refused; re-minting",
                    metadata: [
                        "push.provider": "webpush", "app.id": "\(app)",
                    ]
                )
                await authorizers[app]?.invalidate(origin: target.origin)
            }
        }
        for (k, outcome) in outcomes.enumerated() {
            guard let outcome, outcome.disposition != .accepted else { continue }
            var meta = metadata(chunk[k].message)
            meta["push.reason"] = "\(outcome.reason)"
            logger.debug("Web Push not accepted", metadata: meta)
        }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    /// Messages to a push service without HTTP/2: one async-http-client request each, all of the
    /// chunk at once (the gate admitted them with the chunk).
    private func sendOverHTTP1(_ items: [Prepared], logger: Logger) async -> [DeliveryOutcome] {
        let outcomes = await RequestDriver.send(
            items.map(\.message),
            requests: items.indices.map { [$0] },
            concurrency: items.count,
            gate: nil
        ) { r in [await self.attemptOverHTTP1(items[r], logger: logger)] }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    private func attemptOverHTTP1(_ item: Prepared, logger: Logger) async -> DeliveryOutcome {
        let message = item.message
        let origin = item.target.origin
        let start = ContinuousClock.now
        var retriedAuthorization = false
        while true {
            let authorization: (value: String, fresh: Bool)
            do {
                authorization = try await item.authorizer.authorization(origin: origin)
            } catch {
                return DeliveryOutcome(.credentialsBroken, reason: .vapidSigningFailed)
            }
            var request = HTTPClientRequest(url: message.device.token)
            request.method = .POST
            // The same header fields the HTTP/2 request carries (built once, in `prepare`).
            request.headers = HTTPHeaders(item.headers.map { ($0.name, $0.value) })
            request.headers.add(name: "authorization", value: authorization.value)
            request.body = .bytes(item.body)

            let status: Int
            let responseHeaders: HTTPHeaders
            do {
                let response = try await client.execute(request, deadline: .now() + requestTimeout.timeAmount)
                status = Int(response.status.code)
                responseHeaders = response.headers
                _ = try? await response.body.collect(upTo: 64 * 1024)  // drain; the body is never read
            } catch {
                return .transportFailure(error, latency: ContinuousClock.now - start)
            }

            if (status == 401 || status == 403) && !authorization.fresh && !retriedAuthorization {
                retriedAuthorization = true
                await item.authorizer.invalidate(origin: origin)
                logger.debug("Web Push VAPID token refused; re-minting", metadata: metadata(message))
                continue
            }
            var outcome = Self.classify(status: status, headers: responseHeaders, now: now())
            outcome.latency = ContinuousClock.now - start
            return outcome
        }
    }

    private func metadata(_ message: PushMessage) -> Logger.Metadata {
        [
            "push.provider": "webpush", "device.token_hash": "\(message.device.tokenHash)",
            "app.id": "\(message.device.appID)",
        ]
    }

    /// Seconds until `expiresAt`, clamped to 0…maxTTL; `defaultTTL` when the message has no expiry.
    package func ttl(for message: PushMessage) -> Int {
        guard message.expiresAt.timeIntervalSince1970 > 0 else {
            return min(configuration.defaultTTL, configuration.maxTTL)
        }
        let left = message.expiresAt.timeIntervalSince(now())
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
        classify(status: status, retryAfter: headers.first(name: "retry-after"), now: now)
    }

    /// Maps a push service's status and its `Retry-After` value to an outcome.
    package static func classify(status: Int, retryAfter: String?, now: Date = Date()) -> DeliveryOutcome {
        switch status {
        case 200...299: return .accepted
        case 404: return DeliveryOutcome(.tokenInvalid, reason: .subscriptionNotFound)
        case 410: return DeliveryOutcome(.tokenInvalid, reason: .subscriptionGone)
        case 413: return DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge)
        case 400: return DeliveryOutcome(.payloadRejected, reason: .badRequest)
        case 401: return DeliveryOutcome(.credentialsBroken, reason: .vapidUnauthorized)
        case 403: return DeliveryOutcome(.credentialsBroken, reason: .vapidForbidden)
        case 429:
            return DeliveryOutcome(
                .retry,
                reason: .rateLimited,
                retryAfter: DeliveryOutcome.retryAfter(retryAfter, now: now)
            )
        case 500...599:
            return DeliveryOutcome(
                .retry,
                reason: .serverError,
                retryAfter: DeliveryOutcome.retryAfter(retryAfter, now: now)
            )
        case 400...499: return DeliveryOutcome(.payloadRejected, reason: .unexpectedStatus)
        default: return DeliveryOutcome(.retry, reason: .unexpectedStatus)
        }
    }
}
