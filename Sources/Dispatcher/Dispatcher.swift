import Providers

/// Decides, for a whole claimed batch, what happens to each job, and folds provider outcomes
/// into settlements. Pure: values in, values out, time from the caller.
///
/// ```swift
/// let plans = dispatcher.plan(jobs, devices: devicesByUser, categories: rules, now: clock.now())
/// // send every `.deliver` plan's messages, then:
/// let settlement = dispatcher.settle(job, rules: rules[job.category]!, messages: sent,
///                                    outcomes: outcomes, now: clock.now(), random: &rng)
/// ```
package struct Dispatcher: Sendable {
    package init() {}

    /// What to do with one job.
    package enum Action: Sendable {
        /// Send these messages now.
        case deliver([PushMessage])
        /// Finish without sending.
        case finish(Settlement)
    }

    package struct Plan: Sendable {
        package var job: Job
        package var action: Action
    }

    /// Plans every job of a batch against its recipient's active devices.
    package func plan(
        _ jobs: [Job], devices: [String: [Device]], categories: [String: CategoryRules], now: Double
    ) -> [Plan] {
        jobs.map { job in
            guard let rules = categories[job.category] else {
                return Plan(job: job, action: .finish(finish(job, .dead, reason: "unknown_category", event: "dead", alert: false)))
            }
            if now >= job.expiresAt {
                return Plan(job: job, action: .finish(
                    finish(job, .expired, reason: "expired_before_delivery", event: "expired", alert: job.priority == .critical)))
            }
            let targets = (devices[job.userID] ?? [])
            if targets.isEmpty {
                return Plan(job: job, action: .finish(
                    finish(job, .suppressed, reason: "no_active_device", event: "suppressed", alert: job.priority == .critical)))
            }
            let remaining = targets.filter { !job.acceptedDevices.contains($0.id) }
            if remaining.isEmpty {
                return Plan(job: job, action: .finish(finish(job, .done, reason: "already_accepted", event: "settled", alert: false)))
            }
            return Plan(job: job, action: .deliver(remaining.map { render(job, rules: rules, device: $0, now: now) }))
        }
    }

    /// Renders the job for one device.
    package func render(_ job: Job, rules: CategoryRules, device: Device, now: Double) -> PushMessage {
        let route = job.payload.route ?? rules.defaultRoute
        var data: [String: String] = [
            "eventType": job.payload.eventType ?? job.category,
            "sentAtIso": Self.iso8601(now),
        ]
        if let route { data["route"] = route }
        if let metadata = job.payload.metadataJSON { data["metadata"] = metadata }
        return PushMessage(
            jobID: job.id, device: device, title: job.payload.title, body: job.payload.body,
            subtitle: job.payload.subtitle, route: route, data: data, priority: job.priority,
            collapseID: job.options.collapseID ?? "herald-\(job.id)",
            silent: job.options.silent ?? rules.silent, sound: job.payload.sound ?? rules.sound,
            threadID: job.payload.threadID, imageURL: job.payload.imageURL, actionCategory: rules.apnsCategory,
            interruptionLevel: rules.interruptionLevel, androidChannel: rules.androidChannel, badge: nil,
            expiresAt: job.expiresAt)
    }

    /// Folds the outcomes of one attempt into the job's settlement.
    ///
    /// Accepted devices are remembered so a retry never re-sends to them; dead tokens disable
    /// their device; a payload rejection dead-letters at once; anything retryable schedules
    /// the next attempt with full-jitter backoff (or the provider's `Retry-After`, which does
    /// not use up an attempt), until attempts or the job's TTL run out.
    package func settle(
        _ job: Job, rules: CategoryRules, messages: [PushMessage], outcomes: [DeliveryOutcome], now: Double,
        random: inout some RandomNumberGenerator
    ) -> Settlement {
        var accepted: [Int64] = []
        var disable: [DisabledDevice] = []
        var rejected: String?
        var retryReason: String?
        var retryAfter: Double?
        var attemptLogs: [(Int, DeliveryOutcome)] = []
        for (i, outcome) in outcomes.enumerated() where i < messages.count {
            attemptLogs.append((i, outcome))
            let device = messages[i].device
            switch outcome.disposition {
            case .accepted:
                accepted.append(device.id)
            case .tokenInvalid:
                disable.append(DisabledDevice(deviceID: device.id, reason: outcome.reason))
            case .payloadRejected:
                rejected = rejected ?? outcome.reason
            case .retry, .credentialsBroken:
                retryReason = retryReason ?? outcome.reason
                if let after = outcome.retryAfter?.seconds { retryAfter = max(retryAfter ?? 0, after) }
            }
        }
        // A message the provider never answered for (a short outcome list) is retried.
        if outcomes.count < messages.count { retryReason = retryReason ?? "no_outcome" }

        var state: JobState
        var runAt: Double?
        var error: String?
        var refund = false
        if let rejected {
            state = .dead
            error = "payload_rejected: \(rejected)"
        } else if let retryReason {
            let snooze = retryAfter != nil
            if !snooze && job.attempt >= rules.retry.maxAttempts {
                state = .dead
                error = "attempts_exhausted: \(retryReason)"
            } else {
                let delay = rules.retry.delay(attempt: job.attempt, retryAfter: retryAfter, using: &random)
                if now + delay >= job.expiresAt {
                    state = .dead
                    error = "expired_while_retrying: \(retryReason)"
                } else {
                    state = .pending
                    runAt = now + delay
                    error = retryReason
                    refund = snooze
                }
            }
        } else if accepted.isEmpty && job.acceptedDevices.isEmpty {
            state = .suppressed
            error = "no_active_device"
        } else {
            state = .done
        }
        let logs = attemptLogs.map { i, outcome in
            LogEntry(
                jobID: job.id, deviceID: messages[i].device.id, provider: messages[i].device.provider.rawValue,
                event: "attempt", outcome: outcome.disposition.rawValue, status: state, reason: outcome.reason,
                attempt: job.attempt, latencyMs: outcome.latency.map { $0 * 1000 })
        }
        let alert = job.priority == .critical && (state == .dead || state == .suppressed)
        var settlement = Settlement(
            jobID: job.id, state: state, runAt: runAt, error: error, refundAttempt: refund, alert: alert,
            accepted: accepted, disable: disable, logs: logs)
        if state == .dead || state == .suppressed {
            settlement.logs.append(LogEntry(jobID: job.id, event: state == .dead ? "dead" : "suppressed",
                                            status: state, reason: error, attempt: job.attempt))
        }
        return settlement
    }

    private func finish(_ job: Job, _ state: JobState, reason: String, event: String, alert: Bool) -> Settlement {
        Settlement(
            jobID: job.id, state: state, error: reason, alert: alert,
            logs: [LogEntry(jobID: job.id, event: event, status: state, reason: reason, attempt: job.attempt)])
    }

    /// `2026-02-15T13:45:00.000Z` for seconds since 1970 (UTC, millisecond precision).
    package static func iso8601(_ seconds: Double) -> String {
        let millis = Int64((seconds * 1000).rounded(.down))
        var days = millis / 86_400_000
        var rem = millis % 86_400_000
        if rem < 0 {
            rem += 86_400_000
            days -= 1
        }
        // Civil-from-days (Howard Hinnant), proleptic Gregorian.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ v: Int64, _ w: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        let h = rem / 3_600_000, mi = rem / 60_000 % 60, s = rem / 1000 % 60, ms = rem % 1000
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(h, 2)):\(pad(mi, 2)):\(pad(s, 2)).\(pad(ms, 3))Z"
    }
}
