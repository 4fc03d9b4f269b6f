import Synchronization

/// At most `limit` bodies at once, the others waiting in arrival order.
///
/// The consumer passes its batch slots' acknowledgements through one
/// (`OutboxConsumer.Configuration.maxConcurrentAcks`): batches in flight keep a slow provider
/// busy, but on the database each acknowledgement running at once is one more statement beside
/// the claims and the critical lane on the same cores. The tests' `TestGate` adds re-entrancy on
/// top of one.
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

    private func enter() async {
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

    /// Hands the slot to the first waiter, or frees it.
    private func leave() {
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
