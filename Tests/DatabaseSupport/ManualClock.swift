import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Synchronization

/// A clock that only moves when told to (tests).
package final class ManualClock: WallClock {
    private let current: Mutex<Date>
    package init(_ start: Date = SystemClock().now()) { current = Mutex(start) }
    package func now() -> Date { current.withLock { $0 } }
    package func advance(by span: Duration) { current.withLock { $0 = $0 + span } }
    package func advance(by seconds: TimeInterval) { advance(by: .seconds(seconds)) }
    package func set(_ date: Date) { current.withLock { $0 = date } }
}
