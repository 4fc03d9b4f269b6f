import Synchronization

/// A first-come, first-served counting gate: at most `count` holders at once.
///
/// The consumer passes its batch slots' acknowledgements through one (see
/// ``OutboxConsumer/Configuration/maxConcurrentAcks``): batches in flight are what keeps a slow
/// provider busy, but on the database each in-flight acknowledgement is one more statement
/// competing for the same cores as the claims and the critical lane.
///
/// ```swift
/// let slots = AckSlots(2)
/// try await slots.withSlot { try await outbox.acknowledge(settlements, jobs: jobs, bucket: bucket) }
/// ```
package final class AckSlots: Sendable {
    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
    }

    private let state: Mutex<State>

    /// - Parameter count: holders at once; at least 1.
    package init(_ count: Int) {
        state = Mutex(State(free: max(1, count)))
    }

    /// Runs `body` while holding a slot, waiting for one in arrival order. Not cancellable: the
    /// caller (an acknowledgement) must run whatever happens to its task.
    package func withSlot<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        let took = state.withLock { s -> Bool in
            guard s.free > 0 else { return false }
            s.free -= 1
            return true
        }
        if took { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                // A slot freed between the first look and here.
                if s.free > 0 {
                    s.free -= 1
                    return true
                }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    private func release() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard s.head < s.waiters.count else {
                s.free += 1
                return nil
            }
            // The slot passes straight to the longest waiter.
            let c = s.waiters[s.head]
            s.head += 1
            if s.head == s.waiters.count {
                s.waiters.removeAll(keepingCapacity: true)
                s.head = 0
            }
            return c
        }
        next?.resume()
    }
}
