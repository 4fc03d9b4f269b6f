import Foundation
import HeraldCore
import Providers

/// Simulated FCM HTTP v1 send endpoint (`POST /v1/projects/{project}/messages:send`).
///
/// Order of checks, as the real service documents it: method → bearer token
/// (issued by ``OAuthService`` for this project and unexpired, else 401 `UNAUTHENTICATED` with
/// `WWW-Authenticate`) → injected fault → message validation (400 `INVALID_ARGUMENT` with a
/// `google.rpc.BadRequest` detail) → 200 `{"name": "projects/p/messages/<id>"}`. Accepted
/// messages are recorded with token = `message.token` and payload = the `message` JSON (sorted
/// keys); `validate_only` requests are validated but not recorded.
///
/// Injected faults render as the google.rpc.Status envelope. The fault's reason is an
/// `FcmError.errorCode` (`UNREGISTERED`, `INVALID_ARGUMENT`, `SENDER_ID_MISMATCH`,
/// `QUOTA_EXCEEDED` (+ `QuotaFailure`), `UNAVAILABLE`, `INTERNAL`, `THIRD_PARTY_AUTH_ERROR`, …),
/// or a bare google.rpc status without FcmError detail (`UNAUTHENTICATED`, `PERMISSION_DENIED`,
/// `NOT_FOUND`), or the mock-only `INVALID_REGISTRATION` (400 `INVALID_ARGUMENT` whose message is
/// "The registration token is not a valid FCM registration token"). Without a reason the HTTP
/// status picks it: 400 INVALID_ARGUMENT, 401 bare UNAUTHENTICATED, 403 bare PERMISSION_DENIED,
/// 404 UNREGISTERED, 429 QUOTA_EXCEEDED, 500 INTERNAL, 503 UNAVAILABLE.
package struct FCMService: SimulatedService {
    package var provider: String { "fcm" }

    package init() {}

    package func matches(_ request: SimulatorRequest) -> Bool {
        request.path.hasPrefix("/v1/projects/") && request.path.hasSuffix("/messages:send")
    }

    package func targetToken(_ request: SimulatorRequest) -> String? {
        let object = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any]
        return (object?["message"] as? [String: Any])?["token"] as? String
    }

    package func handle(
        _ request: SimulatorRequest,
        fault: InjectedFault?,
        context: SimulatorContext
    ) async
        -> SimulatorResponse
    {
        let parts = request.path.split(separator: "/")
        guard parts.count == 4, parts[0] == "v1", parts[1] == "projects", parts[3] == "messages:send" else {
            return Self.rpcError(http: 404, status: "NOT_FOUND", message: "Requested entity was not found.")
        }
        let project = String(parts[2])
        guard request.method == "POST" else {
            return Self.rpcError(http: 405, status: "UNIMPLEMENTED", message: "Method not allowed.")
        }

        // Authentication.
        let authorization = request.header("authorization") ?? ""
        let bearer = authorization.hasPrefix("Bearer ") ? String(authorization.dropFirst(7)) : ""
        guard let issued = context.keyring.accessToken(bearer), issued.expires > context.now() else {
            return Self.unauthenticated
        }
        guard issued.projectID == project else {
            return Self.rpcError(
                http: 403,
                status: "PERMISSION_DENIED",
                message: "Permission 'cloudmessaging.messages.create' denied on resource (or it may not exist)."
            )
        }

        if let fault { return Self.render(fault) }

        // Validation.
        guard let object = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any],
            let message = object["message"] as? [String: Any]
        else {
            return Self.invalidArgument("Invalid JSON payload received.", field: "message")
        }
        if let violation = Self.validate(message) {
            return Self.invalidArgument(violation.description, field: violation.field)
        }
        let validateOnly = object["validate_only"] as? Bool ?? object["validateOnly"] as? Bool ?? false

        let id = String(UInt64.random(in: 1...UInt64(Int64.max)), radix: 10)
        if !validateOnly {
            let payload =
                (try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys, .withoutEscapingSlashes]))
                .map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            var headers: [String: String] = [:]
            for (name, value) in request.headers where name != "authorization" { headers[name] = value }
            let target =
                (message["token"] ?? message["fid"] ?? message["topic"] ?? message["condition"]) as? String ?? ""
            context.recorder.record(
                SimulatorRecord(
                    provider: provider,
                    token: target,
                    headers: headers,
                    payload: payload,
                    receivedAt: context.now()
                )
            )
        }
        return .json(status: 200, ["name": "projects/\(project)/messages/\(id)"])
    }

    // MARK: - Validation

    /// One field violation, as FCM reports it in `google.rpc.BadRequest`.
    package struct Violation: CustomStringConvertible {
        package var field: String
        package var description: String
    }

    /// Whether `text` is a protobuf Duration: `<seconds>[.<1–9 digits>]s`.
    static func isDuration(_ text: String) -> Bool {
        guard text.hasSuffix("s") else { return false }
        let parts = text.dropLast().split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCIIDigit) else { return false }
        if parts.count == 2 { return (1...9).contains(parts[1].count) && parts[1].allSatisfy(\.isASCIIDigit) }
        return true
    }

    /// The first problem with `message`, checked in the order FCM reports them.
    package static func validate(_ message: [String: Any]) -> Violation? {
        let targets = ["token", "topic", "condition", "fid"].filter { message[$0] != nil }
        guard targets.count == 1 else {
            return Violation(
                field: "message",
                description: "Exactly one of token, topic or condition must be specified."
            )
        }
        if let token = message["token"] {
            guard let token = token as? String, !token.isEmpty else {
                return Violation(
                    field: "message.token",
                    description: "The registration token is not a valid FCM registration token"
                )
            }
        }
        if let data = message["data"] {
            guard let data = data as? [String: Any] else {
                return Violation(
                    field: "message.data",
                    description: "Invalid value at 'message.data' (type.googleapis.com/google.protobuf.Map)"
                )
            }
            for (i, key) in data.keys.sorted().enumerated() {
                guard let value = data[key] as? String else {
                    return Violation(
                        field: "message.data[\(i)].value",
                        description: "Invalid value at 'message.data[\(i)].value' (TYPE_STRING), \(data[key] ?? "null")"
                    )
                }
                _ = value
                let lower = key.lowercased()
                if lower == "from" || lower == "message_type" || lower.hasPrefix("google.") || lower.hasPrefix("gcm.") {
                    return Violation(field: "message.data", description: "Invalid data payload key: \(key)")
                }
            }
        }
        if let android = message["android"] {
            guard let android = android as? [String: Any] else {
                return Violation(field: "message.android", description: "Invalid value at 'message.android'")
            }
            if let priority = android["priority"] {
                guard let p = (priority as? String)?.uppercased(), p == "NORMAL" || p == "HIGH" else {
                    return Violation(
                        field: "message.android.priority",
                        description:
                            "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority)"
                    )
                }
            }
            if let ttl = android["ttl"] {
                guard let text = ttl as? String,
                    isDuration(text),
                    let seconds = Double(text.dropLast()), seconds <= 2_419_200
                else {
                    return Violation(
                        field: "message.android.ttl",
                        description: "The value provided for TTL must be between 0 and 2,419,200 seconds (4 weeks)."
                    )
                }
            }
            for key in ["collapse_key", "collapseKey", "restricted_package_name", "restrictedPackageName"] {
                if let value = android[key], !(value is String) {
                    return Violation(
                        field: "message.android.\(key)",
                        description: "Invalid value at 'message.android.\(key)' (TYPE_STRING)"
                    )
                }
            }
        }
        for (section, field) in [("apns", "headers"), ("webpush", "headers")] {
            guard let config = message[section] else { continue }
            guard let config = config as? [String: Any] else {
                return Violation(field: "message.\(section)", description: "Invalid value at 'message.\(section)'")
            }
            if let headers = config[field] {
                guard let headers = headers as? [String: Any], headers.values.allSatisfy({ $0 is String }) else {
                    return Violation(
                        field: "message.\(section).\(field)",
                        description: "Invalid value at 'message.\(section).\(field)' (TYPE_STRING)"
                    )
                }
            }
        }
        let limit = message["topic"] != nil || message["condition"] != nil ? 2048 : FCMMessageEncoder.maxPayloadBytes
        if FCMMessageEncoder.payloadSize(message: message) > limit {
            return Violation(field: "message", description: "Message is too big: the limit is \(limit) bytes.")
        }
        return nil
    }

    // MARK: - Error rendering

    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"

    static func rpcError(
        http: Int,
        status: String,
        message: String,
        errorCode: String? = nil,
        details: [[String: Any]] = [],
        retryAfter: Int? = nil,
        extraHeaders: [(name: String, value: String)] = []
    ) -> SimulatorResponse {
        var allDetails = details
        if let errorCode { allDetails.insert(["@type": fcmErrorType, "errorCode": errorCode], at: 0) }
        var error: [String: Any] = ["code": http, "message": message, "status": status]
        if !allDetails.isEmpty { error["details"] = allDetails }
        var headers = extraHeaders
        if let retryAfter { headers.append(("retry-after", String(retryAfter))) }
        return .json(status: http, ["error": error], headers: headers)
    }

    static var unauthenticated: SimulatorResponse {
        rpcError(
            http: 401,
            status: "UNAUTHENTICATED",
            message:
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
            extraHeaders: [
                ("www-authenticate", "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\"")
            ]
        )
    }

    static func invalidArgument(_ description: String, field: String) -> SimulatorResponse {
        rpcError(
            http: 400,
            status: "INVALID_ARGUMENT",
            message: description,
            errorCode: "INVALID_ARGUMENT",
            details: [
                [
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [["field": field, "description": description]],
                ]
            ]
        )
    }

    static func render(_ fault: InjectedFault) -> SimulatorResponse {
        let reason =
            fault.reason
            ?? {
                switch fault.status {
                case 400: "INVALID_ARGUMENT"
                case 401: "UNAUTHENTICATED"
                case 403: "PERMISSION_DENIED"
                case 404: "UNREGISTERED"
                case 429: "QUOTA_EXCEEDED"
                case 500: "INTERNAL"
                case 503: "UNAVAILABLE"
                default: "UNSPECIFIED_ERROR"
                }
            }()
        let http = fault.status
        let retryAfter = fault.retryAfter
        switch reason {
        case "UNAUTHENTICATED":
            var response = unauthenticated
            if let retryAfter { response.headers.append(("retry-after", String(retryAfter))) }
            return response
        case "PERMISSION_DENIED", "NOT_FOUND", "RESOURCE_EXHAUSTED":
            return rpcError(
                http: http,
                status: reason,
                message: "Injected by the provider simulator.",
                retryAfter: retryAfter
            )
        case "INVALID_REGISTRATION":
            return rpcError(
                http: http,
                status: "INVALID_ARGUMENT",
                message: "The registration token is not a valid FCM registration token",
                errorCode: "INVALID_ARGUMENT",
                retryAfter: retryAfter
            )
        case "UNREGISTERED":
            return rpcError(
                http: http,
                status: "NOT_FOUND",
                message: "Requested entity was not found.",
                errorCode: reason,
                retryAfter: retryAfter
            )
        case "INVALID_ARGUMENT":
            return rpcError(
                http: http,
                status: "INVALID_ARGUMENT",
                message: "Request contains an invalid argument.",
                errorCode: reason,
                retryAfter: retryAfter
            )
        case "SENDER_ID_MISMATCH":
            return rpcError(
                http: http,
                status: "PERMISSION_DENIED",
                message: "SenderId mismatch",
                errorCode: reason,
                retryAfter: retryAfter
            )
        case "QUOTA_EXCEEDED":
            return rpcError(
                http: http,
                status: "RESOURCE_EXHAUSTED",
                message: "Quota exceeded for quota metric 'Messages sent'.",
                errorCode: reason,
                details: [
                    [
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [["subject": "project", "description": "Messages per minute"]],
                    ]
                ],
                retryAfter: retryAfter
            )
        case "UNAVAILABLE":
            return rpcError(
                http: http,
                status: "UNAVAILABLE",
                message: "The service is currently unavailable.",
                errorCode: reason,
                retryAfter: retryAfter
            )
        case "INTERNAL":
            return rpcError(
                http: http,
                status: "INTERNAL",
                message: "Internal error encountered.",
                errorCode: reason,
                retryAfter: retryAfter
            )
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR":
            return rpcError(
                http: http,
                status: "UNAUTHENTICATED",
                message: "Auth error from APNS or Web Push Service",
                errorCode: reason,
                retryAfter: retryAfter
            )
        default:
            return rpcError(
                http: http,
                status: "UNKNOWN",
                message: "Injected by the provider simulator.",
                errorCode: reason,
                retryAfter: retryAfter
            )
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
