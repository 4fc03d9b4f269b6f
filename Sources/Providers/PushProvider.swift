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
    func send(_ messages: [PushMessage], logger: Logger) async -> [DeliveryOutcome]
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
