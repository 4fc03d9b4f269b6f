import AsyncHTTPClient
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHTTP1

/// Sends through Firebase Cloud Messaging's HTTP v1 API, one `messages:send` request per message.
///
/// Each Herald app has its own service account; its OAuth access token is cached and shared
/// by concurrent sends (``FCMAccessTokens``). A 401 without an FcmError detail mints a new
/// token and retries that message once.
package final class FCMProvider: PushProvider {
    package let name = "fcm"

    /// One configured app: where to send and how to authenticate.
    private struct App: Sendable {
        var sendURL: String
        var tokens: FCMAccessTokens
    }

    private let apps: [String: App]
    private let client: HTTPClient
    private let timeout: TimeAmount
    private let concurrency: Int
    private let now: @Sendable () -> Date

    /// Parses every account's key up front; a bad key fails here, naming the app, never the key.
    package init(
        configuration: FCMConfiguration, client: HTTPClient, requestTimeout: Duration,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        let timeout = requestTimeout.timeAmount
        let base =
            configuration.baseURL.hasSuffix("/") ? String(configuration.baseURL.dropLast()) : configuration.baseURL
        var apps: [String: App] = [:]
        for (appID, account) in configuration.apps {
            let key = try Self.signingKey(app: appID, account)
            guard !account.projectID.contains("/"), !account.projectID.isEmpty else {
                throw ProviderConfigurationError("FCM app \"\(appID)\": project_id is not valid")
            }
            let tokens = FCMAccessTokens(
                account: account, key: key, tokenURL: configuration.tokenURL ?? account.tokenURI, client: client,
                timeout: timeout, now: now)
            apps[appID] = App(sendURL: "\(base)/v1/projects/\(account.projectID)/messages:send", tokens: tokens)
        }
        self.apps = apps
        self.client = client
        self.timeout = timeout
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
        await RequestDriver.sendEach(messages, concurrency: concurrency, gate: gate) {
            await self.sendOne($0, logger: logger)
        }
    }

    private func sendOne(_ message: PushMessage, logger: Logger) async -> DeliveryOutcome {
        var logger = logger
        logger[metadataKey: "push.provider"] = "fcm"
        logger[metadataKey: "outbox.id"] = "\(message.jobID)"
        logger[metadataKey: "device.token_hash"] = "\(message.device.tokenHash)"
        guard let app = apps[message.device.appID] else {
            logger.debug("FCM app not configured", metadata: ["push.app": "\(message.device.appID)"])
            return DeliveryOutcome(.credentialsBroken, reason: "app_not_configured")
        }
        let sentAt = now()
        guard let body = BodyFit.encode(message, { FCMMessageEncoder.requestBody($0, now: sentAt) }) else {
            logger.debug("FCM message too large")
            return DeliveryOutcome(.payloadRejected, reason: "payload_too_large")
        }
        let start = ContinuousClock.now
        func latency() -> Double { (ContinuousClock.now - start).seconds }

        var remints = 0
        while true {
            let token: Secret
            do {
                token = try await app.tokens.token(logger: logger)
            } catch let failure as FCMTokenFailure {
                var outcome = failure.outcome
                outcome.latency = latency()
                return outcome
            } catch {
                return DeliveryOutcome.transportFailure(error, latency: latency())
            }

            let response: HTTPClientResponse
            let responseBody: ByteBuffer
            do {
                var request = HTTPClientRequest(url: app.sendURL)
                request.method = .POST
                request.headers.add(name: "content-type", value: "application/json; charset=utf-8")
                request.headers.add(name: "authorization", value: "Bearer " + token.reveal())
                request.body = .bytes(ByteBuffer(bytes: body))
                response = try await client.execute(request, timeout: timeout, logger: logger)
                responseBody = try await response.body.collect(upTo: 64 * 1024)
            } catch {
                let outcome = DeliveryOutcome.transportFailure(error, latency: latency())
                logger.debug("FCM request failed", metadata: ["error.type": "\(type(of: error))"])
                return outcome
            }
            let status = Int(response.status.code)
            if status == 200 {
                logger.trace("FCM accepted message")
                return DeliveryOutcome(.accepted, reason: "ok", latency: latency())
            }
            let errorBody = FCMErrorClassifier.ErrorBody(json: Array(buffer: responseBody))
            if FCMErrorClassifier.needsNewAccessToken(httpStatus: status, body: errorBody), remints == 0 {
                remints += 1
                logger.debug("FCM refused the access token; minting a new one")
                await app.tokens.invalidate(token)
                continue
            }
            var outcome = FCMErrorClassifier.classify(
                httpStatus: status, body: errorBody, retryAfter: DeliveryOutcome.retryAfter(response.headers))
            outcome.latency = latency()
            if outcome.disposition == .credentialsBroken {
                logger.warning(
                    "FCM refused our credentials",
                    metadata: ["http.status": "\(status)", "push.reason": "\(outcome.reason)"])
            } else {
                logger.debug(
                    "FCM refused message",
                    metadata: [
                        "http.status": "\(status)", "push.outcome": "\(outcome.disposition.rawValue)",
                        "push.reason": "\(outcome.reason)",
                    ])
            }
            return outcome
        }
    }
}
