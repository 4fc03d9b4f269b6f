import Delivery
import Foundation
import Logging
import OTel
import ServiceLifecycle

/// Where and how `herald run` exports job spans (`tracing.*` settings). Off unless an endpoint is set.
package struct TracingConfiguration: Sendable {
    /// The OTLP/HTTP traces URL, used as given (e.g. `http://collector:4318/v1/traces`); nil: no tracing.
    package var endpoint: String?
    /// `http/protobuf` (default) or `http/json`.
    package var protocolName = "http/protobuf"
    /// Share of jobs enqueued without a `traceparent` that are traced, 0–100. Jobs with one follow
    /// its sampled flag. Default 1.
    package var samplePercent = 1
    package init() {}
}

/// swift-otel's tracer and exporter service for that configuration.
package enum TracingBackend {
    /// The job-span recorder and the service that batches and exports its spans (run it in the
    /// worker's service group, before the consumers, so it flushes after they drain); nil when
    /// tracing is off. Standard `OTEL_*` environment variables override these values.
    package static func make(
        _ configuration: TracingConfiguration,
        logger: Logger
    ) throws
        -> (recorder: any DeliveryTracer, service: any Service)?
    {
        guard let endpoint = configuration.endpoint else { return nil }
        var otel = OTel.Configuration.default
        otel.serviceName = "herald"
        otel.diagnosticLogger = .custom(logger)
        otel.propagators = [.traceContext]
        otel.metrics.enabled = false
        otel.logs.enabled = false
        otel.traces.enabled = true
        otel.traces.exporter = .otlp
        otel.traces.otlpExporter.endpoint = endpoint
        otel.traces.otlpExporter.protocol = configuration.protocolName == "http/json" ? .httpJSON : .httpProtobuf
        otel.traces.sampler =
            .parentBasedTraceIDRatio(ratio: Double(configuration.samplePercent) / 100) ?? .parentBasedAlwaysOn
        // A job is six spans: at 10,000 jobs/s and 1 % that is 600 spans/s. The processor exports
        // one batch per tick (or when its queue is full) and drops what does not fit, so with the
        // library's 512 spans every 5 s most of a busy second would be lost: export up to 4,096
        // spans every second from a queue of 16,384 (about 680 traced jobs a second).
        otel.traces.batchSpanProcessor.scheduleDelay = .seconds(1)
        otel.traces.batchSpanProcessor.maxExportBatchSize = 4_096
        otel.traces.batchSpanProcessor.maxQueueSize = 16_384
        let (tracer, service) = try OTel.makeTracingBackend(configuration: otel)
        return (JobSpans(tracer: tracer), service)
    }
}
