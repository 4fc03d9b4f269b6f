import Crypto
import Foundation
import HeraldCore
import Providers

/// A simulated Web Push service (RFC 8030 / 8291 / 8292): one endpoint per subscription at
/// `/wpush/<subscriptionID>`, plus the control route `POST /_sim/webpush/subscriptions`.
///
/// For each push it verifies VAPID (ES256 over the JWT with the `k` key; `aud` = this server's
/// origin; `now < exp ≤ now + 24 h`; `sub` present; `k` = the subscription's application server
/// key when the subscription is restricted), the `TTL`, `Urgency`, `Topic` and `Content-Encoding`
/// headers and the body size, then decrypts the body with the subscription's user-agent key and
/// records the plaintext (token = subscription id). Answers follow autopush: JSON
/// `{"code", "errno", "error", "message"}` errors, 201 + `Location` on success.
///
/// Status choices: no `Authorization` → 401; an invalid one → 403; unknown subscription → 410;
/// header or crypto problems → 400; body over ``maxBodyLength`` → 413.
package struct WebPushService: SimulatedService {
    package let provider = "webpush"
    /// Path prefix of subscription endpoints.
    package static let pushPathPrefix = "/wpush/"
    /// Control route creating a subscription; answers `{"id", "endpoint", "p256dh", "auth", "keys"}`.
    package static let subscriptionsPath = "/_sim/webpush/subscriptions"
    /// Bodies above this many bytes get 413. Default 4096 (RFC 8030 §7.2 forbids 413 at or below it).
    package var maxBodyLength: Int

    package init(maxBodyLength: Int = 4096) {
        self.maxBodyLength = maxBodyLength
    }

    package func matches(_ request: SimulatorRequest) -> Bool {
        request.path.hasPrefix(Self.pushPathPrefix) || request.path == Self.subscriptionsPath
    }

    package func targetToken(_ request: SimulatorRequest) -> String? {
        guard request.path.hasPrefix(Self.pushPathPrefix) else { return nil }
        let id = String(request.path.dropFirst(Self.pushPathPrefix.count))
        return id.isEmpty ? nil : id
    }

    // MARK: - Subscriptions

    /// Creates a subscription in `context`'s keyring and returns what a browser would hand the
    /// application server. With `applicationServerKey` (base64url VAPID public key) the
    /// subscription is restricted: pushes must carry VAPID with exactly that key (RFC 8292 §4.2).
    ///
    /// Like autopush's v2 endpoints, a restricted subscription id carries a hash of its key
    /// (`<random>.<sha256(key) prefix>`), so the restriction needs no extra state.
    package static func createSubscription(
        context: SimulatorContext,
        applicationServerKey: String? = nil
    ) -> (endpoint: String, p256dh: String, auth: String) {
        let privateKey = P256.KeyAgreement.PrivateKey()
        let auth = SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }
        var id = Base64URL.encode(SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) })
        if let key = applicationServerKey, let bytes = Base64URL.decode(key) {
            id += "." + keyTag(bytes)
        }
        context.keyring.addWebPushSubscription(.init(id: id, privateKey: privateKey, authSecret: auth))
        return (
            endpoint: context.baseURL + pushPathPrefix + id,
            p256dh: Base64URL.encode(privateKey.publicKey.x963Representation),
            auth: Base64URL.encode(auth)
        )
    }

    /// The subscription id at the end of an endpoint URL.
    package static func subscriptionID(endpoint: String) -> String? {
        guard let range = endpoint.range(of: pushPathPrefix) else { return nil }
        return String(endpoint[range.upperBound...])
    }

    private static func keyTag(_ key: Data) -> String {
        Base64URL.encode(Data(SHA256.hash(data: key)).prefix(16))
    }

    private func createSubscriptionResponse(_ request: SimulatorRequest, context: SimulatorContext) -> SimulatorResponse
    {
        guard request.method == "POST" else { return Self.error(405, errno: 999, "use POST") }
        var key: String?
        if !request.body.isEmpty {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any] else {
                return Self.error(400, errno: 999, "body must be a JSON object")
            }
            key = object["applicationServerKey"] as? String
        }
        let subscription = Self.createSubscription(context: context, applicationServerKey: key)
        let object: [String: Any] = [
            "id": Self.subscriptionID(endpoint: subscription.endpoint) ?? "",
            "endpoint": subscription.endpoint, "p256dh": subscription.p256dh, "auth": subscription.auth,
            "keys": ["p256dh": subscription.p256dh, "auth": subscription.auth],
        ]
        return .json(status: 201, object)
    }

    // MARK: - Push

    package func handle(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
    {
        if request.path == Self.subscriptionsPath { return createSubscriptionResponse(request, context: context) }
        guard request.method == "POST" else { return Self.error(405, errno: 999, "use POST") }
        guard let id = targetToken(request) else { return Self.error(404, errno: 102, "Invalid endpoint") }

        let vapidKey: Data
        switch verifyVAPID(request, subscriptionID: id, context: context) {
        case .success(let key): vapidKey = key
        case .failure(let rejection): return rejection.response
        }

        if let fault {
            var response = Self.error(fault.status, errno: Self.errno(status: fault.status), fault.reason ?? "Injected")
            if let seconds = fault.retryAfter { response.headers.append(("retry-after", String(seconds))) }
            return response
        }

        guard let subscription = context.keyring.webPushSubscription(id: id) else {
            return Self.error(410, errno: 106, "Subscription is no longer valid")
        }
        guard let ttl = request.header("ttl"), !ttl.isEmpty, ttl.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return Self.error(400, errno: 111, "Missing or invalid TTL header")
        }
        if let urgency = request.header("urgency"), !["very-low", "low", "normal", "high"].contains(urgency) {
            return Self.error(400, errno: 110, "Invalid Urgency header")
        }
        if let topic = request.header("topic"), topic.isEmpty || topic.count > 32 || !topic.allSatisfy(Self.isBase64URL)
        {
            return Self.error(400, errno: 113, "Invalid Topic header")
        }
        guard request.header("content-encoding")?.lowercased() == "aes128gcm" else {
            return Self.error(400, errno: 110, "Content-Encoding must be aes128gcm")
        }
        guard request.body.count <= maxBodyLength else {
            return Self.error(413, errno: 104, "Payload too large")
        }
        let body = Data(request.body)
        if body.count >= WebPushCrypto.headerLength, body[21..<86] == vapidKey {
            return Self.error(400, errno: 110, "The VAPID key must not be the ECDH key")
        }
        let plaintext: Data
        do {
            plaintext = try WebPushCrypto.decrypt(
                body: body,
                userAgentPrivateKey: subscription.privateKey,
                authSecret: subscription.authSecret
            )
        } catch {
            return Self.error(400, errno: 110, "Decryption failed: \(error)")
        }

        var headers: [String: String] = [:]
        for header in request.headers where header.name != "authorization" && headers[header.name] == nil {
            headers[header.name] = header.value
        }
        context.recorder.record(
            SimulatorRecord(
                provider: provider,
                token: id,
                headers: headers,
                payload: String(decoding: plaintext, as: UTF8.self),
                receivedAt: request.receivedAt
            )
        )
        let location = context.baseURL + "/wpush-msg/" + UUID().uuidString.lowercased()
        return SimulatorResponse(status: 201, headers: [("location", location), ("ttl", ttl)])
    }

    // MARK: - VAPID

    private struct Rejection: Error {
        var response: SimulatorResponse
    }

    /// Checks RFC 8292 authorization; returns the `k` key bytes.
    private func verifyVAPID(
        _ request: SimulatorRequest,
        subscriptionID: String,
        context: SimulatorContext
    ) -> Result<Data, Rejection> {
        func forbidden(_ message: String) -> Result<Data, Rejection> {
            .failure(Rejection(response: Self.error(403, errno: 109, message)))
        }
        guard let header = request.header("authorization") else {
            return .failure(Rejection(response: Self.error(401, errno: 109, "Missing VAPID authorization")))
        }
        guard let space = header.firstIndex(of: " "), header[..<space].lowercased() == "vapid" else {
            return forbidden("Authorization scheme must be vapid")
        }
        var parameters: [String: String] = [:]
        for part in header[header.index(after: space)...].split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces)
            guard let equals = pair.firstIndex(of: "=") else { continue }
            parameters[pair[..<equals].lowercased()] = String(pair[pair.index(after: equals)...])
        }
        guard let token = parameters["t"], let k = parameters["k"] else { return forbidden("VAPID needs t and k") }
        guard let keyBytes = Base64URL.decode(k), keyBytes.count == 65,
            let publicKey = try? P256.Signing.PublicKey(x963Representation: keyBytes)
        else { return forbidden("VAPID k is not an uncompressed P-256 key") }
        guard let jwt = JWT.decode(token), JWT.verifyES256(jwt, publicKey: publicKey) else {
            return forbidden("VAPID JWT signature invalid")
        }
        let claims = jwt.claims
        let origin = URL(string: context.baseURL).flatMap(VAPIDAuthorizer.origin(of:))
        guard let aud = claims["aud"] as? String, aud == origin else {
            return forbidden("VAPID aud is not this origin")
        }
        guard let exp = (claims["exp"] as? NSNumber)?.doubleValue else { return forbidden("VAPID exp missing") }
        let now = context.now().timeIntervalSince1970
        guard exp > now else { return forbidden("VAPID token expired") }
        guard exp <= now + 24 * 3600 else { return forbidden("VAPID exp more than 24 hours ahead") }
        guard let sub = claims["sub"] as? String, !sub.isEmpty else { return forbidden("VAPID sub missing") }
        if let dot = subscriptionID.lastIndex(of: "."),
            subscriptionID[subscriptionID.index(after: dot)...] != Self.keyTag(keyBytes)
        {
            return forbidden("VAPID key does not match the subscription")
        }
        return .success(keyBytes)
    }

    // MARK: - Wire format

    private static func isBase64URL(_ c: Character) -> Bool {
        c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == "_")
    }

    private static func errno(status: Int) -> Int {
        switch status {
        case 400: 110
        case 401, 403: 109
        case 404: 102
        case 410: 106
        case 413: 104
        case 429: 201
        case 503: 201
        case 502: 900
        default: 999
        }
    }

    private static func error(_ status: Int, errno: Int, _ message: String) -> SimulatorResponse {
        let phrase = HTTPStatusPhrase.of(status)
        let object: [String: Any] = [
            "code": status, "errno": errno, "error": phrase, "message": message,
            "more_info": "http://autopush.readthedocs.io/en/latest/http.html#error-codes",
        ]
        return .json(status: status, object)
    }
}

private enum HTTPStatusPhrase {
    static func of(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 410: "Gone"
        case 413: "Payload Too Large"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Error"
        }
    }
}
