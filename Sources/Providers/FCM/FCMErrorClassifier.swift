import Foundation
import HeraldCore

/// Maps an FCM HTTP v1 error answer (google.rpc.Status envelope) to a ``DeliveryOutcome``.
///
/// Reasons are a closed, lowercase snake_case vocabulary; nothing of the
/// response body except the enum-like `status` / `errorCode` fields reaches the outcome.
package enum FCMErrorClassifier {
    /// The parts of an error body the classification reads.
    package struct ErrorBody: Sendable, Hashable {
        /// `error.status`, e.g. `NOT_FOUND`.
        package var status: String?
        /// `FcmError.errorCode` from `error.details`, e.g. `UNREGISTERED`.
        package var errorCode: String?
        /// Whether `error.message` talks about the registration token.
        package var mentionsToken: Bool

        package init(status: String? = nil, errorCode: String? = nil, mentionsToken: Bool = false) {
            self.status = status
            self.errorCode = errorCode
            self.mentionsToken = mentionsToken
        }

        package init(json: [UInt8]) {
            let object = (try? JSONSerialization.jsonObject(with: Data(json))) as? [String: Any]
            let error = object?["error"] as? [String: Any]
            status = error?["status"] as? String
            let details = error?["details"] as? [[String: Any]] ?? []
            errorCode =
                details.first { ($0["@type"] as? String)?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?[
                    "errorCode"
                ] as? String
            let message = (error?["message"] as? String ?? "").lowercased()
            mentionsToken = message.contains("registration token")
        }
    }

    /// Minimum wait after `QUOTA_EXCEEDED`: Google asks for at least one minute of backoff.
    package static let quotaBackoff: Duration = .seconds(60)

    /// Whether the answer asks for a new OAuth token (401 without an FcmError detail).
    package static func needsNewAccessToken(httpStatus: Int, body: ErrorBody) -> Bool {
        httpStatus == 401 && body.errorCode == nil
    }

    /// Classifies a non-200 answer. `retryAfter` is the parsed `Retry-After` header.
    package static func classify(httpStatus: Int, body: ErrorBody, retryAfter: Duration?) -> DeliveryOutcome {
        switch body.errorCode ?? "" {
        case "UNREGISTERED":
            return DeliveryOutcome(.tokenInvalid, reason: .unregistered)
        case "SENDER_ID_MISMATCH":
            return DeliveryOutcome(.tokenInvalid, reason: .senderIDMismatch)
        case "INVALID_ARGUMENT":
            return invalidArgument(body)
        case "QUOTA_EXCEEDED":
            return quotaExceeded(retryAfter)
        case "UNAVAILABLE":
            return DeliveryOutcome(.retry, reason: .unavailable, retryAfter: retryAfter)
        case "INTERNAL":
            return DeliveryOutcome(.retry, reason: .internal, retryAfter: retryAfter)
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR":
            return DeliveryOutcome(.credentialsBroken, reason: .thirdPartyAuthError)
        case "UNSPECIFIED_ERROR":
            return DeliveryOutcome(.retry, reason: .unspecifiedError, retryAfter: retryAfter)
        default:
            break
        }
        // No (known) FcmError detail: fall back to the google.rpc status, then the HTTP status.
        let status = body.status ?? defaultStatus(httpStatus)
        switch status {
        case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
            return invalidArgument(body)
        case "NOT_FOUND":
            // UNREGISTERED always carries its FcmError detail; a bare 404 is an unknown project.
            return DeliveryOutcome(.credentialsBroken, reason: .projectNotFound)
        case "UNAUTHENTICATED":
            return DeliveryOutcome(.credentialsBroken, reason: .unauthenticated)
        case "PERMISSION_DENIED":
            return DeliveryOutcome(.credentialsBroken, reason: .permissionDenied)
        case "RESOURCE_EXHAUSTED":
            return quotaExceeded(retryAfter)
        case "UNAVAILABLE":
            return DeliveryOutcome(.retry, reason: .unavailable, retryAfter: retryAfter)
        case "INTERNAL":
            return DeliveryOutcome(.retry, reason: .internal, retryAfter: retryAfter)
        case "DEADLINE_EXCEEDED":
            return DeliveryOutcome(.retry, reason: .timeout, retryAfter: retryAfter)
        default:
            if httpStatus >= 500 || httpStatus == 408 {
                return DeliveryOutcome(.retry, reason: .serverError, retryAfter: retryAfter)
            }
            return DeliveryOutcome(.payloadRejected, reason: .badRequest)
        }
    }

    private static func invalidArgument(_ body: ErrorBody) -> DeliveryOutcome {
        body.mentionsToken
            ? DeliveryOutcome(.tokenInvalid, reason: .invalidRegistration)
            : DeliveryOutcome(.payloadRejected, reason: .invalidArgument)
    }

    private static func quotaExceeded(_ retryAfter: Duration?) -> DeliveryOutcome {
        DeliveryOutcome(.retry, reason: .quotaExceeded, retryAfter: max(quotaBackoff, retryAfter ?? .zero))
    }

    /// The google.rpc status Google's SDKs assume when the body has none.
    private static func defaultStatus(_ httpStatus: Int) -> String {
        switch httpStatus {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 409: "ABORTED"
        case 429: "RESOURCE_EXHAUSTED"
        case 500: "INTERNAL"
        case 503: "UNAVAILABLE"
        default: "UNKNOWN"
        }
    }
}
