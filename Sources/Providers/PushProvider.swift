import HeraldCore
import Logging

/// Sends rendered messages through one channel and classifies what happened to each.
///
/// An adapter never throws: every failure (network, HTTP status, provider error body, timeout)
/// maps to a ``DeliveryOutcome`` for the message it concerns, so one bad device cannot fail
/// its siblings. Results come back in the order of `messages`.
///
/// ```swift
/// let outcomes = await provider.send(messages, logger: logger)
/// for (message, outcome) in zip(messages, outcomes) where outcome.disposition == .tokenInvalid {
///     // the dispatcher disables message.device
/// }
/// ```
package protocol PushProvider: Sendable {
    /// A closed-vocabulary name for logs and metric labels, e.g. `apns`, `local`, `sink`.
    var name: String { get }
    /// Sends every message and returns one outcome per message, in order.
    ///
    /// - Parameter gate: admits each provider request just before it leaves and sees its result
    ///   as soon as it returns (``ResilientProvider``'s circuit breaker); nil sends everything.
    func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome]
}

extension PushProvider {
    /// Sends with no gate.
    package func send(_ messages: [PushMessage], logger: Logger) async -> [DeliveryOutcome] {
        await send(messages, gate: nil, logger: logger)
    }
}

/// Which adapter serves each ``ProviderKind``. Kinds without an adapter are "not configured".
package struct ProviderRegistry: Sendable {
    private var adapters: [ProviderKind: any PushProvider]

    package init(_ adapters: [ProviderKind: any PushProvider] = [:]) {
        self.adapters = adapters
    }

    package subscript(kind: ProviderKind) -> (any PushProvider)? {
        get { adapters[kind] }
        set { adapters[kind] = newValue }
    }

    package var configuredKinds: [ProviderKind] { ProviderKind.allCases.filter { adapters[$0] != nil } }
}
