/// What a provider did with one message, already classified for the dispatcher.
package struct DeliveryOutcome: Hashable, Sendable {
    /// What happens next for this device.
    package enum Disposition: String, Hashable, Sendable {
        /// The provider took the message.
        case accepted
        /// Try again later (5xx, 429, timeouts, connection drops), after `retryAfter` if given.
        case retry
        /// The token is dead (APNs Unregistered, FCM UNREGISTERED): disable the device, no retry.
        case tokenInvalid = "token_invalid"
        /// The provider refuses this message itself; a retry cannot help (dead-letter).
        case payloadRejected = "payload_rejected"
        /// Our credentials are broken (bad key, revoked): retry later, alert operators.
        case credentialsBroken = "credentials_broken"
    }

    package var disposition: Disposition
    /// Why: a closed vocabulary, safe as a metric label.
    package var reason: Reason
    /// The provider's `Retry-After`, when it sent one.
    package var retryAfter: Duration?
    /// Time spent on this message's request, when the adapter measured it.
    package var latency: Duration?

    package init(_ disposition: Disposition, reason: Reason, retryAfter: Duration? = nil, latency: Duration? = nil) {
        self.disposition = disposition
        self.reason = reason
        self.retryAfter = retryAfter
        self.latency = latency
    }

    package static let accepted = DeliveryOutcome(.accepted, reason: .ok)
}

extension DeliveryOutcome: CustomStringConvertible {
    /// Never includes tokens, payloads or response bodies.
    package var description: String { "\(disposition.rawValue)(\(reason))" }
}
