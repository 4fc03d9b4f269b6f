import Foundation

/// Polls `condition` every `poll` until it holds or `timeout` passes; returns its last value.
/// For waiting on other processes (a worker, the simulator), never for timing a result.
package func waitUntil(
    _ timeout: Duration,
    poll: Duration = .milliseconds(100),
    _ condition: () async throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: poll)
    }
    return try await condition()
}
