import Foundation
import HeraldCore
import NIOConcurrencyHelpers
import NIOCore
import Providers

/// Simulated Expo push service: `POST /--/api/v2/push/send` and `/--/api/v2/push/getReceipts`
///.
///
/// - Bodies may be gzip (`content-encoding: gzip`); more than 1 MiB → 413 `PAYLOAD_TOO_LARGE`.
/// - When ``SimulatorKeyring/expoAccessTokens`` is non-empty every request needs a matching
///   bearer token, else 401 `UNAUTHORIZED`.
/// - Send: a message object or an array; `to` may be a string or an array (flattened into one
///   recipient each); more than 100 recipients → 400 `PUSH_TOO_MANY_NOTIFICATIONS`; a malformed
///   token or field → 400 `VALIDATION_ERROR`. Each recipient gets a ticket, in order: over
///   4096 bytes (``ExpoMessageEncoder/payloadSize(message:)``) → `MessageTooBig`, a scripted
///   ticket error (``failTicket(token:error:times:)``) → that error, else `ok` with a UUID and
///   a record (token = `to`, payload = the message JSON with that single `to`). A single
///   message object with a single `to` gets a single ticket object, not an array.
/// - Receipts: ≤ 1000 ids (else 400 `PUSH_TOO_MANY_RECEIPTS`); a ticket's receipt exists once
///   ``receiptDelay`` has passed and for 24 h; it is `ok` unless a receipt error was scripted for
///   its token (``failReceipt(token:error:times:)``, consumed when the ticket is issued).
///
/// Injected faults (from the core's fault plan): the send request's target token is its first
/// recipient. A fault whose reason is a ticket/receipt error code (`DeviceNotRegistered`,
/// `MessageTooBig`, `MessageRateExceeded`, `InvalidCredentials`, `MismatchSenderId`, …) turns
/// the tickets of that token into that error, whatever the fault's status; on getReceipts it
/// turns every returned receipt into that error. Any other fault is a request-level error
/// `{"errors":[{"code": reason}]}` with the fault's status (default codes: 429
/// `TOO_MANY_REQUESTS`, 401 `UNAUTHORIZED`, 5xx `INTERNAL_SERVER_ERROR`, else `VALIDATION_ERROR`)
/// and its `Retry-After`.
package final class ExpoService: SimulatedService {
    package var provider: String { "expo" }

    static let sendPath = "/--/api/v2/push/send"
    static let receiptsPath = "/--/api/v2/push/getReceipts"
    static let ticketErrorCodes: Set<String> = [
        "DeviceNotRegistered", "MessageTooBig", "MessageRateExceeded", "InvalidCredentials", "MismatchSenderId",
        "DeveloperError", "ExpoError", "ProviderError",
    ]

    /// How long after a send its receipt appears. Default 0.
    package let receiptDelay: TimeInterval
    /// How long receipts are kept (Expo: 24 h).
    package let receiptLifetime: TimeInterval

    private struct Issued {
        var token: String
        var issuedAt: Date
        var receiptError: String?
    }

    private struct Scripted {
        var error: String
        var remaining: Int?
    }

    private struct State {
        var tickets: [String: Issued] = [:]
        var ticketScript: [String: Scripted] = [:]
        var receiptScript: [String: Scripted] = [:]
        var sendRequests = 0
        var receiptRequests = 0
        var lastSendHeaders: [String: String] = [:]
        var lastSendRecipients = 0
    }

    private let state = NIOLockedValueBox(State())

    package init(receiptDelay: TimeInterval = 0, receiptLifetime: TimeInterval = 24 * 3600) {
        self.receiptDelay = receiptDelay
        self.receiptLifetime = receiptLifetime
    }

    // MARK: - Scripting and inspection (tests, demos)

    /// Tickets for `token` carry `error` (`DeviceNotRegistered`, …), `times` times (nil: always).
    package func failTicket(token: String, error: String, times: Int? = nil) {
        state.withLockedValue { $0.ticketScript[token] = Scripted(error: error, remaining: times) }
    }

    /// Receipts of the next tickets for `token` carry `error`, `times` times (nil: always).
    package func failReceipt(token: String, error: String, times: Int? = nil) {
        state.withLockedValue { $0.receiptScript[token] = Scripted(error: error, remaining: times) }
    }

    /// Send requests received (every one, accepted or not).
    package var sendRequestCount: Int { state.withLockedValue { $0.sendRequests } }
    /// getReceipts requests received.
    package var receiptRequestCount: Int { state.withLockedValue { $0.receiptRequests } }
    /// Headers of the latest send request, without `authorization`.
    package var lastSendHeaders: [String: String] { state.withLockedValue { $0.lastSendHeaders } }

    // MARK: - SimulatedService

    package func matches(_ request: SimulatorRequest) -> Bool {
        request.path == Self.sendPath || request.path == Self.receiptsPath
    }

    package func targetToken(_ request: SimulatorRequest) -> String? {
        guard request.path == Self.sendPath, let body = try? Self.body(request),
            let json = try? JSONSerialization.jsonObject(with: Data(body))
        else { return nil }
        let first = (json as? [[String: Any]])?.first ?? (json as? [String: Any])
        let to = first?["to"]
        return (to as? String) ?? (to as? [Any])?.first as? String
    }

    package func handle(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
    {
        var response = await respond(request, fault: fault, context: context)
        // Like Expo's servers, a client that accepts gzip gets a large answer compressed.
        let accepts = request.header("accept-encoding")?.lowercased().contains("gzip") ?? false
        if accepts, response.body.count >= 1024 {
            response.body = Array(buffer: Gzip.compress(response.body))
            response.headers.append(("content-encoding", "gzip"))
        }
        return response
    }

    private func respond(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
    {
        state.withLockedValue { s in
            if request.path == Self.sendPath {
                s.sendRequests += 1
                var headers: [String: String] = [:]
                for (name, value) in request.headers where name != "authorization" { headers[name] = value }
                s.lastSendHeaders = headers
            } else {
                s.receiptRequests += 1
            }
        }
        guard request.method == "POST" else {
            return Self.requestError(405, code: "API_ERROR", message: "Method not allowed")
        }
        let required = context.keyring.expoAccessTokens
        if !required.isEmpty {
            let authorization = request.header("authorization") ?? ""
            guard authorization.hasPrefix("Bearer "), required.contains(String(authorization.dropFirst(7))) else {
                return Self.requestError(401, code: "UNAUTHORIZED", message: "The bearer token is invalid or missing.")
            }
        }
        var itemFault: String?
        if let fault {
            if let reason = fault.reason, Self.ticketErrorCodes.contains(reason) {
                itemFault = reason
            } else {
                let code =
                    fault.reason
                    ?? (fault.status == 429
                        ? "TOO_MANY_REQUESTS"
                        : fault.status == 401
                            ? "UNAUTHORIZED" : fault.status >= 500 ? "INTERNAL_SERVER_ERROR" : "VALIDATION_ERROR")
                return Self.requestError(
                    fault.status,
                    code: code,
                    message: "Injected by the provider simulator.",
                    retryAfter: fault.retryAfter
                )
            }
        }
        let body: [UInt8]
        do {
            body = try Self.body(request)
        } catch let error as BodyError {
            return error.response
        } catch {
            return Self.requestError(400, code: "VALIDATION_ERROR", message: "Unreadable body.")
        }
        guard let json = try? JSONSerialization.jsonObject(with: Data(body)) else {
            return Self.requestError(400, code: "VALIDATION_ERROR", message: "The body is not valid JSON.")
        }
        if request.path == Self.sendPath {
            return send(
                json,
                targetToken: targetToken(request),
                itemFault: itemFault,
                request: request,
                context: context
            )
        }
        return receipts(json, itemFault: itemFault, context: context)
    }

    // MARK: - Send

    private func send(
        _ json: Any,
        targetToken: String?,
        itemFault: String?,
        request: SimulatorRequest,
        context: SimulatorContext
    ) -> SimulatorResponse {
        let single: Bool
        let messages: [[String: Any]]
        if let array = json as? [Any] {
            guard let objects = array as? [[String: Any]] else {
                return Self.requestError(400, code: "VALIDATION_ERROR", message: "Each message must be an object.")
            }
            messages = objects
            single = false
        } else if let object = json as? [String: Any] {
            messages = [object]
            single = !(object["to"] is [Any])
        } else {
            return Self.requestError(
                400,
                code: "VALIDATION_ERROR",
                message: "Expected a message or an array of messages."
            )
        }
        // Flatten `to` arrays: one recipient per ticket.
        var recipients: [[String: Any]] = []
        for message in messages {
            if message["to"] is String {
                recipients.append(message)
            } else if let tos = message["to"] as? [Any], !tos.isEmpty {
                for to in tos {
                    var copy = message
                    copy["to"] = to
                    recipients.append(copy)
                }
            } else {
                return Self.requestError(400, code: "VALIDATION_ERROR", message: "\"to\" is required.")
            }
        }
        guard recipients.count <= 100 else {
            return Self.requestError(
                400,
                code: "PUSH_TOO_MANY_NOTIFICATIONS",
                message: "You are trying to send more than 100 push notifications in one request."
            )
        }
        for recipient in recipients {
            if let problem = Self.validate(recipient) {
                return Self.requestError(400, code: "VALIDATION_ERROR", message: problem)
            }
        }

        let now = context.now()
        var headers: [String: String] = [:]
        for (name, value) in request.headers where name != "authorization" { headers[name] = value }
        var tickets: [[String: Any]] = []
        for recipient in recipients {
            let token = recipient["to"] as? String ?? ""
            // Scripted outcomes are consumed under the lock; records are made after it.
            var error = state.withLockedValue { Self.consume(&$0.ticketScript, token) }
            if error == nil, let itemFault, token == targetToken { error = itemFault }
            if error == nil, ExpoMessageEncoder.payloadSize(message: recipient) > ExpoMessageEncoder.maxPayloadBytes {
                error = "MessageTooBig"
            }
            if let error {
                var details: [String: Any] = ["error": error]
                if error == "DeviceNotRegistered" { details["expoPushToken"] = token }
                let message =
                    error == "DeviceNotRegistered"
                    ? "\"\(token)\" is not a registered push notification recipient"
                    : "Injected by the provider simulator."
                tickets.append(["status": "error", "message": message, "details": details])
                continue
            }
            let id = UUID().uuidString
            state.withLockedValue { s in
                let receipt = Self.consume(&s.receiptScript, token)
                s.tickets[id] = Issued(token: token, issuedAt: now, receiptError: receipt)
                // Forget receipts past their lifetime so a long benchmark stays bounded.
                if s.tickets.count % 10_000 == 0 {
                    s.tickets = s.tickets.filter { now.timeIntervalSince($0.value.issuedAt) < receiptLifetime }
                }
            }
            let payload =
                (try? JSONSerialization.data(
                    withJSONObject: recipient,
                    options: [.sortedKeys, .withoutEscapingSlashes]
                ))
                .map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            context.recorder.record(
                SimulatorRecord(provider: provider, token: token, headers: headers, payload: payload, receivedAt: now)
            )
            tickets.append(["status": "ok", "id": id])
        }
        if single, tickets.count == 1 { return .json(status: 200, ["data": tickets[0]]) }
        return .json(status: 200, ["data": tickets])
    }

    /// Field checks (types and enums from Expo's documentation); nil when the message is acceptable.
    static func validate(_ m: [String: Any]) -> String? {
        guard let token = m["to"] as? String, ExpoMessageEncoder.isExpoPushToken(token) else {
            return "\"to\" must be an Expo push token (ExponentPushToken[…] or ExpoPushToken[…])."
        }
        for key in ["title", "body", "subtitle", "channelId", "categoryId", "collapseId", "tag", "icon", "threadId"] {
            if let value = m[key], !(value is String), !(value is NSNull) { return "\"\(key)\" must be a string." }
        }
        for key in ["badge", "ttl", "expiration", "relevanceScore"] {
            if let value = m[key], !(value is NSNumber || value is Int || value is Double) {
                return "\"\(key)\" must be a number."
            }
        }
        for key in ["_contentAvailable", "contentAvailable", "mutableContent", "_displayInForeground"] {
            if let value = m[key], !Self.isBool(value) { return "\"\(key)\" must be a boolean." }
        }
        if let priority = m["priority"] {
            guard let p = priority as? String, ["default", "normal", "high"].contains(p) else {
                return "\"priority\" must be one of default, normal, high."
            }
        }
        if let data = m["data"], !(data is [String: Any]) { return "\"data\" must be an object." }
        if let sound = m["sound"], !(sound is String), !(sound is [String: Any]), !(sound is NSNull) {
            return "\"sound\" must be a string or an object."
        }
        return nil
    }

    private static func isBool(_ value: Any) -> Bool {
        if value is Bool { return true }
        if let number = value as? NSNumber { return number.intValue == 0 || number.intValue == 1 }
        return false
    }

    // MARK: - Receipts

    private func receipts(_ json: Any, itemFault: String?, context: SimulatorContext) -> SimulatorResponse {
        guard let ids = (json as? [String: Any])?["ids"] as? [String] else {
            return Self.requestError(400, code: "VALIDATION_ERROR", message: "\"ids\" must be an array of strings.")
        }
        guard ids.count <= 1000 else {
            return Self.requestError(
                400,
                code: "PUSH_TOO_MANY_RECEIPTS",
                message: "You are trying to get more than 1000 push receipts in one request."
            )
        }
        let now = context.now()
        let issued = state.withLockedValue { s in ids.compactMap { id in s.tickets[id].map { (id, $0) } } }
        var data: [String: Any] = [:]
        for (id, ticket) in issued {
            let age = now.timeIntervalSince(ticket.issuedAt)
            guard age >= receiptDelay, age < receiptLifetime else { continue }  // not ready, or cleared
            if let error = itemFault ?? ticket.receiptError {
                var details: [String: Any] = ["error": error]
                if error == "DeviceNotRegistered" { details["expoPushToken"] = ticket.token }
                data[id] = ["status": "error", "message": "Injected by the provider simulator.", "details": details]
            } else {
                data[id] = ["status": "ok"]
            }
        }
        return .json(status: 200, ["data": data])
    }

    // MARK: - Helpers

    private static func consume(_ script: inout [String: Scripted], _ token: String) -> String? {
        guard var entry = script[token] else { return nil }
        if let remaining = entry.remaining {
            if remaining <= 1 {
                script[token] = nil
            } else {
                entry.remaining = remaining - 1
                script[token] = entry
            }
        }
        return entry.error
    }

    static func requestError(_ status: Int, code: String, message: String, retryAfter: Int? = nil) -> SimulatorResponse
    {
        .json(
            status: status,
            ["errors": [["code": code, "message": message]]],
            headers: retryAfter.map { [("retry-after", String($0))] } ?? []
        )
    }

    private struct BodyError: Error {
        var response: SimulatorResponse
    }

    /// The request body, gunzipped when `content-encoding: gzip`; at most 1 MiB either way.
    private static func body(_ request: SimulatorRequest) throws -> [UInt8] {
        let limit = 1024 * 1024
        let tooLarge = BodyError(
            response: requestError(413, code: "PAYLOAD_TOO_LARGE", message: "The request body is too large.")
        )
        guard request.body.count <= limit else { throw tooLarge }
        switch request.header("content-encoding")?.lowercased() {
        case nil, "identity":
            return request.body
        case "gzip":
            do {
                return try Gzip.decompress(request.body, maxOutput: limit)
            } catch .tooLarge {
                throw tooLarge
            } catch {
                throw BodyError(
                    response: requestError(400, code: "VALIDATION_ERROR", message: "The gzip body is malformed.")
                )
            }
        default:
            throw BodyError(
                response: requestError(415, code: "VALIDATION_ERROR", message: "Unsupported content-encoding.")
            )
        }
    }
}
