import Foundation
import HeraldCore

/// One fault-injection rule, as posted to `POST /_sim/faults` or added with ``FaultPlan/add(_:)``.
///
/// A rule matches a request by `provider` (`*` = any) and optionally `token`; it then applies
/// its effects in this order: `latencyMs` (delay), then one of `dropConnection`, `goaway`,
/// `outageSeconds` (503 for the whole provider until the window ends) or `status` (an error the
/// service renders in its wire format). A rule with only `latencyMs` delays a normal answer.
///
/// ```json
/// {"provider": "apns", "token": "abcd", "status": 410, "reason": "Unregistered"}
/// {"provider": "apns", "status": 429, "reason": "TooManyRequests", "retryAfter": 2, "probability": 0.5}
/// {"provider": "*", "outageSeconds": 60}
/// {"provider": "apns", "dropConnection": true, "remaining": 1}
/// ```
package struct FaultRule: Sendable, Hashable, Codable {
    /// Service namespace (`apns`, `fcm`, `oauth`, `expo`, `webpush`) or `*` for every one. Default `*`.
    package var provider: String
    /// Only requests for this device token / subscription id. Default nil (every request).
    package var token: String?
    /// HTTP status the service answers with (e.g. 410, 429, 503). Default nil (no error).
    package var status: Int?
    /// Provider reason string (`Unregistered`, `UNAVAILABLE`, …); nil lets the service pick its default.
    package var reason: String?
    /// Seconds for a `Retry-After` header on the injected error. Default nil (none).
    package var retryAfter: Int?
    /// Chance, 0...1, that a matching request is affected. Default 1.
    package var probability: Double
    /// How many more requests this rule affects before it is removed; nil = unlimited. Default nil.
    package var remaining: Int?
    /// Delay before answering, in milliseconds. Default nil (none).
    package var latencyMs: Int?
    /// Every request of the provider gets 503 for this many seconds from when the rule is added.
    package var outageSeconds: Double?
    /// Close the TCP connection without answering. Default false.
    package var dropConnection: Bool
    /// Send an HTTP/2 GOAWAY (`{"reason":"Shutdown"}`) and close; on HTTP/1.1 the same as a drop. Default false.
    package var goaway: Bool

    package init(
        provider: String = "*",
        token: String? = nil,
        status: Int? = nil,
        reason: String? = nil,
        retryAfter: Int? = nil,
        probability: Double = 1,
        remaining: Int? = nil,
        latencyMs: Int? = nil,
        outageSeconds: Double? = nil,
        dropConnection: Bool = false,
        goaway: Bool = false
    ) {
        self.provider = provider
        self.token = token
        self.status = status
        self.reason = reason
        self.retryAfter = retryAfter
        self.probability = probability
        self.remaining = remaining
        self.latencyMs = latencyMs
        self.outageSeconds = outageSeconds
        self.dropConnection = dropConnection
        self.goaway = goaway
    }

    private enum CodingKeys: String, CodingKey {
        case provider, token, status, reason, retryAfter, probability, remaining, latencyMs, outageSeconds
        case dropConnection, goaway
    }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            provider: try c.decodeIfPresent(String.self, forKey: .provider) ?? "*",
            token: try c.decodeIfPresent(String.self, forKey: .token),
            status: try c.decodeIfPresent(Int.self, forKey: .status),
            reason: try c.decodeIfPresent(String.self, forKey: .reason),
            retryAfter: try c.decodeIfPresent(Int.self, forKey: .retryAfter),
            probability: try c.decodeIfPresent(Double.self, forKey: .probability) ?? 1,
            remaining: try c.decodeIfPresent(Int.self, forKey: .remaining),
            latencyMs: try c.decodeIfPresent(Int.self, forKey: .latencyMs),
            outageSeconds: try c.decodeIfPresent(Double.self, forKey: .outageSeconds),
            dropConnection: try c.decodeIfPresent(Bool.self, forKey: .dropConnection) ?? false,
            goaway: try c.decodeIfPresent(Bool.self, forKey: .goaway) ?? false
        )
    }

    /// Rejects rules that cannot work; the text is returned to the control-API caller.
    package func validate() throws {
        func fail(_ text: String) -> FaultRuleError { FaultRuleError(description: text) }
        guard !provider.isEmpty else { throw fail("provider must not be empty (use \"*\" for any)") }
        guard (0...1).contains(probability) else { throw fail("probability must be within 0...1") }
        if let remaining, remaining < 1 { throw fail("remaining must be at least 1") }
        if let status, !(100...599).contains(status) { throw fail("status must be an HTTP status") }
        if let latencyMs, latencyMs < 0 { throw fail("latencyMs must not be negative") }
        if let outageSeconds, outageSeconds <= 0 { throw fail("outageSeconds must be positive") }
        let effects = [status != nil, outageSeconds != nil, dropConnection, goaway].filter { $0 }.count
        guard effects <= 1 else { throw fail("use one of status, outageSeconds, dropConnection, goaway") }
        guard effects == 1 || latencyMs != nil else {
            throw fail("a rule needs status, outageSeconds, dropConnection, goaway or latencyMs")
        }
    }
}

/// A fault rule the control API cannot accept.
package struct FaultRuleError: Error, CustomStringConvertible {
    package var description: String
}
