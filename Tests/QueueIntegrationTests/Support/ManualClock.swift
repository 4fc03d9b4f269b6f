import Delivery
import Dispatcher
import HeraldCore
import Synchronization

/// A clock that only moves when told to (tests).
final class ManualClock: WallClock {
    private let current: Mutex<Double>
    init(_ start: Double = SystemClock().now()) { current = Mutex(start) }
    func now() -> Double { current.withLock { $0 } }
    func advance(by seconds: Double) { current.withLock { $0 += seconds } }
    func set(_ seconds: Double) { current.withLock { $0 = seconds } }
}

