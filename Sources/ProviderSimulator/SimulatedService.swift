import Foundation
import HeraldCore

// The contract between the simulator's server core (TLS, HTTP/2 + HTTP/1.1, routing, fault
// injection, records) and the per-provider services (APNs, FCM + OAuth, Expo, Web Push).
// Each service lives in its own folder under Sources/ProviderSimulator and is listed in
// `StandardServices.swift`.

/// One HTTP request as a simulated provider sees it.
package struct SimulatorRequest: Sendable {
    package var method: String
    /// The path without the query string, e.g. `/3/device/abcd`.
    package var path: String
    package var query: [String: String]
    /// Header names lowercased; HTTP/2 pseudo-headers (`:authority`, …) are not included.
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]
    /// "h2" or "http/1.1".
    package var httpVersion: String
    package var receivedAt: Date

    package init(
        method: String,
        path: String,
        query: [String: String] = [:],
        headers: [(name: String, value: String)],
        body: [UInt8],
        httpVersion: String,
        receivedAt: Date = Date()
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
        self.receivedAt = receivedAt
    }

    /// The first value of a header (case-insensitive).
    package func header(_ name: String) -> String? {
        let name = name.lowercased()
        return headers.first { $0.name == name }?.value
    }
}

/// What the simulated provider answers.
package struct SimulatorResponse: Sendable {
    package var status: Int
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    package init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response; `object` goes through JSONSerialization.
    package static func json(status: Int, _ object: Any, headers: [(name: String, value: String)] = []) -> Self {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return SimulatorResponse(
            status: status,
            headers: [("content-type", "application/json")] + headers,
            body: Array(data)
        )
    }
}

/// An error the fault plan wants a service to answer with, rendered in that provider's wire
/// format (APNs `{"reason": …}`, FCM `{"error": {"status": …}}`, Expo error objects, …).
package struct InjectedFault: Sendable, Hashable {
    package var status: Int
    /// The provider's reason/status string, e.g. `Unregistered`, `UNAVAILABLE`, `DeviceNotRegistered`.
    package var reason: String?
    /// Seconds for a `Retry-After` header.
    package var retryAfter: Int?

    package init(status: Int, reason: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.reason = reason
        self.retryAfter = retryAfter
    }
}

/// One simulated provider endpoint family.
package protocol SimulatedService: Sendable {
    /// Fault/record namespace: `apns`, `fcm`, `oauth`, `expo`, `webpush`.
    var provider: String { get }
    /// Whether this service serves the request (by path prefix).
    func matches(_ request: SimulatorRequest) -> Bool
    /// The device token / subscription the request targets, if any (used to match token
    /// faults such as "410 for this token"); nil when the request has none (OAuth, receipts).
    func targetToken(_ request: SimulatorRequest) -> String?
    /// Answers the request. `fault` is set when the fault plan chose an error for this request:
    /// the service renders it in its wire format instead of processing normally (after it has
    /// verified authentication, as the real provider would).
    func handle(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
}
