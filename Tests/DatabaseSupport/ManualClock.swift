import Delivery
import Dispatcher
import HeraldCore
import Synchronization

/// A clock that only moves when told to (tests).
package final class ManualClock: WallClock {
    private let current: Mutex<Double>
    package init(_ start: Double = SystemClock().now()) { current = Mutex(start) }
    package func now() -> Double { current.withLock { $0 } }
    package func advance(by seconds: Double) { current.withLock { $0 += seconds } }
    package func set(_ seconds: Double) { current.withLock { $0 = seconds } }
}

