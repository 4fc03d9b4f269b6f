import Foundation
import HeraldCore

/// A one-slot signal: `signal()` wakes the current waiter, or the next one if nobody waits.
///
/// The consumer waits on it between empty claims; the listener signals it on `NOTIFY`.
package actor Wakeup {
    private var pending = false
    private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextID = 0

    package init() {}

    /// Wakes every current waiter; if none waits, the next `wait` returns at once.
    package func signal() {
        if waiters.isEmpty {
            pending = true
            return
        }
        let all = waiters
        waiters = [:]
        for (_, w) in all { w.resume() }
    }

    /// Returns on a signal, after `timeout`, or when the task is cancelled.
    package nonisolated func wait(timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask { await self.waitForSignal() }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal() async {
        if pending {
            pending = false
            return
        }
        let id = nextID
        nextID += 1
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                if Task.isCancelled { c.resume() } else { waiters[id] = c }
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
    }

    private func cancelWaiter(_ id: Int) {
        waiters.removeValue(forKey: id)?.resume()
    }
}
