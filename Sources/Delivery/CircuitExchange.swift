import Foundation
import HeraldCore
import Logging
import Providers
import Queue
import ServiceLifecycle

/// Records the providers' open circuits in `herald.provider_circuits` (migration 0024), so a
/// worker that starts during an outage spends no attempts finding it again.
///
/// Each breaker opens on its own worker's failures, and each failure before it opens spends a
/// job's attempt. A worker that starts during an outage (a restart, a replica added because the
/// backlog grows) would begin with a closed circuit and spend up to the failure threshold of
/// attempts again, mostly on the jobs due first: the ones the other workers failed and handed
/// back. Once before the consumers start (``adoptOnce()``) this opens each circuit whose row is
/// open, for the time left (``CircuitBreaker/adopt(openFor:)``). Then, every `interval`, it:
/// - records each opening of a circuit by this worker's own failures, once, with the time left
///   (the table keeps the later of what workers record);
/// - records a circuit that closed after being open here (a good probe), which ends the period;
/// - ends an adopted period early when the recorded one has ended (another worker's probe found
///   the provider back): its next request is its own probe.
///
/// A running worker never adopts: each counts its own failures. Adopting every second stopped
/// every worker on one worker's run of failures, and a burst of failures spread over several
/// workers (each below its threshold, retried through) was then used up only by probes at
/// doubling periods (docs/faults.md). An adopted circuit is not recorded again: once its time is
/// up it probes for itself, and only its own failed probe opens it (and records it).
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
        var recorded = Recorded()
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await exchange(&recorded)
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
        }
    }

    /// Opens this worker's closed circuits whose row is open; before the consumers start, and
    /// only then.
    package func adoptOnce() async {
        guard !circuits.isEmpty else { return }
        do {
            for (provider, remaining) in try await outbox.openCircuits().sorted(by: { $0.key < $1.key }) {
                guard let circuit = circuits[provider], circuit.adopt(openFor: remaining) else { continue }
                logger.warning(
                    "Provider circuit opened: another worker's is open",
                    metadata: [
                        "push.provider": "\(provider)", "circuit.open_for_s": "\(Int(remaining.seconds.rounded(.up)))",
                    ]
                )
            }
        } catch {
            logger.debug("Recorded circuits not read", metadata: ["error": "\(error)"])
        }
    }

    /// What this worker has recorded in the table, per provider.
    package struct Recorded: Sendable {
        /// The last of its own openings recorded (``CircuitBreaker/ownOpenRemaining()``).
        var opening: [String: Int] = [:]
        /// Providers recorded open and not closed since.
        var open: Set<String> = []
        package init() {}
    }

    /// One exchange: record this worker's news (each of its own openings once, and a close after
    /// one), then end an adopted period the others have ended. Adopts nothing (``adoptOnce()``).
    package func exchange(_ recorded: inout Recorded) async {
        do {
            for (provider, circuit) in circuits.sorted(by: { $0.key < $1.key }) {
                if let own = circuit.ownOpenRemaining() {
                    // Once per opening, not every second: a worker still waiting out its own period
                    // must not reopen the recorded one after another worker found the provider
                    // back (a worker starting then would adopt it).
                    guard recorded.opening[provider] != own.opening else { continue }
                    try await outbox.publishCircuit(provider, openFor: own.remaining)
                    recorded.opening[provider] = own.opening
                    recorded.open.insert(provider)
                } else if circuit.state == .closed, recorded.open.contains(provider) {
                    try await outbox.publishCircuit(provider, openFor: nil)
                    recorded.open.remove(provider)
                }
            }
            guard circuits.values.contains(where: \.isAdoptedOpen) else { return }
            let open = try await outbox.openCircuits()
            for (provider, circuit) in circuits where open[provider] == nil && circuit.isAdoptedOpen {
                circuit.endAdoption()
            }
        } catch {
            logger.debug("Circuit exchange skipped", metadata: ["error": "\(error)"])
        }
    }
}
