import Foundation

/// Wall-clock time, injected wherever time decides something
/// (claims, backoff, leases, expiry), so tests move time instead of sleeping.
package protocol WallClock: Sendable {
    func now() -> Date
}

/// The system's real-time clock.
package struct SystemClock: WallClock {
    package init() {}
    package func now() -> Date { Date() }
}
