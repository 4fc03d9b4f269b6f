import Foundation
import HeraldCore
import Providers

/// Simulated Google OAuth 2.0 token endpoint (`POST /token`) for service-account assertions.
///
/// Verifies the RS256 assertion: a trusted `iss`
/// (``SimulatorKeyring/serviceAccount(email:)``), the signature, `aud` = this endpoint,
/// an FCM scope, `exp - iat ≤ 3600`, `iat` at most 60 s ahead and `exp` not passed. Issues random
/// access tokens for the account's project, valid for ``tokenLifetime``. Each token issued is
/// recorded (provider `oauth`, token = the client email, empty payload) so tests can count token
/// requests; the access token itself is never recorded.
///
/// An injected fault is rendered in the OAuth envelope (`{"error": …, "error_description": …}`):
/// the fault's reason is the `error` code (default `invalid_grant` below 500, `internal_failure` above).
package struct OAuthService: SimulatedService {
    package var provider: String { "oauth" }

    /// Seconds an issued access token is valid, also sent as `expires_in`. Default 3600.
    package var tokenLifetime: Int
    /// Clock skew allowed for `iat`, in seconds. Default 60.
    package var allowedSkew: TimeInterval

    static let acceptedScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging",
        "https://www.googleapis.com/auth/cloud-platform",
    ]

    package init(tokenLifetime: Int = 3600, allowedSkew: TimeInterval = 60) {
        self.tokenLifetime = tokenLifetime
        self.allowedSkew = allowedSkew
    }

    package func matches(_ request: SimulatorRequest) -> Bool { request.path == "/token" }

    package func targetToken(_ request: SimulatorRequest) -> String? { nil }

    package func handle(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
    {
        func error(_ status: Int, _ code: String, _ description: String, retryAfter: Int? = nil) -> SimulatorResponse {
            .json(
                status: status,
                ["error": code, "error_description": description],
                headers: retryAfter.map { [("retry-after", String($0))] } ?? []
            )
        }
        guard request.method == "POST" else { return error(405, "invalid_request", "Method not allowed.") }
        let form = Self.parseForm(request.body)
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return error(400, "unsupported_grant_type", "Invalid grant_type.")
        }
        guard let assertion = form["assertion"], let jwt = JWT.decode(assertion) else {
            return error(400, "invalid_request", "Invalid assertion.")
        }
        let claims = jwt.claims
        guard let issuer = claims["iss"] as? String, let account = context.keyring.serviceAccount(email: issuer) else {
            return error(400, "invalid_grant", "Invalid grant: account not found")
        }
        guard JWT.verifyRS256(jwt, publicKey: account.publicKey) else {
            return error(400, "invalid_grant", "Invalid JWT Signature.")
        }
        let audience = claims["aud"] as? String ?? ""
        let expected = context.baseURL.isEmpty ? nil : context.baseURL + "/token"
        guard expected.map({ audience == $0 }) ?? audience.hasSuffix("/token") else {
            return error(400, "invalid_grant", "Invalid JWT: Failed audience check.")
        }
        let scopes = Set((claims["scope"] as? String ?? "").split(separator: " ").map(String.init))
        guard !scopes.isDisjoint(with: Self.acceptedScopes) else {
            return error(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }
        let now = context.now().timeIntervalSince1970
        guard let iat = JSONNumber.double(claims["iat"]), let exp = JSONNumber.double(claims["exp"]),
            exp > iat, exp - iat <= 3600, iat <= now + allowedSkew, exp > now
        else {
            return error(
                400,
                "invalid_grant",
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
            )
        }
        if let fault {
            let code = fault.reason ?? (fault.status >= 500 ? "internal_failure" : "invalid_grant")
            return error(fault.status, code, "Injected by the provider simulator.", retryAfter: fault.retryAfter)
        }

        var random = SystemRandomNumberGenerator()
        let token = "ya29.sim-" + (0..<4).map { _ in String(random.next() as UInt64, radix: 16) }.joined()
        let issuedAt = context.now()
        context.keyring.issueAccessToken(
            token,
            projectID: account.projectID,
            expires: issuedAt.addingTimeInterval(TimeInterval(tokenLifetime))
        )
        context.recorder.record(
            SimulatorRecord(
                provider: provider,
                token: account.clientEmail,
                headers: [:],
                payload: "",
                receivedAt: issuedAt
            )
        )
        return .json(status: 200, ["access_token": token, "expires_in": tokenLifetime, "token_type": "Bearer"])
    }

    /// `application/x-www-form-urlencoded` pairs (`+` is a space, `%XX` escapes).
    static func parseForm(_ body: [UInt8]) -> [String: String] {
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
            }
            guard let key = parts.first else { continue }
            form[decode(key)] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return form
    }
}
