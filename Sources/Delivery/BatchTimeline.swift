import Dispatcher
import Foundation
import HeraldCore

/// When each stage of one batch ran, for tracing: the claim, the decision (policy and
/// rendering), each provider send and the acknowledgement. Times are the consumer's
/// ``WallClock``, so a tracer can place spans next to the enqueuer's.
package struct BatchTimeline: Sendable {
    /// A stage's start and end.
    package struct Interval: Sendable, Hashable {
        package var start: Date
        package var end: Date
        package init(start: Date, end: Date) {
            self.start = start
            self.end = end
        }
    }

    /// One provider request of the batch and the jobs whose messages it carried.
    package struct Send: Sendable {
        package var provider: ProviderKind
        package var interval: Interval
        /// Job id → outcome of each of its messages in this send.
        package var outcomes: [Int64: [DeliveryOutcome]]
    }

    package var claim: Interval
    package var decide: Interval
    package var sends: [Send] = []
    package var ack: Interval
    /// Each job of the batch with what the decision did with it and the state it settled in.
    package var jobs: [(job: Job, decision: String, state: JobState)] = []
}

/// Receives each finished batch's timeline (the OTLP tracer in `herald run`; nothing by default).
package protocol DeliveryTracer: Sendable {
    func record(_ timeline: BatchTimeline)
}
