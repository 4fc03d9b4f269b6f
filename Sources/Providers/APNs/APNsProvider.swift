import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHPACK

/// Delivers to Apple Push Notification service over HTTP/2 with token (JWT) authentication.
///
/// One `send` call writes its messages in chunks of `maxConcurrentRequests` requests; each chunk
/// leaves together on one of the ``HTTP2Client``'s connections (one flush), and its responses are
/// matched by stream id. The provider JWT of each key is cached and shared by every request,
/// re-minted after `tokenLifetime`, and re-minted once (with the message retried once) when APNs
/// answers `ExpiredProviderToken`. A 429 `TooManyProviderTokenUpdates` never triggers a re-mint:
/// the message is retried later. A request APNs never saw (refused by GOAWAY, or its connection
/// was gone before it was written) is resent once at once.
///
/// - Important: The ``HTTP2Client`` belongs to the caller, who shuts it down.
package final class APNsProvider: PushProvider {
    package let name = "apns"

    private let configuration: APNsConfiguration
    private let client: HTTP2Client
    private let timeout: Duration
    private let tokens: APNsTokenCache
    private let now: @Sendable () -> Date
    private let production: HTTP2Endpoint
    private let sandbox: HTTP2Endpoint

    /// Parses every app's key once.
    ///
    /// - Throws: ``ProviderConfigurationError`` naming the app and key id (never the key) when a
    ///   key cannot be parsed, or naming the URL setting when it is not `https`.
    package init(
        configuration: APNsConfiguration,
        client: HTTP2Client,
        requestTimeout: Duration,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        var keys: [String: APNsTokenCache.Key] = [:]
        for (appID, credentials) in configuration.apps.sorted(by: { $0.key < $1.key }) {
            let signingKey = try Self.signingKey(app: appID, credentials)
            keys[credentials.keyID] = .init(
                teamID: credentials.teamID,
                keyID: credentials.keyID,
                signingKey: signingKey
            )
        }
        guard configuration.maxConcurrentRequests >= 1 else {
            throw ProviderConfigurationError("apns: maxConcurrentRequests must be at least 1")
        }
        self.production = try HTTP2Endpoint(url: configuration.productionURL, setting: "endpoints.apns_production")
        self.sandbox = try HTTP2Endpoint(url: configuration.sandboxURL, setting: "endpoints.apns_sandbox")
        self.configuration = configuration
        self.client = client
        self.timeout = requestTimeout
        self.tokens = APNsTokenCache(keys: keys, lifetime: configuration.tokenLifetime, now: now)
        self.now = now
    }

    /// Parses an app's `.p8` key (also `herald check-config`); the error names the app and key id,
    /// never the key.
    package static func signingKey(app: String, _ credentials: APNsCredentials) throws -> JWT.SigningKey {
        do {
            return try JWT.es256Key(pem: credentials.privateKeyPEM)
        } catch {
            throw ProviderConfigurationError(
                "apns: app \(app): key \(credentials.keyID) is not a PEM-encoded P-256 (.p8) private key"
            )
        }
    }

    private enum Preparation {
        case ready(Prepared)
        case refused(DeliveryOutcome)
    }

    /// A message ready to leave: everything but the `authorization` header.
    private struct Prepared {
        var endpoint: HTTP2Endpoint
        var keyID: String
        var request: HTTP2Request
    }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)
        var prepared = [Prepared?](repeating: nil, count: messages.count)
        var ready: [Int] = []
        ready.reserveCapacity(messages.count)
        for (i, message) in messages.enumerated() {
            switch prepare(message) {
            case .ready(let p):
                prepared[i] = p
                ready.append(i)
            case .refused(let outcome): outcomes[i] = outcome
            }
        }
        let sent = await RequestDriver.sendChunked(
            messages,
            indexes: ready,
            chunkSize: configuration.maxConcurrentRequests,
            gate: gate
        ) { chunk in
            await self.deliver(chunk.map { (messages[$0], prepared[$0]!) }, since: .now, logger: logger)
        }
        for (i, outcome) in sent.enumerated() where outcome != nil { outcomes[i] = outcome }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    /// The request for one message, or the outcome that keeps it from leaving.
    private func prepare(_ message: PushMessage) -> Preparation {
        guard let credentials = configuration.apps[message.device.appID] else {
            return .refused(DeliveryOutcome(.credentialsBroken, reason: .appNotConfigured))
        }
        // Apple rejects larger bodies with 413: a longer body is sent as the preview that fits.
        guard
            let body = BodyFit.encode(
                message,
                { m in
                    (try? APNsRequest.payload(for: m)).flatMap { $0.count <= APNsRequest.maximumPayloadSize ? $0 : nil }
                }
            )
        else {
            return .refused(DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge))
        }
        let environment = message.device.environment.lowercased()
        let endpoint = environment == "sandbox" || environment == "development" ? sandbox : production
        let token = APNsRequest.pathSegment(message.device.token)
        let headers = APNsRequest.headers(for: message, topic: credentials.topic)
        return .ready(
            Prepared(
                endpoint: endpoint,
                keyID: credentials.keyID,
                request: HTTP2Request(path: "/3/device/" + token, headers: headers, body: ByteBuffer(bytes: body))
            )
        )
    }

    /// One chunk: written together per endpoint, then the messages APNs asked to re-mint for or
    /// never saw go once more. Never throws.
    private func deliver(
        _ chunk: [(message: PushMessage, prepared: Prepared)],
        since start: ContinuousClock.Instant,
        logger: Logger
    ) async -> [DeliveryOutcome] {
        func elapsed() -> Duration { ContinuousClock.now - start }
        var outcomes = [DeliveryOutcome?](repeating: nil, count: chunk.count)
        var reminted = [Bool](repeating: false, count: chunk.count)
        var pending = Array(chunk.indices)
        while !pending.isEmpty {
            // One token per key for the whole round.
            var jwts: [String: (token: String, generation: Int)] = [:]
            var requests: [HTTP2Endpoint: [(k: Int, request: HTTP2Request)]] = [:]
            for k in pending {
                let prepared = chunk[k].prepared
                if jwts[prepared.keyID] == nil {
                    guard let jwt = try? await tokens.token(keyID: prepared.keyID) else {
                        outcomes[k] = DeliveryOutcome(.credentialsBroken, reason: .jwtSigningFailed, latency: elapsed())
                        continue
                    }
                    jwts[prepared.keyID] = jwt
                }
                var request = prepared.request
                request.authorization = "bearer " + jwts[prepared.keyID]!.token
                requests[prepared.endpoint, default: []].append((k, request))
            }
            pending = []
            for (endpoint, batch) in requests {
                let results = await client.executeResendingUnsent(batch.map(\.request), to: endpoint, timeout: timeout)
                for ((k, _), result) in zip(batch, results) {
                    let message = chunk[k].message
                    switch result {
                    case .failure(let error):
                        outcomes[k] = DeliveryOutcome.transportFailure(error, latency: elapsed())
                        logger.debug(
                            "APNs request failed",
                            metadata: [
                                "push.provider": "apns", "device.token_hash": "\(message.device.tokenHash)",
                                "error.type": "\(outcomes[k]!.reason)",
                            ]
                        )
                    case .success(let response):
                        if response.status == 200 {
                            outcomes[k] = DeliveryOutcome(.accepted, reason: .ok, latency: elapsed())
                            continue
                        }
                        let (reason, timestamp) = APNsResponse.parseBody(Array(buffer: response.body))
                        let keyID = chunk[k].prepared.keyID
                        if response.status == 403, reason == "ExpiredProviderToken", !reminted[k] {
                            reminted[k] = true
                            if let jwt = jwts[keyID] { await tokens.expire(keyID: keyID, generation: jwt.generation) }
                            pending.append(k)
                            continue
                        }
                        outcomes[k] = refusal(
                            response,
                            reason: reason,
                            timestamp: timestamp,
                            message: message,
                            logger: logger
                        )
                        outcomes[k]!.latency = elapsed()
                    }
                }
            }
        }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    /// What a non-200 answer means for the message.
    private func refusal(
        _ response: HTTP2Response,
        reason: String?,
        timestamp: Double?,
        message: PushMessage,
        logger: Logger
    ) -> DeliveryOutcome {
        let (disposition, herald) = APNsResponse.classify(
            status: response.status,
            reason: reason,
            timestamp: timestamp,
            registeredAt: message.device.registeredAt.timeIntervalSince1970
        )
        let retryAfter =
            disposition == .retry ? DeliveryOutcome.retryAfter(response.header("retry-after"), now: now()) : nil
        if disposition == .credentialsBroken {
            logger.warning(
                "APNs rejected the provider credentials",
                metadata: [
                    "push.provider": "apns", "apns.key_id": "\(configuration.apps[message.device.appID]?.keyID ?? "")",
                    "error.type": "\(herald)",
                ]
            )
        } else {
            logger.debug(
                "APNs refused a notification",
                metadata: [
                    "push.provider": "apns", "device.token_hash": "\(message.device.tokenHash)",
                    "error.type": "\(herald)",
                ]
            )
        }
        return DeliveryOutcome(disposition, reason: herald, retryAfter: retryAfter)
    }
}
