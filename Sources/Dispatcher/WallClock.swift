/// Wall-clock time in seconds since 1970, injected wherever time decides something
/// (claims, backoff, leases, expiry), so tests move time instead of sleeping.
package protocol WallClock: Sendable {
    func now() -> Double
}

/// The system's real-time clock.
package struct SystemClock: WallClock {
    package init() {}
    package func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

#if canImport(Glibc)
import HeraldCore
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
