import HeraldCore
import Logging

/// Accepts every message without sending it: the benchmark's provider.
///
/// For tests and the demo it also understands a few token prefixes, so failure paths can be
/// driven through a real worker: `sink-retry…` (retry, reason `unavailable`), `sink-429…`
/// (retry after 1 s), `sink-invalid…` (token invalid), `sink-reject…` (payload rejected),
/// `sink-creds…` (credentials broken). Any other token is accepted.
package struct SinkProvider: PushProvider {
    package let name = "sink"

    package init() {}

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        messages.map { message in
            let token = message.device.token
            guard token.hasPrefix("sink-") else { return .accepted }
            if token.hasPrefix("sink-retry") { return DeliveryOutcome(.retry, reason: .unavailable) }
            if token.hasPrefix("sink-429") {
                return DeliveryOutcome(.retry, reason: .rateLimited, retryAfter: .seconds(1))
            }
            if token.hasPrefix("sink-invalid") { return DeliveryOutcome(.tokenInvalid, reason: .unregistered) }
            if token.hasPrefix("sink-reject") { return DeliveryOutcome(.payloadRejected, reason: .badPayload) }
            if token.hasPrefix("sink-creds") { return DeliveryOutcome(.credentialsBroken, reason: .badCredentials) }
            return .accepted
        }
    }
}
