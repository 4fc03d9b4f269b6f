import AsyncHTTPClient
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHPACK

/// Sends through Firebase Cloud Messaging's HTTP v1 API, one `messages:send` request per message.
///
/// The requests of one `send` call leave in chunks of `maxConcurrentRequests`, each chunk written
/// together on one of the ``HTTP2Client``'s connections (FCM's v1 API speaks HTTP/2). Each
/// Herald app has its own service account; its OAuth access token (fetched over the
/// async-http-client `client`) is cached and shared by concurrent sends (``FCMAccessTokens``).
/// A 401 without an FcmError detail mints a new token and retries that message once; a request
/// FCM never saw (refused by GOAWAY, or its connection was gone) is resent once at once.
///
/// - Important: Both clients belong to the caller, who shuts them down.
package final class FCMProvider: PushProvider {
    package let name = "fcm"

    /// One configured app: where to send and how to authenticate.
    private struct App: Sendable {
        var path: String
        var tokens: FCMAccessTokens
    }

    private static let headers: HPACKHeaders = ["content-type": "application/json; charset=utf-8"]

    private let apps: [String: App]
    private let endpoint: HTTP2Endpoint
    private let http2: HTTP2Client
    private let timeout: Duration
    private let concurrency: Int
    private let now: @Sendable () -> Date

    /// Parses every account's key up front; a bad key fails here, naming the app, never the key.
    package init(
        configuration: FCMConfiguration,
        client: HTTPClient,
        http2: HTTP2Client,
        requestTimeout: Duration,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.endpoint = try HTTP2Endpoint(url: configuration.baseURL, setting: "endpoints.fcm")
        var apps: [String: App] = [:]
        for (appID, account) in configuration.apps {
            let key = try Self.signingKey(app: appID, account)
            guard !account.projectID.contains("/"), !account.projectID.isEmpty else {
                throw ProviderConfigurationError("FCM app \"\(appID)\": project_id is not valid")
            }
            let tokens = FCMAccessTokens(
                account: account,
                key: key,
                tokenURL: configuration.tokenURL ?? account.tokenURI,
                client: client,
                timeout: requestTimeout.timeAmount,
                now: now
            )
            apps[appID] = App(path: "/v1/projects/\(account.projectID)/messages:send", tokens: tokens)
        }
        self.apps = apps
        self.http2 = http2
        self.timeout = requestTimeout
        self.concurrency = max(1, configuration.maxConcurrentRequests)
        self.now = now
    }

    /// Parses a service account's key (also `herald check-config`); the error names the app, never
    /// the key.
    package static func signingKey(app: String, _ account: FCMServiceAccount) throws -> JWT.SigningKey {
        do {
            return try JWT.rs256Key(pem: account.privateKeyPEM)
        } catch {
            throw ProviderConfigurationError("FCM app \"\(app)\": private_key is not a PEM-encoded RSA key")
        }
    }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)
        var bodies = [ByteBuffer?](repeating: nil, count: messages.count)
        var ready: [Int] = []
        ready.reserveCapacity(messages.count)
        let sentAt = now()
        for (i, message) in messages.enumerated() {
            guard apps[message.device.appID] != nil else {
                logger.debug(
                    "FCM app not configured",
                    metadata: ["push.provider": "fcm", "push.app": "\(message.device.appID)"]
                )
                outcomes[i] = DeliveryOutcome(.credentialsBroken, reason: .appNotConfigured)
                continue
            }
            guard let body = BodyFit.encode(message, { FCMMessageEncoder.requestBody($0, now: sentAt) }) else {
                logger.debug(
                    "FCM message too large",
                    metadata: ["push.provider": "fcm", "outbox.id": "\(message.jobID)"]
                )
                outcomes[i] = DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge)
                continue
            }
            bodies[i] = ByteBuffer(bytes: body)
            ready.append(i)
        }
        let sent = await RequestDriver.sendChunked(messages, indexes: ready, chunkSize: concurrency, gate: gate) {
            chunk in
            await self.deliver(chunk.map { (messages[$0], bodies[$0]!) }, since: .now, logger: logger)
        }
        for (i, outcome) in sent.enumerated() where outcome != nil { outcomes[i] = outcome }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    /// One chunk, written together; the messages whose access token FCM refused (after one
    /// re-mint) or that FCM never saw go once more. Never throws.
    private func deliver(
        _ chunk: [(message: PushMessage, body: ByteBuffer)],
        since start: ContinuousClock.Instant,
        logger: Logger
    ) async -> [DeliveryOutcome] {
        func latency() -> Duration { ContinuousClock.now - start }
        var outcomes = [DeliveryOutcome?](repeating: nil, count: chunk.count)
        var reminted = [Bool](repeating: false, count: chunk.count)
        var pending = Array(chunk.indices)
        while !pending.isEmpty {
            // One access token per app for the whole round.
            var tokens: [String: Secret] = [:]
            var batch: [(k: Int, request: HTTP2Request)] = []
            for k in pending {
                let appID = chunk[k].message.device.appID
                let app = apps[appID]!
                if tokens[appID] == nil {
                    do {
                        tokens[appID] = try await app.tokens.token(logger: logger)
                    } catch let failure as FCMTokenFailure {
                        outcomes[k] = failure.outcome
                        outcomes[k]!.latency = latency()
                        continue
                    } catch {
                        outcomes[k] = DeliveryOutcome.transportFailure(error, latency: latency())
                        continue
                    }
                }
                batch.append(
                    (
                        k,
                        HTTP2Request(
                            path: app.path,
                            headers: Self.headers,
                            authorization: "Bearer " + tokens[appID]!.reveal(),
                            body: chunk[k].body
                        )
                    )
                )
            }
            pending = []
            let results = await http2.executeResendingUnsent(batch.map(\.request), to: endpoint, timeout: timeout)
            for ((k, _), result) in zip(batch, results) {
                let message = chunk[k].message
                switch result {
                case .failure(let error):
                    outcomes[k] = DeliveryOutcome.transportFailure(error, latency: latency())
                    logger.debug(
                        "FCM request failed",
                        metadata: [
                            "push.provider": "fcm", "outbox.id": "\(message.jobID)",
                            "device.token_hash": "\(message.device.tokenHash)", "error.type": "\(outcomes[k]!.reason)",
                        ]
                    )
                case .success(let response):
                    if response.status == 200 {
                        outcomes[k] = DeliveryOutcome(.accepted, reason: .ok, latency: latency())
                        continue
                    }
                    let errorBody = FCMErrorClassifier.ErrorBody(json: Array(buffer: response.body))
                    if FCMErrorClassifier.needsNewAccessToken(httpStatus: response.status, body: errorBody),
                        !reminted[k]
                    {
                        reminted[k] = true
                        let appID = message.device.appID
                        if let stale = tokens[appID] {
                            logger.debug(
                                "FCM refused the access token; minting a new one",
                                metadata: ["push.provider": "fcm"]
                            )
                            await apps[appID]!.tokens.invalidate(stale)
                        }
                        pending.append(k)
                        continue
                    }
                    var outcome = FCMErrorClassifier.classify(
                        httpStatus: response.status,
                        body: errorBody,
                        retryAfter: DeliveryOutcome.retryAfter(response.header("retry-after"), now: now())
                    )
                    outcome.latency = latency()
                    let metadata: Logger.Metadata = [
                        "push.provider": "fcm", "outbox.id": "\(message.jobID)",
                        "device.token_hash": "\(message.device.tokenHash)", "http.status": "\(response.status)",
                        "push.outcome": "\(outcome.disposition.rawValue)", "push.reason": "\(outcome.reason)",
                    ]
                    if outcome.disposition == .credentialsBroken {
                        logger.warning("FCM refused our credentials", metadata: metadata)
                    } else {
                        logger.debug("FCM refused message", metadata: metadata)
                    }
                    outcomes[k] = outcome
                }
            }
        }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }
}
