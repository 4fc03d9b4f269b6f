import HeraldCore
import Synchronization

/// How many due jobs of one user a consumer's claims take together (the claim's user run,
/// ``Queue/OutboxStatements/userRun`` at most), chosen from what this consumer measures.
///
/// A run of *n* jobs of a user saves the claim's and the acknowledgement's per-user work for
/// *n* − 1 of them, and costs *n* − 1 more waves to send: a user's pushes go out one after the
/// other, each after the provider answered the one before. So the run is as long as the batch's
/// database time buys in waves: the claim's and acknowledgement's average duration over a
/// wave's (from its first request to its last answer), at least 1 and at most the claim's cap.
/// Against the sink or a fast provider (a wave of a millisecond or less) that is the cap; against
/// a provider that answers in 100 ms, 1 (a claim takes one job a user, as before claim v38).
/// Until a wave is measured the run is the cap, as claims before v38 took a user's jobs that lay
/// in a row together: a consumer starting against a slow provider sends its first batches (up to
/// `queue.max_in_flight_batches` of them) in up to that many round trips each, then shortens.
///
/// Averages are exponentially weighted (each new measurement a fifth), so a provider that slows
/// down shortens the runs within a few batches.
package final class UserRun: Sendable {
    private struct Averages {
        var claim: Double?
        var ack: Double?
        var wave: Double?
    }

    /// The longest run (the claim's cap).
    package let limit: Int
    private let averages = Mutex(Averages())

    package init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// The run the next claim takes.
    package var current: Int {
        averages.withLock { a in Self.run(claim: a.claim, ack: a.ack, wave: a.wave, limit: limit) }
    }

    /// The run for these averages (seconds): the cap until a wave is measured, else the batch's
    /// database time over a wave's, within 1…`limit`.
    package static func run(claim: Double?, ack: Double?, wave: Double?, limit: Int) -> Int {
        guard let wave, wave > 0 else { return limit }
        let database = (claim ?? 0) + (ack ?? 0)
        let ratio = database / wave
        guard ratio.isFinite else { return limit }
        return min(limit, max(1, Int(ratio)))
    }

    package func claimed(in duration: Duration) { record(\.claim, duration) }
    package func acknowledged(in duration: Duration) { record(\.ack, duration) }
    package func waveAnswered(in duration: Duration) { record(\.wave, duration) }

    private func record(_ field: WritableKeyPath<Averages, Double?>, _ duration: Duration) {
        let seconds = duration.seconds
        averages.withLock { a in
            a[keyPath: field] = a[keyPath: field].map { $0 * 0.8 + seconds * 0.2 } ?? seconds
        }
    }
}
