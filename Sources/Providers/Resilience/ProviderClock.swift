import Clocks
import HeraldCore

/// The clock of the breaker, the pacing buckets and credential pauses: the continuous clock in
/// production, a `TestClock` in tests (time moves when the test says, nothing sleeps).
package typealias ProviderClock = AnyClock<Duration>

extension AnyClock where Duration == Swift.Duration {
    /// `ContinuousClock`, type-erased: time keeps passing while the machine sleeps.
    package static var continuous: AnyClock<Swift.Duration> { AnyClock(ContinuousClock()) }
}

extension AnyClock.Instant {
    package static func + (lhs: Self, rhs: Duration) -> Self { lhs.advanced(by: rhs) }
    package static func - (lhs: Self, rhs: Self) -> Duration { rhs.duration(to: lhs) }
}
