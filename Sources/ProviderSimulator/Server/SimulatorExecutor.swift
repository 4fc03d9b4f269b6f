import Dispatch
import HeraldCore

/// Runs the simulator's request handling on Dispatch threads instead of Swift's cooperative
/// pool.
///
/// The simulator often shares a process with what it serves (the test suites run it in
/// process). The cooperative pool has one thread per core — two here — so a test busy on both
/// of them held every simulated provider's answer back for seconds, and clients timed out on
/// requests the simulator had already accepted. Dispatch threads are scheduled by the kernel
/// beside everything else, as a separate provider process would be.
final class SimulatorExecutor: TaskExecutor {
    static let shared = SimulatorExecutor()

    private let queue = DispatchQueue(label: "herald.simulator", qos: .userInitiated, attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
