import HeraldCore
import Logging

/// Where the local-fallback provider writes what it would have shown.
package protocol LocalNotificationStore: Sendable {
    /// Records every message in one round trip.
    func record(_ messages: [PushMessage]) async throws
}

/// Records rendered notifications for in-app display instead of pushing them.
///
/// Apps poll `herald.local_notifications` (and developers inspect it); a device registered with
/// provider `local` receives everything through here.
package struct LocalFallbackProvider: PushProvider {
    package let name = "local"
    private let store: any LocalNotificationStore

    package init(store: any LocalNotificationStore) {
        self.store = store
    }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        guard !messages.isEmpty else { return [] }
        let start = ContinuousClock.now
        do {
            try await store.record(messages)
            let latency = ContinuousClock.now - start
            return messages.map { _ in DeliveryOutcome(.accepted, reason: .recorded, latency: latency) }
        } catch {
            logger.debug("Local fallback store failed", metadata: ["error.type": "\(type(of: error))"])
            return messages.map { _ in DeliveryOutcome(.retry, reason: .storeUnavailable) }
        }
    }
}
