import Synchronization

/// At most `limit` bodies at once, the others waiting in arrival order.
///
/// The consumer passes its batch slots' acknowledgements through one
/// (`OutboxConsumer.Configuration.maxConcurrentAcks`): batches in flight keep a slow provider
/// busy, but on the database each acknowledgement running at once is one more statement beside
/// the claims and the critical lane on the same cores. Its send loops count their batch slots
/// with one, and the batches that gave their slot back early with another (``enter()`` and
/// ``tryEnter()``, given back from the batch's task by ``leave()``). The tests' `TestGate` adds
/// re-entrancy on top of one.
///
/// ```swift
/// let gate = SlotGate(limit: 2)
/// let owned = try await gate.run { try await outbox.acknowledge(settlements, jobs: jobs, bucket: bucket) }
/// ```
package final class SlotGate: Sendable {
    private let limit: Int
    private let state = Mutex<(running: Int, waiting: [CheckedContinuation<Void, Never>])>((0, []))

    /// - Parameter limit: bodies at once; at least 1.
    package init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Runs `body` once a slot is free. The wait is not cancellable: a caller that must run
    /// whatever happens to its task (an acknowledgement) gets its turn.
    package func run<T>(_ body: () async throws -> T) async rethrows -> T {
        await enter()
        defer { leave() }
        return try await body()
    }

    /// Waits for a slot and takes it, for a holder that gives it back elsewhere (``leave()``).
    /// Not cancellable, as ``run(_:)``'s wait.
    package func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLock { state -> Bool in
                if state.running < limit {
                    state.running += 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    /// Takes a slot if one is free now; never waits (nobody waits while one is free).
    package func tryEnter() -> Bool {
        state.withLock { state in
            guard state.running < limit else { return false }
            state.running += 1
            return true
        }
    }

    /// Gives a slot back: hands it to the first waiter, or frees it.
    package func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.running -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
