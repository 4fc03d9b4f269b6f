import AsyncHTTPClient
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Why no access token could be had, already classified for every message waiting on it.
struct FCMTokenFailure: Error, CustomStringConvertible {
    var outcome: DeliveryOutcome
    var description: String { "FCMTokenFailure(\(outcome))" }
}

/// One service account's OAuth 2.0 access token: minted from an RS256 assertion, cached until
/// shortly before it expires, shared by every concurrent send.
///
/// - Important: an actor, so concurrent sends that find no valid token start exactly one token
///   request (the in-flight `Task`, owned here) and all await its result. Failures are not
///   cached: the next send tries again.
actor FCMAccessTokens {
    struct Token: Sendable {
        var value: Secret
        /// Refresh at or after this instant (a margin before the real expiry).
        var refreshAt: Date
    }

    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    private let account: FCMServiceAccount
    private let key: JWT.SigningKey
    private let tokenURL: String
    private let client: HTTPClient
    private let timeout: TimeAmount
    private let now: @Sendable () -> Date
    private var current: Token?
    private var inFlight: Task<Token, any Error>?

    init(
        account: FCMServiceAccount,
        key: JWT.SigningKey,
        tokenURL: String,
        client: HTTPClient,
        timeout: TimeAmount,
        now: @escaping @Sendable () -> Date
    ) {
        self.account = account
        self.key = key
        self.tokenURL = tokenURL
        self.client = client
        self.timeout = timeout
        self.now = now
    }

    /// A valid access token, from the cache or a (shared) token request.
    func token(logger: Logger) async throws -> Secret {
        if let current, now() < current.refreshAt { return current.value }
        let task: Task<Token, any Error>
        if let inFlight {
            task = inFlight
        } else {
            let (account, key, tokenURL, client, timeout, now) = (account, key, tokenURL, client, timeout, now)
            task = Task {
                try await Self.fetch(
                    account: account,
                    key: key,
                    tokenURL: tokenURL,
                    client: client,
                    timeout: timeout,
                    now: now,
                    logger: logger
                )
            }
            inFlight = task
        }
        do {
            let token = try await task.value
            if inFlight == task {
                inFlight = nil
                current = token
            }
            return token.value
        } catch {
            if inFlight == task { inFlight = nil }
            throw error
        }
    }

    /// Forgets `stale` after FCM refused it (401), so the next ``token(logger:)`` mints a new one.
    /// A token other senders already replaced is kept.
    func invalidate(_ stale: Secret) {
        if current?.value == stale { current = nil }
    }

    /// Signs an assertion and exchanges it at the token endpoint.
    @concurrent private static func fetch(
        account: FCMServiceAccount,
        key: JWT.SigningKey,
        tokenURL: String,
        client: HTTPClient,
        timeout: TimeAmount,
        now: @Sendable () -> Date,
        logger: Logger
    ) async throws -> Token {
        let issuedAt = now()
        let iat = Int(issuedAt.timeIntervalSince1970)
        let assertion: String
        do {
            var header: [String: String] = [:]
            if let kid = account.privateKeyID { header["kid"] = kid }
            assertion = try JWT.sign(
                header: header,
                claims: ["iss": account.clientEmail, "scope": scope, "aud": tokenURL, "iat": iat, "exp": iat + 3600],
                key: key
            )
        } catch {
            throw FCMTokenFailure(outcome: DeliveryOutcome(.credentialsBroken, reason: .assertionSigningFailed))
        }
        var request = HTTPClientRequest(url: tokenURL)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "accept", value: "application/json")
        let form = "grant_type=" + formEncode(grantType) + "&assertion=" + formEncode(assertion)
        request.body = .bytes(ByteBuffer(string: form))

        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await client.execute(request, timeout: timeout, logger: logger)
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch {
            logger.warning(
                "FCM token request failed",
                metadata: ["push.provider": "fcm", "error.type": "\(type(of: error))"]
            )
            let transport = DeliveryOutcome.transportFailure(error)
            throw FCMTokenFailure(outcome: DeliveryOutcome(.retry, reason: transport.reason.ofTokenRequest))
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any]
        guard response.status == .ok else {
            let error = (object?["error"] as? String) ?? ""
            let retryAfter = DeliveryOutcome.retryAfter(response.headers)
            let outcome: DeliveryOutcome
            switch (response.status.code, error) {
            case (_, "internal_failure"), (_, "server_error"), (_, "temporarily_unavailable"), (408, _), (429, _),
                (500...599, _):
                outcome = DeliveryOutcome(.retry, reason: .tokenUnavailable, retryAfter: retryAfter)
            case (_, "invalid_grant"):
                outcome = DeliveryOutcome(.credentialsBroken, reason: .invalidGrant)
            case (_, "invalid_client"), (_, "unauthorized_client"):
                outcome = DeliveryOutcome(.credentialsBroken, reason: .invalidClient)
            default:
                outcome = DeliveryOutcome(.credentialsBroken, reason: .tokenRejected)
            }
            logger.warning(
                "FCM token endpoint refused the assertion",
                metadata: [
                    "push.provider": "fcm", "http.status": "\(response.status.code)",
                    "push.reason": "\(outcome.reason)",
                ]
            )
            throw FCMTokenFailure(outcome: outcome)
        }
        guard let accessToken = object?["access_token"] as? String, !accessToken.isEmpty else {
            throw FCMTokenFailure(outcome: DeliveryOutcome(.retry, reason: .tokenBadResponse))
        }
        // google-auth accepts expires_in as a number or a numeric string.
        let expiresIn: Double =
            JSONNumber.double(object?["expires_in"]) ?? (object?["expires_in"] as? String).flatMap(Double.init) ?? 3600
        // Refresh 5 minutes early, or halfway through a short-lived token.
        let lifetime = max(expiresIn - 300, expiresIn / 2)
        return Token(value: Secret(accessToken), refreshAt: issuedAt.addingTimeInterval(lifetime))
    }

    /// `application/x-www-form-urlencoded` value encoding (RFC 3986 unreserved kept as is).
    static func formEncode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }
}
