import AsyncHTTPClient
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHTTP1

/// The two Expo endpoints, `push/send` and `push/getReceipts`, shared by ``ExpoProvider`` and
/// ``ExpoReceiptPoller``. Bodies never reach logs or errors.
struct ExpoPushClient: Sendable {
    /// One push ticket: `ok` with a receipt id, or an error code.
    enum Ticket: Sendable, Hashable {
        case ok(id: String)
        case error(code: String?)
    }

    /// One receipt: `ok`, or an error code.
    enum Receipt: Sendable, Hashable {
        case ok
        case error(code: String?)
    }

    /// What a send request produced.
    enum SendResult: Sendable {
        /// One ticket per message, in order.
        case tickets([Ticket])
        /// The whole request failed; every message gets this outcome.
        case failed(DeliveryOutcome)
        /// `PUSH_TOO_MANY_EXPERIENCE_IDS`: the messages belong to several projects; send them singly.
        case mixedProjects
    }

    static let maxMessagesPerRequest = 100
    static let maxReceiptIDsPerRequest = 1000

    let baseURL: String
    let accessTokens: [String: Secret]
    let client: HTTPClient
    let timeout: TimeAmount
    let gzipThreshold: Int

    init(configuration: ExpoConfiguration, client: HTTPClient, requestTimeout: Duration) {
        let base = configuration.baseURL
        self.baseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.accessTokens = configuration.accessTokens
        self.client = client
        self.timeout = requestTimeout.timeAmount
        self.gzipThreshold = configuration.gzipThreshold
    }

    /// Sends ≤ 100 encoded messages (JSON objects) of one app as one array.
    func send(_ messages: [[UInt8]], appID: String, logger: Logger) async -> SendResult {
        var body: [UInt8] = [UInt8(ascii: "[")]
        body.reserveCapacity(messages.reduce(2) { $0 + $1.count + 1 })
        for (i, m) in messages.enumerated() {
            if i > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: m)
        }
        body.append(UInt8(ascii: "]"))
        let answer: (status: Int, headers: HTTPHeaders, body: [UInt8])
        do {
            answer = try await post("/--/api/v2/push/send", body: body, appID: appID, logger: logger)
        } catch {
            logger.debug("Expo send request failed", metadata: ["error.type": "\(type(of: error))"])
            return .failed(DeliveryOutcome.transportFailure(error))
        }
        let object = try? JSONSerialization.jsonObject(with: Data(answer.body))
        if let failure = Self.requestFailure(status: answer.status, headers: answer.headers, object: object) {
            if failure.code == "PUSH_TOO_MANY_EXPERIENCE_IDS", messages.count > 1 { return .mixedProjects }
            logger.debug(
                "Expo refused send request",
                metadata: ["http.status": "\(answer.status)", "push.reason": "\(failure.outcome.reason)"]
            )
            return .failed(failure.outcome)
        }
        // `data` is an array of tickets, or one ticket object for a single message.
        let data = (object as? [String: Any])?["data"]
        let rawTickets: [[String: Any]]
        if let array = data as? [[String: Any]] {
            rawTickets = array
        } else if let single = data as? [String: Any] {
            rawTickets = [single]
        } else {
            return .failed(DeliveryOutcome(.retry, reason: .badResponse))
        }
        guard rawTickets.count == messages.count else {
            return .failed(DeliveryOutcome(.retry, reason: .ticketCountMismatch))
        }
        return .tickets(
            rawTickets.map { t in
                if t["status"] as? String == "ok", let id = t["id"] as? String, !id.isEmpty { return .ok(id: id) }
                return .error(code: (t["details"] as? [String: Any])?["error"] as? String)
            }
        )
    }

    /// Fetches receipts for ≤ 1000 ticket ids; ids without a receipt yet are absent.
    func receipts(_ ids: [String], appID: String, logger: Logger) async throws -> [String: Receipt] {
        let body = try JSONSerialization.data(withJSONObject: ["ids": ids])
        let answer = try await post("/--/api/v2/push/getReceipts", body: Array(body), appID: appID, logger: logger)
        let object = try? JSONSerialization.jsonObject(with: Data(answer.body))
        if let failure = Self.requestFailure(status: answer.status, headers: answer.headers, object: object) {
            throw ExpoRequestError(outcome: failure.outcome)
        }
        guard let data = (object as? [String: Any])?["data"] as? [String: Any] else {
            throw ExpoRequestError(outcome: DeliveryOutcome(.retry, reason: .badResponse))
        }
        var receipts: [String: Receipt] = [:]
        for (id, value) in data {
            guard let r = value as? [String: Any] else { continue }
            receipts[id] =
                r["status"] as? String == "ok"
                ? .ok : .error(code: (r["details"] as? [String: Any])?["error"] as? String)
        }
        return receipts
    }

    private func post(
        _ path: String,
        body: [UInt8],
        appID: String,
        logger: Logger
    ) async throws
        -> (status: Int, headers: HTTPHeaders, body: [UInt8])
    {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "accept", value: "application/json")
        request.headers.add(name: "accept-encoding", value: "gzip")
        if let token = accessTokens[appID], !token.isEmpty {
            request.headers.add(name: "authorization", value: "Bearer " + token.reveal())
        }
        if body.count >= gzipThreshold {
            request.headers.add(name: "content-encoding", value: "gzip")
            request.body = .bytes(Gzip.compress(body))
        } else {
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await client.execute(request, timeout: timeout, logger: logger)
        // A gzip answer arrives inflated: the HTTP client decompresses (ProviderHTTPConfiguration).
        let body = Array(buffer: try await response.body.collect(upTo: 4 * 1024 * 1024))
        return (Int(response.status.code), response.headers, body)
    }

    /// The request-level error, keyed on `errors[0].code` (Expo does not document its HTTP
    /// statuses besides 429), or nil for a 200 without `errors`.
    static func requestFailure(
        status: Int,
        headers: HTTPHeaders,
        object: Any?
    )
        -> (code: String?, outcome: DeliveryOutcome)?
    {
        let errors = (object as? [String: Any])?["errors"] as? [[String: Any]]
        let code = errors?.first?["code"] as? String
        if status == 200, errors == nil || errors?.isEmpty == true { return nil }
        let retryAfter = DeliveryOutcome.retryAfter(headers)
        let outcome: DeliveryOutcome
        switch (code ?? "", status) {
        case ("TOO_MANY_REQUESTS", _), (_, 429):
            outcome = DeliveryOutcome(.retry, reason: .rateLimited, retryAfter: retryAfter)
        case ("UNAUTHORIZED", _), (_, 401), (_, 403):
            outcome = DeliveryOutcome(.credentialsBroken, reason: .unauthorized)
        case ("PUSH_TOO_MANY_EXPERIENCE_IDS", _):
            outcome = DeliveryOutcome(.payloadRejected, reason: .tooManyExperienceIds)
        case ("PUSH_TOO_MANY_NOTIFICATIONS", _), ("PUSH_TOO_MANY_RECEIPTS", _):
            outcome = DeliveryOutcome(.retry, reason: .tooManyItems)
        case (_, 413):
            outcome = DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge)
        case (_, 500...599), (_, 408):
            outcome = DeliveryOutcome(.retry, reason: .serverError, retryAfter: retryAfter)
        case (_, 200):
            outcome = DeliveryOutcome(.retry, reason: .requestError, retryAfter: retryAfter)
        default:
            outcome = DeliveryOutcome(.payloadRejected, reason: .badRequest)
        }
        return (code, outcome)
    }
}

/// A failed Expo request (no receipts), already classified.
struct ExpoRequestError: Error, CustomStringConvertible {
    var outcome: DeliveryOutcome
    var description: String { "ExpoRequestError(\(outcome))" }
}
