/// Every metric Herald exports, with its type and labels: the single source of truth that the
/// deployment files (dashboard, alert rules, KEDA/HPA) are checked against in tests.
package enum MetricNames {
    package enum Kind: String, Sendable { case counter, gauge, histogram }

    package struct Metric: Sendable, Hashable {
        package let name: String
        package let kind: Kind
        package let labels: [String]
        package let help: String
    }

    package static let jobsClaimed = Metric(
        name: "herald_jobs_claimed_total",
        kind: .counter,
        labels: [],
        help: "Jobs claimed from the outbox."
    )
    package static let jobsCompleted = Metric(
        name: "herald_jobs_completed_total",
        kind: .counter,
        labels: ["state"],
        help: "Jobs settled, by the state they went to (done, pending, dead, suppressed, expired, summarized)."
    )
    package static let jobsRetried = Metric(
        name: "herald_jobs_retried_total",
        kind: .counter,
        labels: [],
        help: "Jobs scheduled for another attempt."
    )
    package static let jobsDeadLettered = Metric(
        name: "herald_jobs_dead_lettered_total",
        kind: .counter,
        labels: [],
        help: "Jobs moved to the dead letters."
    )
    package static let suppressed = Metric(
        name: "herald_suppressed_total",
        kind: .counter,
        labels: ["rule"],
        help: "Jobs suppressed, by rule."
    )
    package static let coalesced = Metric(
        name: "herald_coalesced_total",
        kind: .counter,
        labels: ["reason"],
        help: "Jobs folded into a summary, by reason."
    )
    package static let deferred = Metric(
        name: "herald_deferred_total",
        kind: .counter,
        labels: ["reason"],
        help: "Jobs held for later, by reason."
    )
    package static let deliveryAttempts = Metric(
        name: "herald_delivery_attempts_total",
        kind: .counter,
        labels: ["provider", "outcome", "reason"],
        help: "Provider sends per device, by provider, outcome and reason."
    )
    package static let devicesDisabled = Metric(
        name: "herald_devices_disabled_total",
        kind: .counter,
        labels: ["reason"],
        help: "Devices disabled because the provider reported the token dead."
    )
    package static let providerDuration = Metric(
        name: "herald_provider_request_duration_seconds",
        kind: .histogram,
        labels: ["provider"],
        help: "Time a provider adapter took for one batch of messages."
    )
    package static let claimDuration = Metric(
        name: "herald_claim_duration_seconds",
        kind: .histogram,
        labels: [],
        help: "Batch claim statement latency."
    )
    package static let ackDuration = Metric(
        name: "herald_ack_duration_seconds",
        kind: .histogram,
        labels: [],
        help: "Batch acknowledgement latency."
    )
    package static let deliveryLatency = Metric(
        name: "herald_delivery_latency_seconds",
        kind: .histogram,
        labels: ["category"],
        help: "Per category: from enqueue (or the deliverAt it asked for) to the first device that accepted the job."
    )
    package static let deadlineMissed = Metric(
        name: "herald_deadline_missed_total",
        kind: .counter,
        labels: ["category"],
        help:
            "Per category with a deadline: jobs no device accepted in time (alerted, delivered late, or never delivered)."
    )
    package static let inFlight = Metric(
        name: "herald_in_flight_jobs",
        kind: .gauge,
        labels: [],
        help: "Jobs this replica holds (claimed, not yet settled)."
    )
    package static let outboxJobs = Metric(
        name: "herald_outbox_jobs",
        kind: .gauge,
        labels: ["state"],
        help:
            "Outbox depth by state (pending_due, pending_scheduled, paused, running); measured by the maintenance leader."
    )
    package static let outboxLag = Metric(
        name: "herald_outbox_lag_seconds",
        kind: .gauge,
        labels: [],
        help: "Age of the oldest due pending job; measured by the maintenance leader."
    )
    package static let deadLetters = Metric(
        name: "herald_dead_letters",
        kind: .gauge,
        labels: [],
        help: "Open (not replayed) dead letters; measured by the leader."
    )
    package static let pauses = Metric(
        name: "herald_pauses",
        kind: .gauge,
        labels: [],
        help: "Pauses in force (categories, apps, or everything; herald.pause); measured by the leader."
    )
    package static let maintenanceLeader = Metric(
        name: "herald_maintenance_leader",
        kind: .gauge,
        labels: [],
        help: "1 on the replica that runs maintenance."
    )
    package static let ready = Metric(
        name: "herald_ready",
        kind: .gauge,
        labels: [],
        help: "1 while the replica is ready (database reachable, schema current, not draining)."
    )
    package static let circuitState = Metric(
        name: "herald_provider_circuit_state",
        kind: .gauge,
        labels: ["provider"],
        help: "Provider circuit breaker: 0 closed, 1 half-open, 2 open."
    )
    package static let tokenBucketHeadroom = Metric(
        name: "herald_provider_token_bucket_headroom",
        kind: .gauge,
        labels: ["provider"],
        help: "Sends left in the provider credential's token bucket (with the network adapters)."
    )

    /// Buckets of `herald_delivery_latency_seconds`: the category deadlines Herald serves (5 s for
    /// messages and safety alerts, 10 s, 30 s for listings) fall on bucket bounds, so an SLO is a
    /// ratio of two bucket counts.
    package static let deliveryLatencyBuckets: [Duration] = [
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5),
        .seconds(10), .seconds(30), .seconds(60), .seconds(300), .seconds(900), .seconds(3600),
    ]

    package static let all: [Metric] = [
        jobsClaimed, jobsCompleted, jobsRetried, jobsDeadLettered, suppressed, coalesced, deferred, deliveryAttempts,
        devicesDisabled, providerDuration, claimDuration, ackDuration, deliveryLatency, deadlineMissed, inFlight,
        outboxJobs, outboxLag, deadLetters,
        pauses, maintenanceLeader, ready, circuitState, tokenBucketHeadroom,
    ]
}
