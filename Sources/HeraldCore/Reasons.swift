/// Why a job or one of its devices ended up where it did: the `reason` of a `herald.delivery_log`
/// row and a job's `last_error`. Closed: every value comes from one of the enums below, and its
/// ``text`` is stable (stored, shown by `herald explain` and the console, used as a metric label).
///
/// The text alone does not name the kind (`rate_limited` is a provider's answer, a suppression
/// and a fold reason); the log row's `event` does.
package enum LogReason: Sendable, Hashable {
    /// One device's provider outcome (or the worker's, for a message it did not send).
    case outcome(DeliveryOutcome.Reason)
    /// Held by a rule; the job stays pending.
    case deferred(DeferReason)
    /// Dropped by a rule.
    case suppressed(SuppressionReason)
    /// Folded into a summary.
    case folded(FoldReason)
    /// Dead-lettered at once: a provider refused the message itself.
    case payloadRejected(DeliveryOutcome.Reason)
    /// Dead-lettered: still failing after the category's last attempt.
    case attemptsExhausted(DeliveryOutcome.Reason)
    /// Dead-lettered: the next retry would fall after the job's expiry.
    case expiredWhileRetrying(DeliveryOutcome.Reason)
    /// The job names a category that is not configured.
    case unknownCategory
    /// Past its `expiresAt` before it could go out.
    case expiredBeforeDelivery
    /// Claimed again with every device already having accepted it.
    case alreadyAccepted
    /// A critical job's category deadline passed with no device having taken it.
    case deadlineMissed
    /// A job whose deadline alert was raised got delivered after all.
    case deliveredAfterDeadline
    /// The local fallback recorded it as the user's in-app alert.
    case shownAsAlert
    /// The local fallback recorded it in the user's in-app inbox.
    case shownInInbox

    /// The stored text.
    package var text: String {
        switch self {
        case .outcome(let r): r.rawValue
        case .deferred(let r): r.rawValue
        case .suppressed(let r): r.rawValue
        case .folded(let r): r.rawValue
        case .payloadRejected(let r): "payload_rejected: \(r.rawValue)"
        case .attemptsExhausted(let r): "attempts_exhausted: \(r.rawValue)"
        case .expiredWhileRetrying(let r): "expired_while_retrying: \(r.rawValue)"
        case .unknownCategory: "unknown_category"
        case .expiredBeforeDelivery: "expired_before_delivery"
        case .alreadyAccepted: "already_accepted"
        case .deadlineMissed: "deadline_missed"
        case .deliveredAfterDeadline: "delivered_after_deadline"
        case .shownAsAlert: "alert"
        case .shownInInbox: "inbox"
        }
    }
}

extension LogReason: CustomStringConvertible {
    package var description: String { text }
}

/// Why a job was held. Stable raw values (delivery log, metric labels).
package enum DeferReason: String, Sendable, Hashable, CaseIterable {
    case quietHours = "quiet_hours"
    case scheduled
}

/// Why a job was not sent. A closed list with stable raw values (delivery log, metric labels).
package enum SuppressionReason: String, Sendable, Hashable, CaseIterable {
    /// Preferences `enabled = false`.
    case disabledByUser = "disabled_by_user"
    /// `eventToggles[category] = false`.
    case categoryMuted = "category_muted"
    /// `mutedUntil` is in the future.
    case mutedUntil = "muted_until"
    /// An opt-in category the user has not opted into.
    case notOptedIn = "not_opted_in"
    /// The job's `context` is live in the user's presence.
    case presence
    /// The job's `geo` lies outside the user's location radius.
    case outOfRadius = "out_of_radius"
    /// The user has no active device.
    case noActiveDevice = "no_active_device"
    /// No device has the attributes the job `requires`.
    case noCapableDevice = "no_capable_device"
    /// Quiet hours with the category's `drop` policy.
    case quietHoursDrop = "quiet_hours_drop"
    /// Over the per-user rate limit with `over: suppress`.
    case rateLimited = "rate_limited"
    /// Over the per-scope quota with `over: suppress`.
    case scopeQuota = "scope_quota"
}

/// Why a job was folded into a summary. Stable raw values.
package enum FoldReason: String, Sendable, Hashable, CaseIterable {
    /// Beyond the first N of a `leading` window.
    case coalesced
    /// A `trailing` category: the latest wins when the window closes.
    case debounced
    /// Over the per-user rate limit.
    case rateLimited = "rate_limited"
    /// Over the per-scope quota.
    case scopeQuota = "scope_quota"
    /// More than `summarizeAbove` due at once.
    case backlog
    /// A summary for the same key is already open.
    case summaryOpen = "summary_open"
}

// Interpolated into a log line, a reason reads as its stored text, not its Swift case name.
extension DeferReason: CustomStringConvertible { package var description: String { rawValue } }
extension SuppressionReason: CustomStringConvertible { package var description: String { rawValue } }
extension FoldReason: CustomStringConvertible { package var description: String { rawValue } }
