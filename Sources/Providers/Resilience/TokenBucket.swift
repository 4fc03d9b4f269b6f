import Clocks
import Foundation
import HeraldCore
import NIOConcurrencyHelpers

/// Paces sends of one credential: `rate` tokens per second, bursts up to `burst`.
///
/// ``acquire(_:maxWait:)`` takes tokens, sleeping until they are available when the wait is short;
/// a longer wait is refused so the caller can hand the messages back with a `Retry-After`
/// instead of holding claimed jobs in memory. Waiting inside a batch is the backpressure: the
/// consumer keeps a bounded number of batches in flight, so a slow bucket slows claiming.
package final class TokenBucket: Sendable {
    /// Sends per second. Default given by the adapter (Expo 600/s; others configurable).
    package let rate: Double
    /// Tokens available at once after an idle period.
    package let burst: Double
    private struct State {
        var tokens: Double
        var updated: ProviderClock.Instant
    }
    private let state: NIOLockedValueBox<State>
    private let clock: ProviderClock

    package init(rate: Double, burst: Double? = nil, clock: ProviderClock = .continuous) {
        precondition(rate > 0, "token bucket rate must be positive")
        self.rate = rate
        self.burst = max(1, burst ?? rate)
        self.clock = clock
        self.state = NIOLockedValueBox(State(tokens: max(1, burst ?? rate), updated: clock.now))
    }

    /// Tokens available now (the headroom gauge).
    package var headroom: Double {
        state.withLockedValue { s in min(burst, s.tokens + (clock.now - s.updated).seconds * rate) }
    }

    /// Takes `count` tokens, waiting up to `maxWait`. Returns false (taking nothing) when the
    /// tokens would only be there later than that.
    package func acquire(_ count: Int, maxWait: Duration) async -> Bool {
        let needed = Double(count)
        let wait: Double = state.withLockedValue { s in
            let now = clock.now
            s.tokens = min(burst, s.tokens + (now - s.updated).seconds * rate)
            s.updated = now
            let deficit = needed - s.tokens
            let wait = deficit > 0 ? deficit / rate : 0
            guard wait <= maxWait.seconds else { return -1 }
            // Reserve now (tokens may go negative): later callers queue behind this one.
            s.tokens -= needed
            return wait
        }
        if wait < 0 { return false }
        if wait > 0 { try? await clock.sleep(for: .seconds(wait)) }
        return true
    }

    /// How long until `count` tokens would be free (the Retry-After of a refused acquire).
    package func delay(for count: Int) -> Duration {
        state.withLockedValue { s in
            let available = min(burst, s.tokens + (clock.now - s.updated).seconds * rate)
            return .seconds(max(0, (Double(count) - available) / rate))
        }
    }
}
