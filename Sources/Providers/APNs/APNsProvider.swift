import AsyncHTTPClient
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHTTP1

/// Delivers to Apple Push Notification service over HTTP/2 with token (JWT) authentication.
///
/// One `send` call runs its messages concurrently (at most `maxConcurrentRequests` at once)
/// over the HTTP client's pooled HTTP/2 connections. The provider JWT of each key is cached and
/// shared by every request, re-minted after `tokenLifetime`, and re-minted once (with the
/// message retried once) when APNs answers `ExpiredProviderToken`. A 429
/// `TooManyProviderTokenUpdates` never triggers a re-mint: the message is retried later. A
/// request that failed because its pooled connection was already closed (it never left) is
/// resent once at once.
///
/// - Important: The `HTTPClient` belongs to the caller, who shuts it down.
package final class APNsProvider: PushProvider {
    package let name = "apns"

    private let configuration: APNsConfiguration
    private let client: HTTPClient
    private let timeout: TimeAmount
    private let tokens: APNsTokenCache
    private let now: @Sendable () -> Date

    /// Parses every app's key once.
    ///
    /// - Throws: ``ProviderConfigurationError`` naming the app and key id (never the key) when a
    ///   key cannot be parsed.
    package init(
        configuration: APNsConfiguration, client: HTTPClient, requestTimeout: Duration,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        var keys: [String: APNsTokenCache.Key] = [:]
        for (appID, credentials) in configuration.apps.sorted(by: { $0.key < $1.key }) {
            let signingKey = try Self.signingKey(app: appID, credentials)
            keys[credentials.keyID] = .init(teamID: credentials.teamID, keyID: credentials.keyID, signingKey: signingKey)
        }
        guard configuration.maxConcurrentRequests >= 1 else {
            throw ProviderConfigurationError("apns: maxConcurrentRequests must be at least 1")
        }
        self.configuration = configuration
        self.client = client
        self.timeout = requestTimeout.timeAmount
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
                "apns: app \(app): key \(credentials.keyID) is not a PEM-encoded P-256 (.p8) private key")
        }
    }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        await RequestDriver.sendEach(messages, concurrency: configuration.maxConcurrentRequests, gate: gate) {
            await self.deliver($0, logger: logger)
        }
    }

    /// One message, with at most one retry after a re-mint. Never throws.
    private func deliver(_ message: PushMessage, logger: Logger) async -> DeliveryOutcome {
        let start = ContinuousClock.now
        func seconds() -> Double {
            let elapsed = ContinuousClock.now - start
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        guard let credentials = configuration.apps[message.device.appID] else {
            return DeliveryOutcome(.credentialsBroken, reason: "app_not_configured")
        }
        // Apple rejects larger bodies with 413: a longer body is sent as the preview that fits.
        guard let body = BodyFit.encode(message, { m in
            (try? APNsRequest.payload(for: m)).flatMap { $0.count <= APNsRequest.maximumPayloadSize ? $0 : nil }
        }) else {
            return DeliveryOutcome(.payloadRejected, reason: "payload_too_large")
        }
        let environment = message.device.environment.lowercased()
        let base = environment == "sandbox" || environment == "development"
            ? configuration.sandboxURL : configuration.productionURL
        let token = message.device.token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        var request = HTTPClientRequest(url: base.trimmingSuffix("/") + "/3/device/" + token)
        request.method = .POST
        for (name, value) in APNsRequest.headers(for: message, topic: credentials.topic) {
            request.headers.add(name: name, value: value)
        }
        request.body = .bytes(ByteBuffer(bytes: body))

        var reminted = false
        var resent = false
        while true {
            let jwt: (token: String, generation: Int)
            do {
                jwt = try await tokens.token(keyID: credentials.keyID)
            } catch {
                return DeliveryOutcome(.credentialsBroken, reason: "jwt_signing_failed", latency: seconds())
            }
            request.headers.replaceOrAdd(name: "authorization", value: "bearer " + jwt.token)
            let status: Int
            let headers: HTTPHeaders
            let responseBody: [UInt8]
            do {
                let response = try await client.execute(request, timeout: timeout, logger: logger)
                status = Int(response.status.code)
                headers = response.headers
                responseBody = Array(buffer: try await response.body.collect(upTo: 16 * 1024))
            } catch {
                // A pooled connection the server had just closed: the request never left, so one
                // immediate retry (on a new connection) cannot duplicate it.
                if !resent, let channelError = error as? ChannelError, channelError == .ioOnClosedChannel {
                    resent = true
                    continue
                }
                let outcome = DeliveryOutcome.transportFailure(error, latency: seconds())
                logger.debug(
                    "APNs request failed",
                    metadata: ["push.provider": "apns", "device.token_hash": "\(message.device.tokenHash)",
                        "error.type": "\(outcome.reason)"])
                return outcome
            }
            if status == 200 { return DeliveryOutcome(.accepted, reason: "ok", latency: seconds()) }
            let (reason, timestamp) = APNsResponse.parseBody(responseBody)
            if status == 403, reason == "ExpiredProviderToken", !reminted {
                reminted = true
                await tokens.expire(keyID: credentials.keyID, generation: jwt.generation)
                continue
            }
            let (disposition, herald) = APNsResponse.classify(
                status: status, reason: reason, timestamp: timestamp, registeredAt: message.device.registeredAt)
            let retryAfter = disposition == .retry ? DeliveryOutcome.retryAfter(headers, now: now()) : nil
            if disposition == .credentialsBroken {
                logger.warning(
                    "APNs rejected the provider credentials",
                    metadata: ["push.provider": "apns", "apns.key_id": "\(credentials.keyID)", "error.type": "\(herald)"])
            } else {
                logger.debug(
                    "APNs refused a notification",
                    metadata: ["push.provider": "apns", "device.token_hash": "\(message.device.tokenHash)",
                        "error.type": "\(herald)"])
            }
            return DeliveryOutcome(disposition, reason: herald, retryAfter: retryAfter, latency: seconds())
        }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        var text = self
        while text.hasSuffix(suffix) { text.removeLast(suffix.count) }
        return text
    }
}
