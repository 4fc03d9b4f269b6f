import FoundationEssentials
import HeraldCore

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
        /// Finish (or hold, or fold) without sending.
        case finish(Settlement)
    }

    package struct Plan: Sendable {
        package var job: Job
        package var action: Action
        /// The inbox row a delivery leaves once it is done (nil for silent messages).
        package var inbox: InboxEntry?

        package init(job: Job, action: Action, inbox: InboxEntry? = nil) {
            self.job = job
            self.action = action
            self.inbox = inbox
        }
    }

    /// Plans a batch from devices alone (no preferences or history): tests and tools.
    package func plan(
        _ jobs: [Job],
        devices: [String: [Device]],
        categories: [String: CategoryRules],
        now: Date
    ) -> [Plan] {
        var recipients: [String: RecipientContext] = [:]
        for job in jobs where recipients[job.userID] == nil {
            recipients[job.userID] = RecipientContext(userID: job.userID, devices: devices[job.userID] ?? [])
        }
        return plan(jobs, recipients: recipients, categories: categories, unread: [:], now: now)
    }

    /// Plans every job of a batch: the policy engine decides per job and recipient, in batch
    /// order, each decision updating the recipient's context so later jobs of the same batch
    /// see it (a burst in one batch coalesces like a burst across batches).
    ///
    /// - Parameters:
    ///   - recipients: each recipient's preferences, presence, devices, history and backlog.
    ///   - unread: unread inbox rows per user, for the badge.
    package func plan(
        _ jobs: [Job],
        recipients: [String: RecipientContext],
        categories: [String: CategoryRules],
        unread: [String: Int],
        now: Date
    ) -> [Plan] {
        var recipients = recipients
        var badges = unread
        let engine = PolicyEngine()
        let sentAt = Self.iso8601(now)
        // The rules in an array, found by index: a lookup in `categories` copies the rules out
        // (every field retained and released again), once per job.
        let ruleList = Array(categories.values)
        let ruleIndex = Dictionary(uniqueKeysWithValues: zip(categories.keys, ruleList.indices))
        return jobs.map { job in
            guard let r = ruleIndex[job.category] else {
                return Plan(
                    job: job,
                    action: .finish(finish(job, .dead, reason: .unknownCategory, event: .dead, alert: false))
                )
            }
            let rules = ruleList[r]
            let decision: PolicyDecision
            do {
                // This job's view of the recipient, gone before `record` below: while it shares
                // the entry's arrays, appending to the entry's sends would copy them all (up to
                // the 100 a recipient row keeps, for every job of a user's run).
                var context = recipients[job.userID] ?? RecipientContext(userID: job.userID)
                // A device registered for another app never receives this app's notifications,
                // nor the device the job excludes. (Only removed when there is one: a removal
                // copies the shared array first.)
                let excluded = job.options.excludeDevice
                let unfit = { (device: Device) in !Self.app(rules.appID, serves: device) || device.id == excluded }
                if context.devices.contains(where: unfit) { context.devices.removeAll(where: unfit) }
                // A retry was already decided on its first attempt: only expiry, presence, geo and
                // device capability apply again (its own earlier sends must not throttle it).
                let retry = job.attempt > 1
                var inputs = job.inputs
                if retry { inputs.isSummary = true }
                var policy = retry ? CategoryPolicy(name: job.category, mandatory: true) : rules.policy
                // A silent (background) message disturbs no one: quiet hours do not hold it.
                if job.options.silent ?? rules.silent { policy.quietHours = .bypass }
                decision = engine.decide(job, inputs: inputs, category: policy, recipient: context, now: now)
            }
            recipients[job.userID]?.record(decision, category: job.category, inputs: job.inputs, now: now)
            let critical = job.priority == .critical
            switch decision {
            case .expire:
                return Plan(
                    job: job,
                    action: .finish(
                        finish(job, .expired, reason: .expiredBeforeDelivery, event: .expired, alert: critical)
                    )
                )
            case .deferred(let until, let reason):
                var held = finish(job, .pending, reason: .deferred(reason), event: .deferred, alert: false)
                held.runAt = until
                held.refundAttempt = true
                return Plan(job: job, action: .finish(held))
            case .fold(let fold):
                var folded = finish(job, .summarized, reason: .folded(fold.reason), event: .summarized, alert: false)
                folded.fold = fold
                return Plan(job: job, action: .finish(folded))
            case .suppress(let reason):
                return Plan(
                    job: job,
                    action: .finish(
                        finish(
                            job,
                            .suppressed,
                            reason: .suppressed(reason),
                            event: .suppressed,
                            alert: critical && reason == .noActiveDevice
                        )
                    )
                )
            case .deliver(let delivery):
                let remaining = delivery.devices.filter { !job.acceptedDevices.contains($0.id) }
                if remaining.isEmpty {
                    return Plan(
                        job: job,
                        action: .finish(finish(job, .done, reason: .alreadyAccepted, event: .settled, alert: false))
                    )
                }
                let silent = job.options.silent ?? rules.silent
                if !silent { badges[job.userID, default: 0] += 1 }
                let badge = badges[job.userID] ?? 0
                let preview = rules.previewChars ?? CategoryRules.defaultPreviewChars
                let summarized = job.summaryCount > 0 ? job.summarized.map(\.id) : []
                // Once per job, not per device: the metadata, and the text per locale.
                let metadata = Self.metadata(job)
                var contents: [String: Content] = [:]
                func shown(_ locale: String?) -> Content {
                    if let known = contents[locale ?? ""] { return known }
                    let made = content(job, rules: rules, distanceKm: delivery.distanceKm, locale: locale)
                    contents[locale ?? ""] = made
                    return made
                }
                let messages = remaining.map { device in
                    var message = render(job, rules: rules, device: device, sentAt: sentAt, metadata: metadata)
                    let content = shown(device.locale)
                    message.title = content.title
                    message.body = previewBody(content.body, limit: preview)
                    message.subtitle = content.subtitle
                    message.route = content.route
                    if let route = content.route { message.data["route"] = route }
                    for (key, value) in delivery.extras { message.data[key] = value }
                    if job.summaryCount > 1 { message.data["summaryCount"] = String(job.summaryCount) }
                    message.summarizedIDs = summarized
                    message.badge = badge
                    return message
                }
                // The inbox speaks the language of the device the user registered last.
                let inboxLocale = delivery.devices.max { $0.registeredAt < $1.registeredAt }?.locale
                let inbox = silent ? nil : Self.inboxEntry(job, content: shown(inboxLocale))
                return Plan(job: job, action: .deliver(messages), inbox: inbox)
            }
        }
    }

    /// Whether a category of app `appID` may use `device`: the same app, or either side is
    /// app-neutral (`default`; the built-in `herald` sync category reaches every device).
    static func app(_ appID: String, serves device: Device) -> Bool {
        appID == device.appID || appID == "default" || appID == "herald" || device.appID == "default"
    }

    /// The in-app notification center's row for `job` as shown.
    private static func inboxEntry(_ job: Job, content: Content) -> InboxEntry {
        InboxEntry(
            title: content.title,
            body: content.body,
            route: content.route,
            metadataJSON: job.payload.metadataJSON ?? "{}",
            coalesceKey: job.inputs.coalesceKey,
            scope: job.inputs.scope,
            summaryCount: job.summaryCount
        )
    }

    /// The inbox row of a job no push device took (local fallback): the notification shows in
    /// the app's notification center instead, in the payload's own language.
    package func fallbackInboxEntry(for job: Job, rules: CategoryRules) -> InboxEntry {
        Self.inboxEntry(job, content: content(job, rules: rules, distanceKm: nil, locale: nil))
    }

    /// What a notification shows on one device.
    struct Content {
        var title: String
        var body: String
        var subtitle: String?
        var route: String?
    }

    /// Title, body, subtitle and route as shown on a device with `locale`: the payload's
    /// `localized` variant for it (else the payload's own text); a summary's come from the
    /// category's template in that language. `{distanceKm}` reads as the locale writes it.
    func content(_ job: Job, rules: CategoryRules, distanceKm: Double?, locale: String?) -> Content {
        let variants = LocaleText.candidates(for: locale, in: job.payload.localized)
        let title = variants.lazy.compactMap(\.title).first ?? job.payload.title
        let body = variants.lazy.compactMap(\.body).first ?? job.payload.body
        let subtitle = variants.lazy.compactMap(\.subtitle).first ?? job.payload.subtitle
        let route = job.payload.route ?? rules.defaultRoute
        var values: [String: String] = [:]
        if let distanceKm { values["distanceKm"] = LocaleText.kilometres(distanceKm, locale: locale) }
        guard job.summaryCount > 1 else {
            return values.isEmpty
                ? Content(title: title, body: body, subtitle: subtitle, route: route)
                : Content(
                    title: fillTemplate(title, values),
                    body: fillTemplate(body, values),
                    subtitle: subtitle,
                    route: route
                )
        }
        values["title"] = title
        values["body"] = body
        values["count"] = String(job.summaryCount)
        values["titles"] = Self.titles(
            job.summarized.map(\.title),
            limit: rules.previewChars ?? CategoryRules.defaultPreviewChars
        )
        let template = rules.policy.summary.text(for: locale)
        return Content(
            title: fillTemplate(template.title, values),
            body: fillTemplate(template.body, values),
            subtitle: subtitle,
            route: rules.policy.summary.route ?? route
        )
    }

    /// `{titles}`: the folded jobs' titles joined with ", ", newest first, as many whole titles as
    /// fit `limit` characters (at least the newest, shortened when it alone is too long).
    package static func titles(_ titles: [String], limit: Int) -> String {
        var joined = ""
        var length = 0
        for title in titles {
            let added = title.count + (joined.isEmpty ? 0 : 2)
            if length + added > limit { break }
            joined += joined.isEmpty ? title : ", " + title
            length += added
        }
        if joined.isEmpty, let newest = titles.first { return previewBody(newest, limit: limit) }
        return joined
    }

    /// Renders the job for one device: the seed 001 data payload and the provider hints.
    package func render(_ job: Job, rules: CategoryRules, device: Device, now: Date) -> PushMessage {
        render(job, rules: rules, device: device, sentAt: Self.iso8601(now), metadata: Self.metadata(job))
    }

    /// The job's `metadata` string map.
    private static func metadata(_ job: Job) -> [String: String] {
        job.payload.metadataJSON.map { [String: JSONValue].parsing($0).compactMapValues(\.string) } ?? [:]
    }

    private func render(
        _ job: Job,
        rules: CategoryRules,
        device: Device,
        sentAt: String,
        metadata: [String: String]
    ) -> PushMessage {
        let route = job.payload.route ?? rules.defaultRoute
        var data: [String: String] = [
            "eventType": job.payload.eventType ?? job.category,
            "sentAtIso": job.payload.sentAtIso ?? sentAt,
        ]
        if let actions = job.payload.actionsJSON { data["actions"] = actions }
        if let route { data["route"] = route }
        let silent = job.options.silent ?? rules.silent
        return PushMessage(
            jobID: job.id,
            device: device,
            title: job.payload.title,
            body: job.payload.body,
            subtitle: job.payload.subtitle,
            route: route,
            data: data,
            metadata: metadata,
            priority: job.priority,
            collapseID: job.options.collapseID ?? "herald-\(job.id)",
            collapsible: job.options.collapseID != nil || job.inputs.coalesceKey != nil || job.summaryCount > 0,
            silent: silent,
            sound: job.payload.sound ?? rules.sound,
            threadID: job.payload.threadID,
            imageURL: job.payload.imageURL,
            actionCategory: rules.apnsCategory,
            interruptionLevel: rules.interruptionLevel
                ?? InterruptionLevel.default(for: job.priority, silent: silent),
            androidChannel: rules.androidChannel,
            badge: nil,
            expiresAt: job.expiresAt
        )
    }

    /// The log event of a message the consumer did not send (held behind a retry: `deferred`;
    /// its token refused earlier in the batch: `suppressed`), nil for one it sent. Such a record
    /// carries no provider outcome: an `attempt` would count as a failed send in the console and
    /// `explain`.
    private static func unsentEvent(_ outcome: DeliveryOutcome) -> LogEvent? {
        switch outcome.disposition {
        case .retry where outcome.reason == .behindRetry: .deferred
        case .tokenInvalid where outcome.reason == .tokenRefusedInBatch: .suppressed
        default: nil
        }
    }

    /// Keeps each recipient's retries in batch order: a job retried after an earlier job of the
    /// same user (both sent in this batch) never falls due before it, so the next claim sends
    /// them in the order they were enqueued.
    ///
    /// A user's pushes go out one wave after another, and each wave's hand-back carries a little
    /// less of an open circuit's remaining time than the one before; without this, a burst handed
    /// back by an open circuit came back due in reverse and was delivered 8, 7, … 1. Only retries
    /// of sent jobs are aligned: a hold (quiet hours, a schedule) keeps its own time.
    /// - Parameters:
    ///   - settlements: one per plan, in plan (claim) order.
    ///   - floors: per plan index, the due time of an older job (not in this batch) that a message
    ///     of it was held behind: it comes due no sooner, so the next claim takes both in order.
    package func orderRetries(_ settlements: inout [Settlement], of plans: [Plan], floors: [Int: Date] = [:]) {
        var latest: [String: Date] = [:]
        // By index: most plans are passed over, and a plan is not copied to be looked at.
        for p in plans.indices where p < settlements.count && settlements[p].state == .pending {
            guard case .deliver = plans[p].action, let runAt = settlements[p].runAt else { continue }
            let user = plans[p].job.userID
            let due = max(runAt, latest[user] ?? runAt, floors[p] ?? runAt)
            settlements[p].runAt = due
            latest[user] = due
        }
    }

    /// Folds the outcomes of one attempt into the job's settlement.
    ///
    /// Accepted devices are remembered so a retry never re-sends to them; dead tokens disable
    /// their device; a payload rejection dead-letters at once; anything retryable schedules
    /// the next attempt with jittered exponential backoff (or the provider's `Retry-After`, which does
    /// not use up an attempt), until attempts or the job's TTL run out.
    package func settle(
        _ job: Job,
        rules: CategoryRules,
        messages: [PushMessage],
        outcomes: [DeliveryOutcome],
        now: Date,
        random: inout some RandomNumberGenerator
    ) -> Settlement {
        var accepted: [Int64] = []
        var disable: [DisabledDevice] = []
        var rejected: DeliveryOutcome.Reason?
        var retryReason: DeliveryOutcome.Reason?
        var retryAfter: Duration?
        // A message not sent because an earlier job of this batch is retried on its device.
        var behind = false
        var attemptLogs: [(Int, DeliveryOutcome)] = []
        for (i, outcome) in outcomes.enumerated() where i < messages.count {
            attemptLogs.append((i, outcome))
            let device = messages[i].device
            switch outcome.disposition {
            case .accepted:
                accepted.append(device.id)
            case .tokenInvalid where outcome.reason == .tokenRefusedInBatch:
                break  // an earlier job's settlement disables the device
            case .tokenInvalid:
                disable.append(DisabledDevice(deviceID: device.id, reason: outcome.reason))
            case .payloadRejected:
                rejected = rejected ?? outcome.reason
            case .retry where outcome.reason == .behindRetry:
                behind = true
            case .retry, .credentialsBroken:
                retryReason = retryReason ?? outcome.reason
                if let after = outcome.retryAfter { retryAfter = max(retryAfter ?? .zero, after) }
            }
        }
        // A message the provider never answered for (a short outcome list) is retried.
        if outcomes.count < messages.count { retryReason = retryReason ?? .noOutcome }

        var state: JobState
        var runAt: Date?
        var error: LogReason?
        var refund = false
        if let rejected {
            state = .dead
            error = .payloadRejected(rejected)
        } else if let retryReason {
            let snooze = retryAfter != nil
            if !snooze && job.attempt >= rules.retry.maxAttempts {
                state = .dead
                error = .attemptsExhausted(retryReason)
            } else {
                let delay = rules.retry.delay(attempt: job.attempt, retryAfter: retryAfter, using: &random)
                if now + delay >= job.expiresAt {
                    state = .dead
                    error = .expiredWhileRetrying(retryReason)
                } else {
                    state = .pending
                    runAt = now + delay
                    error = .outcome(retryReason)
                    refund = snooze
                }
            }
        } else if behind {
            // Only held back behind another job's retry: due again at once with no attempt spent;
            // `orderRetries` then moves it behind that retry.
            state = .pending
            runAt = now
            error = .outcome(.behindRetry)
            refund = true
        } else if accepted.isEmpty && job.acceptedDevices.isEmpty {
            state = .suppressed
            error = .suppressed(.noActiveDevice)
        } else {
            state = .done
        }
        let logs = attemptLogs.map { i, outcome in
            let unsent = Self.unsentEvent(outcome)
            return LogEntry(
                jobID: job.id,
                deviceID: messages[i].device.id,
                provider: messages[i].device.provider.rawValue,
                event: unsent ?? .attempt,
                outcome: unsent == nil ? outcome.disposition : nil,
                status: state,
                reason: .outcome(outcome.reason),
                attempt: job.attempt,
                latency: unsent == nil ? outcome.latency : nil
            )
        }
        var alert = job.priority == .critical && (state == .dead || state == .suppressed)
        var deadlineLog: LogEntry?
        if state == .pending, job.priority == .critical, job.alertedAt == nil, let deadline = rules.deadline {
            // Past its category's deadline with no device having taken it: the in-app alert now,
            // push keeps retrying. Before it: come back no later than the deadline to check.
            let due = job.createdAt + deadline
            if now >= due {
                alert = true
                deadlineLog = LogEntry(
                    jobID: job.id,
                    event: .alert,
                    status: state,
                    reason: .deadlineMissed,
                    attempt: job.attempt
                )
            } else if let at = runAt, at > due {
                runAt = due
            }
        }
        var settlement = Settlement(
            jobID: job.id,
            state: state,
            runAt: runAt,
            error: error,
            refundAttempt: refund,
            alert: alert,
            accepted: accepted,
            disable: disable,
            logs: logs
        )
        if let deadlineLog { settlement.logs.append(deadlineLog) }
        if state == .dead || state == .suppressed {
            settlement.logs.append(
                LogEntry(
                    jobID: job.id,
                    event: state == .dead ? .dead : .suppressed,
                    status: state,
                    reason: error,
                    attempt: job.attempt
                )
            )
        }
        if state == .done, job.alertedAt != nil {
            settlement.logs.append(
                LogEntry(
                    jobID: job.id,
                    event: .alertResolved,
                    status: state,
                    reason: .deliveredAfterDeadline,
                    attempt: job.attempt
                )
            )
        }
        return settlement
    }

    private func finish(_ job: Job, _ state: JobState, reason: LogReason, event: LogEvent, alert: Bool) -> Settlement {
        Settlement(
            jobID: job.id,
            state: state,
            error: reason,
            alert: alert,
            logs: [LogEntry(jobID: job.id, event: event, status: state, reason: reason, attempt: job.attempt)]
        )
    }

    /// `2026-02-15T13:45:00.000Z` (UTC, millisecond precision).
    package static func iso8601(_ date: Date) -> String {
        date.formatted(Self.iso8601Style)
    }

    private static let iso8601Style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}
