import Foundation
import HeraldCore

/// Exponential backoff with jitter: the only place that computes retry delays.
///
/// Attempt `n` (1-based) waits a uniformly random time in the upper half of its ceiling,
/// `c/2 ... c` with `c = min(cap, base · 2^(n−1))` ("equal jitter"). A provider's `Retry-After`
/// overrides it when longer.
///
/// Why not full jitter (`0 ... c`): it lets a job's attempts bunch up. With the defaults (base
/// 2 s, 5 attempts) the fifth attempt came within 5 s of the first for about 2 % of jobs, so a
/// provider blip of a few seconds, too short and too spread over replicas to open their
/// circuits, dead-lettered some of the jobs it touched. The lower bound makes attempt `n` come at
/// least `(2^(n−1) − 1) · base / 2` after the first (15 s for the fifth at the defaults), and
/// half the window still spreads a burst of retries.
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

    /// A jittered delay for attempt `n` in `ceiling/2 ... ceiling`, honouring `retryAfter` when it
    /// is longer.
    package func delay(attempt: Int, retryAfter: Duration?, using random: inout some RandomNumberGenerator) -> Duration
    {
        let ceiling = ceiling(attempt: attempt).seconds
        let jittered = Duration.seconds(Double.random(in: (ceiling / 2)...ceiling, using: &random))
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
