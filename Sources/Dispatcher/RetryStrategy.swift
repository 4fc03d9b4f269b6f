import Foundation
import HeraldCore

/// Exponential backoff with full jitter: the only place that computes retry delays.
///
/// Attempt `n` (1-based) waits a uniformly random time in `0 ... min(cap, base · 2^(n−1))`.
/// A provider's `Retry-After` overrides it when longer.
package struct RetryStrategy: Sendable, Hashable {
    /// First backoff ceiling. Default 2 s (`herald.categories.backoff_base`).
    package var base: Duration = .seconds(2)
    /// Largest backoff ceiling. Default 600 s (`backoff_cap`).
    package var cap: Duration = .seconds(600)
    /// Attempts before a job is dead-lettered. Default 5 (`max_attempts`).
    package var maxAttempts: Int = 5

    package init(base: Duration = .seconds(2), cap: Duration = .seconds(600), maxAttempts: Int = 5) {
        self.base = base
        self.cap = cap
        self.maxAttempts = maxAttempts
    }

    /// The ceiling for attempt `n`: `min(cap, base · 2^(n−1))`.
    package func ceiling(attempt: Int) -> Duration {
        let exponent = Double(max(0, min(attempt - 1, 62)))
        return .seconds(min(cap.seconds, base.seconds * pow2(exponent)))
    }

    /// A full-jitter delay for attempt `n`, honouring `retryAfter` when it is longer.
    package func delay(attempt: Int, retryAfter: Duration?, using random: inout some RandomNumberGenerator) -> Duration {
        let jittered = Duration.seconds(Double.random(in: 0...ceiling(attempt: attempt).seconds, using: &random))
        if let retryAfter { return max(jittered, retryAfter) }
        return jittered
    }

    private func pow2(_ e: Double) -> Double {
        var result = 1.0
        var i = 0.0
        while i < e {
            result *= 2
            i += 1
        }
        return result
    }
}
