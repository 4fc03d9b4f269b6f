import Crypto
import Foundation
import HeraldCore
import NIOConcurrencyHelpers
import Providers

/// Simulated APNs provider API (`POST /3/device/<token>`), token (JWT) authentication only.
///
/// Validation follows Apple's documented order: method → path → provider token →
/// headers → body → token state (the fault plan). Accepted requests are recorded with their
/// headers minus `authorization`, plus `x-simulator-jwt-iat`, `x-simulator-jwt-kid` and
/// `x-simulator-jwt-hash` (a short hash of the JWT) so tests can see re-minting without the JWT.
///
/// Mock-policy choices (Apple documents none): a body that is not a JSON object with an `aps`
/// dictionary gets 400 `BadPayload`; `iat` may be a number or a numeric string and may be at most
/// 60 s in the future; per-connection rules (`UnrelatedKeyIdInToken`,
/// `TooManyProviderTokenUpdates`) are not emulated because a service does not see connections.
package struct APNsService: SimulatedService {
    package var provider: String { "apns" }

    /// Push types Apple documents, with the suffix their `apns-topic` carries.
    static let pushTypeTopicSuffix: [String: String] = [
        "alert": "", "background": "", "complication": ".complication", "controls": ".push-type.controls",
        "fileprovider": ".pushkit.fileprovider", "liveactivity": ".push-type.liveactivity",
        "location": ".location-query", "mdm": "", "pushtotalk": ".voip-ptt", "voip": ".voip",
        "widgets": ".push-type.widgets",
    ]

    /// Answer 400 `BadPriority` for a `background` push sent with priority 10 ("an error" per
    /// Apple, no reason documented). Default true.
    package var rejectHighPriorityBackground: Bool
    /// Largest provider-token age accepted, in seconds. Default 3600 (Apple's one hour).
    package var maximumTokenAge: TimeInterval
    /// Provider tokens whose signature was already checked, with their key and `iat`.
    private let verifiedTokens = NIOLockedValueBox<[String: (JWT.Decoded, SimulatorKeyring.APNsKey, Double)]>([:])

    package init(rejectHighPriorityBackground: Bool = true, maximumTokenAge: TimeInterval = 3600) {
        self.rejectHighPriorityBackground = rejectHighPriorityBackground
        self.maximumTokenAge = maximumTokenAge
    }

    package func matches(_ request: SimulatorRequest) -> Bool {
        request.path == "/3/device" || request.path.hasPrefix("/3/device/")
    }

    package func targetToken(_ request: SimulatorRequest) -> String? {
        let token = String(request.path.dropFirst("/3/device/".count))
        return token.isEmpty ? nil : token
    }

    package func handle(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
    {
        let apnsID = request.header("apns-id").map { $0.lowercased() } ?? UUID().uuidString.lowercased()
        func error(_ status: Int, _ reason: String, timestamp: Date? = nil, retryAfter: Int? = nil) -> SimulatorResponse
        {
            var body: [String: Any] = ["reason": reason]
            if let timestamp { body["timestamp"] = Int64(timestamp.timeIntervalSince1970 * 1000) }
            var headers = [(name: "apns-id", value: apnsID)]
            if let retryAfter { headers.append((name: "retry-after", value: String(retryAfter))) }
            return .json(status: status, body, headers: headers)
        }

        // Method and path.
        guard request.method == "POST" else { return error(405, "MethodNotAllowed") }
        guard let token = targetToken(request) else { return error(400, "MissingDeviceToken") }
        guard !token.contains("/") else { return error(404, "BadPath") }

        // Provider token.
        let now = context.now()
        let jwt: JWT.Decoded
        let key: SimulatorKeyring.APNsKey
        switch verifyProviderToken(request, keyring: context.keyring, now: now) {
        case .failure(let reason): return error(403, reason.rawValue)
        case .success(let verified): (jwt, key) = verified
        }

        // Headers.
        for name in ["apns-id", "apns-push-type", "apns-expiration", "apns-priority", "apns-topic", "apns-collapse-id"]
        where request.headers.filter({ $0.name == name }).count > 1 {
            return error(400, "DuplicateHeaders")
        }
        let pushType = request.header("apns-push-type") ?? "alert"
        guard let topicSuffix = Self.pushTypeTopicSuffix[pushType] else { return error(400, "InvalidPushType") }
        if let id = request.header("apns-id"), UUID(uuidString: id) == nil { return error(400, "BadMessageId") }
        if let expiration = request.header("apns-expiration"), Int64(expiration).map({ $0 < 0 }) ?? true {
            return error(400, "BadExpirationDate")
        }
        if let priority = request.header("apns-priority") {
            guard ["1", "5", "10"].contains(priority) else { return error(400, "BadPriority") }
            if priority == "10", pushType == "background", rejectHighPriorityBackground {
                return error(400, "BadPriority")
            }
        }
        guard let topic = request.header("apns-topic"), !topic.isEmpty else { return error(400, "MissingTopic") }
        guard topic.hasSuffix(topicSuffix) else { return error(400, "BadTopic") }
        let bundleID = String(topic.dropLast(topicSuffix.count))
        guard key.topics.isEmpty || key.topics.contains(bundleID) else { return error(400, "TopicDisallowed") }
        if let collapseID = request.header("apns-collapse-id"), collapseID.utf8.count > 64 {
            return error(400, "BadCollapseId")
        }

        // Body.
        guard !request.body.isEmpty else { return error(400, "PayloadEmpty") }
        guard request.body.count <= (pushType == "voip" ? 5120 : 4096) else { return error(413, "PayloadTooLarge") }
        guard let payload = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
            payload["aps"] is [String: Any]
        else { return error(400, "BadPayload") }

        // Token state: the token must be hex; then the fault plan's verdict for this token.
        guard token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else { return error(400, "BadDeviceToken") }
        if let fault {
            let reason = fault.reason ?? Self.defaultReason(status: fault.status)
            let timestamp = fault.status == 410 && reason == "Unregistered" ? now : nil
            return error(fault.status, reason, timestamp: timestamp, retryAfter: fault.retryAfter)
        }

        var headers: [String: String] = [:]
        for (name, value) in request.headers where name != "authorization" { headers[name] = value }
        headers[":path"] = request.path
        headers["x-simulator-jwt-kid"] = key.keyID
        headers["x-simulator-jwt-iat"] = jwt.claims["iat"].map { "\($0)" }
        headers["x-simulator-jwt-hash"] = Hex.encode(SHA256.hash(data: jwt.signature).prefix(6))
        headers["x-simulator-http-version"] = request.httpVersion
        context.recorder.record(
            SimulatorRecord(
                provider: provider,
                token: token,
                headers: headers,
                payload: String(decoding: request.body, as: UTF8.self),
                receivedAt: request.receivedAt
            )
        )
        return SimulatorResponse(status: 200, headers: [("apns-id", apnsID)])
    }

    enum AuthFailure: String, Error {
        case missing = "MissingProviderToken"
        case invalid = "InvalidProviderToken"
        case expired = "ExpiredProviderToken"
    }

    /// Checks `authorization: bearer <JWT>`: ES256 by a trusted key (`kid`), `iss` = its team,
    /// `iat` within `maximumTokenAge` and not more than 60 s ahead.
    func verifyProviderToken(
        _ request: SimulatorRequest,
        keyring: SimulatorKeyring,
        now: Date
    )
        -> Result<(JWT.Decoded, SimulatorKeyring.APNsKey), AuthFailure>
    {
        guard let authorization = request.header("authorization") else { return .failure(.missing) }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return .failure(.invalid) }
        let text = String(parts[1])
        let jwt: JWT.Decoded
        let key: SimulatorKeyring.APNsKey
        let iat: Double
        // Like APNs, verify a provider token's signature once and trust it while it is fresh:
        // its claims cannot change without changing the token.
        if let hit = verifiedTokens.withLockedValue({ $0[text] }), keyring.apnsKey(keyID: hit.1.keyID) != nil {
            (jwt, key, iat) = hit
        } else {
            guard let decoded = JWT.decode(text),
                let keyID = decoded.header["kid"],
                let trusted = keyring.apnsKey(keyID: keyID),
                JWT.verifyES256(decoded, publicKey: trusted.publicKey),
                decoded.claims["iss"] as? String == trusted.teamID
            else { return .failure(.invalid) }
            let rawIAT = decoded.claims["iat"]
            guard let issued = (rawIAT as? NSNumber)?.doubleValue ?? (rawIAT as? String).flatMap({ Double($0) }) else {
                return .failure(.invalid)
            }
            (jwt, key, iat) = (decoded, trusted, issued)
            verifiedTokens.withLockedValue { cache in
                if cache.count > 1_000 { cache.removeAll() }
                cache[text] = (decoded, trusted, issued)
            }
        }
        let age = now.timeIntervalSince1970 - iat
        if age > maximumTokenAge { return .failure(.expired) }
        if age < -60 { return .failure(.invalid) }
        return .success((jwt, key))
    }

    static func defaultReason(status: Int) -> String {
        switch status {
        case 400: "BadDeviceToken"
        case 403: "Forbidden"
        case 404: "BadPath"
        case 405: "MethodNotAllowed"
        case 410: "Unregistered"
        case 413: "PayloadTooLarge"
        case 429: "TooManyRequests"
        case 500: "InternalServerError"
        case 503: "ServiceUnavailable"
        default: "InternalServerError"
        }
    }
}
