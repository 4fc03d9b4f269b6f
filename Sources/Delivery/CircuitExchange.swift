import Foundation
import HeraldCore
import Logging
import Providers
import Queue
import ServiceLifecycle

/// Shares the providers' circuit breakers between workers through `herald.provider_circuits`
/// (migration 0023), so an outage one worker has seen costs the others no attempts.
///
/// Each breaker opens on its own worker's failures, and each failure before it opens spends a
/// job's attempt. Without sharing, a worker that starts during an outage (a restart, a replica
/// added because the backlog grows) begins with a closed circuit and spends up to the failure
/// threshold of attempts again, mostly on the jobs due first: the ones the other workers failed
/// and handed back. Every `interval` (and once before the consumers start, ``adoptOnce()``) this:
/// - records each circuit that this worker's own failures opened, with the time left (the
///   table keeps the later of what workers record);
/// - records a circuit that closed after being open here (a good probe), which ends the shared
///   period, so the other workers do not wait out the rest of it;
/// - opens each closed circuit whose shared row is open, for the time left
///   (``CircuitBreaker/adopt(openFor:)``). An adopted circuit is not recorded again: once its
///   time is up it probes for itself, and only its own failed probe opens it (and records it).
///
/// A database error skips one exchange (logged at debug): the breakers still work alone.
package struct CircuitExchange: Service {
    /// Provider kind → its breaker (live adapters only; a sink or local provider has none).
    let circuits: [String: CircuitBreaker]
    let outbox: Outbox
    let interval: Duration
    let logger: Logger

    package init(circuits: [String: CircuitBreaker], outbox: Outbox, interval: Duration = .seconds(1), logger: Logger) {
        self.circuits = circuits
        self.outbox = outbox
        self.interval = interval
        self.logger = logger
    }

    package func run() async throws {
        guard !circuits.isEmpty else { return }
        var recordedOpen: Set<String> = []
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await exchange(&recordedOpen)
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
        }
    }

    /// Opens this worker's closed circuits whose shared row is open; before the consumers start.
    package func adoptOnce() async {
        guard !circuits.isEmpty else { return }
        do {
            adopt(try await outbox.openCircuits())
        } catch {
            logger.debug("Shared circuits not read", metadata: ["error": "\(error)"])
        }
    }

    /// One exchange: record this worker's news, then adopt the others'.
    /// - Parameter recordedOpen: the providers last recorded open by this worker.
    package func exchange(_ recordedOpen: inout Set<String>) async {
        do {
            for (provider, circuit) in circuits.sorted(by: { $0.key < $1.key }) {
                if let remaining = circuit.ownOpenRemaining() {
                    try await outbox.publishCircuit(provider, openFor: remaining)
                    recordedOpen.insert(provider)
                } else if circuit.state == .closed, recordedOpen.contains(provider) {
                    try await outbox.publishCircuit(provider, openFor: nil)
                    recordedOpen.remove(provider)
                }
            }
            adopt(try await outbox.openCircuits())
        } catch {
            logger.debug("Circuit exchange skipped", metadata: ["error": "\(error)"])
        }
    }

    private func adopt(_ open: [String: Duration]) {
        for (provider, remaining) in open.sorted(by: { $0.key < $1.key }) {
            guard let circuit = circuits[provider], circuit.adopt(openFor: remaining) else { continue }
            logger.warning(
                "Provider circuit opened: another worker's is open",
                metadata: ["push.provider": "\(provider)", "circuit.open_for_s": "\(Int(remaining.seconds.rounded(.up)))"])
        }
    }
}
