import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Tracing

/// Turns each finished batch into spans, one trace per job: a `herald.job` span (kind consumer)
/// from the claim to the acknowledgement, continuing the W3C `traceparent` the enqueuer passed in
/// `options.traceparent` (else a new trace), with a child span per stage: `herald.claim`,
/// `herald.decide` (policy and rendering), `herald.send` per provider request that carried the
/// job's messages (kind client), and `herald.ack`.
///
/// Spans are made after the batch is acknowledged, from the stage timings the consumer recorded,
/// so tracing adds no wait to delivery. Which jobs are recorded is the tracer's sampler's
/// decision (in `herald run`: a sampled `traceparent` always; jobs without one at
/// `tracing.sample_percent`).
package struct JobSpans<T: Tracer>: DeliveryTracer {
    let tracer: T

    package init(tracer: T) { self.tracer = tracer }

    package func record(_ timeline: BatchTimeline) {
        for (job, decision, state) in timeline.jobs {
            var parent = ServiceContext.topLevel
            if let traceparent = job.options.traceparent {
                tracer.extract(["traceparent": traceparent], into: &parent, using: TraceparentExtractor())
            }
            let root = tracer.startSpan(
                "herald.job",
                context: parent,
                ofKind: .consumer,
                at: Self.instant(timeline.claim.start)
            )
            // Not sampled: the stage spans would not be recorded either, so none is made.
            guard root.isRecording else {
                root.end(at: Self.instant(timeline.ack.end))
                continue
            }
            root.attributes["herald.job.id"] = Int(job.id)
            root.attributes["herald.category"] = job.category
            root.attributes["herald.attempt"] = job.attempt
            root.attributes["herald.decision"] = decision
            root.attributes["herald.state"] = state.rawValue
            if state == .dead || state == .expired { root.setStatus(SpanStatus(code: .error, message: state.rawValue)) }
            let context = root.context

            stage("herald.claim", timeline.claim, context)
            let decide = tracer.startSpan(
                "herald.decide",
                context: context,
                ofKind: .internal,
                at: Self.instant(timeline.decide.start)
            )
            decide.attributes["herald.decision"] = decision
            decide.end(at: Self.instant(timeline.decide.end))
            for send in timeline.sends {
                guard let outcomes = send.outcomes[job.id] else { continue }
                let span = tracer.startSpan(
                    "herald.send",
                    context: context,
                    ofKind: .client,
                    at: Self.instant(send.interval.start)
                )
                span.attributes["push.provider"] = send.provider.rawValue
                span.attributes["push.messages"] = outcomes.count
                span.attributes["push.outcomes"] = outcomes.map { "\($0.disposition.rawValue):\($0.reason)" }.joined(
                    separator: ","
                )
                if !outcomes.contains(where: { $0.disposition == .accepted }) {
                    span.setStatus(SpanStatus(code: .error, message: outcomes.first?.reason.rawValue))
                }
                span.end(at: Self.instant(send.interval.end))
            }
            stage("herald.ack", timeline.ack, context)
            root.end(at: Self.instant(timeline.ack.end))
        }
    }

    private func stage(_ name: String, _ interval: BatchTimeline.Interval, _ context: ServiceContext) {
        tracer.startSpan(name, context: context, ofKind: .internal, at: Self.instant(interval.start))
            .end(at: Self.instant(interval.end))
    }

    private static func instant(_ date: Date) -> DefaultTracerClock.Instant {
        DefaultTracerClock.Instant(nanosecondsSinceEpoch: UInt64((date.timeIntervalSince1970 * 1e9).rounded()))
    }
}

/// Reads the `traceparent` key of a one-entry dictionary.
struct TraceparentExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}
