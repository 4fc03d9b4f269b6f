import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("Retry strategy: exponential backoff, jittered over the upper half of each ceiling")
struct RetryStrategyTests {
    @Test(
        "ceiling is min(cap, base·2^(n−1))",
        arguments: [
            (1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (9, 512.0), (10, 600.0), (60, 600.0), (1000, 600.0),
        ]
    )
    func ceiling(attempt: Int, expected: Double) {
        #expect(
            RetryStrategy(base: .seconds(2), cap: .seconds(600), maxAttempts: 5).ceiling(attempt: attempt)
                == .seconds(expected)
        )
    }

    @Test("jittered delays stay within [ceiling/2, ceiling] and spread over it")
    func jitterRange() {
        var random = SplitMix64(seed: 42)
        let strategy = RetryStrategy(base: .seconds(1), cap: .seconds(30), maxAttempts: 5)
        for attempt in 1...8 {
            let delays = (0..<500).map { _ in strategy.delay(attempt: attempt, retryAfter: nil, using: &random) }
            let ceiling = strategy.ceiling(attempt: attempt)
            #expect(delays.allSatisfy { $0 >= ceiling / 2 && $0 <= ceiling })
            #expect(delays.min()! < ceiling * 0.55 && delays.max()! > ceiling * 0.95)  // spread over the half
        }
    }

    @Test("at the defaults a job's five attempts span at least 15 s: a shorter provider blip cannot use them all up")
    func attemptsSpread() {
        var random = SplitMix64(seed: 11)
        let strategy = RetryStrategy()
        let spans = (0..<2_000).map { _ in
            (1...4).reduce(Duration.zero) { total, attempt in
                total + strategy.delay(attempt: attempt, retryAfter: nil, using: &random)
            }
        }
        #expect(spans.allSatisfy { $0 >= .seconds(15) && $0 <= .seconds(30) })
        #expect(spans.min()! < .seconds(19), "the window is still spread: \(spans.min()!)")
    }

    @Test("a provider's Retry-After wins when it is longer than the jittered delay")
    func retryAfter() {
        var random = SplitMix64(seed: 7)
        let strategy = RetryStrategy(base: .seconds(1), cap: .seconds(4), maxAttempts: 5)
        #expect(strategy.delay(attempt: 1, retryAfter: .seconds(60), using: &random) == .seconds(60))
        #expect(strategy.delay(attempt: 3, retryAfter: .zero, using: &random) <= .seconds(4))
    }
}

@Suite("Settling provider outcomes")
struct SettleTests {
    let dispatcher = Dispatcher()
    let rules = CategoryRules(
        name: "chat",
        priority: .high,
        retry: RetryStrategy(base: .seconds(10), cap: .seconds(100), maxAttempts: 3)
    )
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func job(attempt: Int = 1, priority: Priority = .high, accepted: Set<Int64> = [], expiresIn: Double = 86_400) -> Job
    {
        Job(
            id: 7,
            userID: "u",
            category: "chat",
            priority: priority,
            payload: .init(title: "t", body: "b"),
            attempt: attempt,
            maxAttempts: 3,
            acceptedDevices: accepted,
            createdAt: now - 1,
            expiresAt: now + expiresIn
        )
    }

    func messages(_ devices: [(Int64, ProviderKind)]) -> [PushMessage] {
        devices.map { id, kind in
            dispatcher.render(
                job(),
                rules: rules,
                device: Device(id: id, userID: "u", provider: kind, token: "t\(id)"),
                now: now
            )
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let label: String
        let attempt: Int
        let priority: Priority
        let outcomes: [DeliveryOutcome]
        let state: JobState
        let error: String?
        let alert: Bool
        let refund: Bool
        var testDescription: String { label }
    }

    static let cases: [Case] = [
        .init(
            label: "all accepted → done",
            attempt: 1,
            priority: .high,
            outcomes: [.accepted, .accepted],
            state: .done,
            error: nil,
            alert: false,
            refund: false
        ),
        .init(
            label: "one retry, attempts left → pending",
            attempt: 1,
            priority: .high,
            outcomes: [.accepted, DeliveryOutcome(.retry, reason: .timeout)],
            state: .pending,
            error: "timeout",
            alert: false,
            refund: false
        ),
        .init(
            label: "retry on the last attempt → dead",
            attempt: 3,
            priority: .high,
            outcomes: [DeliveryOutcome(.retry, reason: .unavailable), .accepted],
            state: .dead,
            error: "attempts_exhausted: unavailable",
            alert: false,
            refund: false
        ),
        .init(
            label: "critical dies → alert",
            attempt: 3,
            priority: .critical,
            outcomes: [DeliveryOutcome(.retry, reason: .unavailable), DeliveryOutcome(.retry, reason: .unavailable)],
            state: .dead,
            error: "attempts_exhausted: unavailable",
            alert: true,
            refund: false
        ),
        .init(
            label: "Retry-After on the last attempt snoozes (refund), not dead",
            attempt: 3,
            priority: .high,
            outcomes: [DeliveryOutcome(.retry, reason: .rateLimited, retryAfter: .seconds(30)), .accepted],
            state: .pending,
            error: "rate_limited",
            alert: false,
            refund: true
        ),
        .init(
            label: "payload rejected → dead at once",
            attempt: 1,
            priority: .high,
            outcomes: [DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge), .accepted],
            state: .dead,
            error: "payload_rejected: payload_too_large",
            alert: false,
            refund: false
        ),
        .init(
            label: "every token dead → suppressed no_active_device",
            attempt: 1,
            priority: .high,
            outcomes: [
                DeliveryOutcome(.tokenInvalid, reason: .unregistered),
                DeliveryOutcome(.tokenInvalid, reason: .unregistered),
            ],
            state: .suppressed,
            error: "no_active_device",
            alert: false,
            refund: false
        ),
        .init(
            label: "broken credentials retry",
            attempt: 1,
            priority: .normal,
            outcomes: [DeliveryOutcome(.credentialsBroken, reason: .invalidProviderToken), .accepted],
            state: .pending,
            error: "invalid_provider_token",
            alert: false,
            refund: false
        ),
    ]

    @Test("outcomes fold into one settlement", arguments: cases)
    func fold(_ c: Case) {
        var random = SplitMix64(seed: 1)
        let s = dispatcher.settle(
            job(attempt: c.attempt, priority: c.priority),
            rules: rules,
            messages: messages([(1, .apns), (2, .fcm)]),
            outcomes: c.outcomes,
            now: now,
            random: &random
        )
        #expect(s.state == c.state)
        #expect(s.error?.text == c.error)
        #expect(s.alert == c.alert)
        #expect(s.refundAttempt == c.refund)
        #expect(s.logs.filter { $0.event == .attempt }.count == 2)
        #expect(s.logs.allSatisfy { $0.status == c.state })
        if c.state == .pending { #expect(s.runAt! > now && s.runAt! <= now + 100) }
    }

    @Test("accepted and dead devices are reported for the ack")
    func devices() {
        var random = SplitMix64(seed: 1)
        let s = dispatcher.settle(
            job(),
            rules: rules,
            messages: messages([(1, .apns), (2, .expo)]),
            outcomes: [.accepted, DeliveryOutcome(.tokenInvalid, reason: .deviceNotRegistered)],
            now: now,
            random: &random
        )
        #expect(s.state == .done)
        #expect(s.accepted == [1])
        #expect(s.disable == [DisabledDevice(deviceID: 2, reason: .deviceNotRegistered)])
    }

    @Test("a retry that would land after the job's expiry dead-letters instead")
    func retryPastExpiry() {
        var random = SplitMix64(seed: 3)
        let s = dispatcher.settle(
            job(expiresIn: 0.001),
            rules: rules,
            messages: messages([(1, .apns)]),
            outcomes: [DeliveryOutcome(.retry, reason: .timeout, retryAfter: .seconds(5))],
            now: now,
            random: &random
        )
        #expect(s.state == .dead)
        #expect(s.error?.text == "expired_while_retrying: timeout")
    }

    @Test("planning: no devices, already-accepted devices, expiry, and rendering")
    func plan() {
        let devices: [String: [Device]] = [
            "u": [
                Device(id: 1, userID: "u", provider: .apns, token: "a"),
                Device(id: 2, userID: "u", provider: .fcm, token: "b"),
            ]
        ]
        var retried = job(accepted: [1])
        retried.payload = .init(title: "Sam", body: "Hi", route: nil, metadataJSON: #"{"conversationId":"42"}"#)
        let plans = dispatcher.plan(
            [
                retried,
                Job(
                    id: 8,
                    userID: "ghost",
                    category: "chat",
                    priority: .critical,
                    payload: .init(title: "t", body: "b"),
                    createdAt: now,
                    expiresAt: now + 1
                ),
                Job(
                    id: 9,
                    userID: "u",
                    category: "chat",
                    priority: .normal,
                    payload: .init(title: "t", body: "b"),
                    createdAt: now - 10,
                    expiresAt: now - 1
                ),
            ],
            devices: devices,
            categories: ["chat": CategoryRules(name: "chat", defaultRoute: "/chat")],
            now: now
        )
        guard case .deliver(let messages) = plans[0].action else {
            Issue.record("expected a delivery")
            return
        }
        #expect(messages.map(\.device.id) == [2])
        #expect(messages[0].route == "/chat")
        #expect(messages[0].collapseID == "herald-7")
        #expect(messages[0].data == ["eventType": "chat", "route": "/chat", "sentAtIso": "2027-01-15T08:00:00.000Z"])
        #expect(messages[0].metadata == ["conversationId": "42"])
        guard case .finish(let ghost) = plans[1].action, case .finish(let stale) = plans[2].action else {
            Issue.record("expected finished plans")
            return
        }
        #expect(ghost.state == .suppressed && ghost.alert && ghost.error == .suppressed(.noActiveDevice))
        #expect(stale.state == .expired && !stale.alert)
    }

    @Test(
        "sentAtIso is ISO-8601 UTC with milliseconds",
        arguments: [
            (0.0, "1970-01-01T00:00:00.000Z"), (1_771_163_100.0, "2026-02-15T13:45:00.000Z"),
            (951_782_400.5, "2000-02-29T00:00:00.500Z"), (4_102_444_799.5, "2099-12-31T23:59:59.500Z"),
        ]
    )
    func iso8601(seconds: Double, expected: String) {
        #expect(Dispatcher.iso8601(Date(timeIntervalSince1970: seconds)) == expected)
    }
}

@Suite("Delivery deadlines of critical categories")
struct DeadlineTests {
    let dispatcher = Dispatcher()
    let rules = CategoryRules(
        name: "sep_failure",
        priority: .critical,
        retry: RetryStrategy(base: .seconds(1), cap: .seconds(2), maxAttempts: 3),
        deadline: .seconds(5)
    )
    let created = Date(timeIntervalSince1970: 1_800_000_000)

    func job(alertedAt: Date? = nil) -> Job {
        Job(
            id: 9,
            userID: "admin",
            category: "sep_failure",
            priority: .critical,
            payload: .init(title: "t", body: "b"),
            attempt: 1,
            maxAttempts: 3,
            createdAt: created,
            expiresAt: created + 86_400,
            alertedAt: alertedAt
        )
    }

    func settle(_ job: Job, _ outcome: DeliveryOutcome, at now: Date) -> Settlement {
        let device = Device(id: 1, userID: "admin", provider: .apns, token: "t")
        let message = dispatcher.render(job, rules: rules, device: device, now: now)
        var random = SplitMix64(seed: 1)
        return dispatcher.settle(job, rules: rules, messages: [message], outcomes: [outcome], now: now, random: &random)
    }

    @Test("before the deadline: no alert, and the retry comes back no later than the deadline")
    func beforeDeadline() {
        let s = settle(job(), DeliveryOutcome(.retry, reason: .circuitOpen, retryAfter: .seconds(60)), at: created + 1)
        #expect(s.state == .pending && !s.alert && s.refundAttempt)
        #expect(s.runAt == created + 5)
    }

    @Test("past the deadline with no device accepted: the alert now, push keeps retrying, logged with its reason")
    func pastDeadline() {
        let s = settle(
            job(),
            DeliveryOutcome(.retry, reason: .circuitOpen, retryAfter: .seconds(60)),
            at: created + 5.2
        )
        #expect(s.state == .pending && s.alert)
        #expect(s.logs.contains { $0.event == .alert && $0.reason == .deadlineMissed })
        #expect(dispatcher.fallback(for: s, job: job(), rules: rules, now: created + 5.2) != nil)
    }

    @Test("an alerted job gets no second alert or fallback; its later delivery resolves the alert")
    func alreadyAlerted() {
        let alerted = job(alertedAt: created + 5)
        let retry = settle(
            alerted,
            DeliveryOutcome(.retry, reason: .circuitOpen, retryAfter: .seconds(10)),
            at: created + 9
        )
        #expect(!retry.alert)
        #expect(dispatcher.fallback(for: retry, job: alerted, rules: rules, now: created + 9) == nil)
        let done = settle(alerted, .accepted, at: created + 30)
        #expect(done.state == .done)
        #expect(done.logs.contains { $0.event == .alertResolved })
    }

    @Test("a non-critical job or a category without a deadline never alerts before it dies")
    func onlyCriticalWithDeadline() {
        var normal = job()
        normal.priority = .high
        let s = settle(
            normal,
            DeliveryOutcome(.retry, reason: .circuitOpen, retryAfter: .seconds(60)),
            at: created + 10
        )
        #expect(!s.alert)
    }
}

@Suite("A recipient's retries keep their order")
struct RetryOrderTests {
    let dispatcher = Dispatcher()
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func plan(_ id: Int64, user: String, deliver: Bool = true) -> Dispatcher.Plan {
        let job = Job(
            id: id,
            userID: user,
            category: "chat",
            priority: .normal,
            payload: .init(title: "t", body: "b"),
            createdAt: now,
            expiresAt: now + 3_600
        )
        let settlement = Settlement(jobID: id, state: .pending, runAt: now + 3_000, error: .deferred(.quietHours))
        return Dispatcher.Plan(job: job, action: deliver ? .deliver([]) : .finish(settlement))
    }

    @Test("a burst handed back by an open circuit, each wave a little sooner, comes back due in claim order")
    func handedBackBurst() {
        let plans = [
            plan(1, user: "a"), plan(2, user: "b"), plan(3, user: "a"), plan(4, user: "a"), plan(5, user: "b"),
        ]
        // Waves 1, 2, 3 of user a answered 10.0, 9.5 and 9.0 s of open circuit left; b's 10.0 and 9.5.
        var settlements = [
            Settlement(jobID: 1, state: .pending, runAt: now + 10, error: .outcome(.circuitOpen), refundAttempt: true),
            Settlement(jobID: 2, state: .pending, runAt: now + 10, error: .outcome(.circuitOpen), refundAttempt: true),
            Settlement(jobID: 3, state: .pending, runAt: now + 9.5, error: .outcome(.circuitOpen), refundAttempt: true),
            Settlement(jobID: 4, state: .pending, runAt: now + 9, error: .outcome(.circuitOpen), refundAttempt: true),
            Settlement(jobID: 5, state: .pending, runAt: now + 9.5, error: .outcome(.circuitOpen), refundAttempt: true),
        ]
        dispatcher.orderRetries(&settlements, of: plans)
        #expect(settlements.map { $0.runAt!.timeIntervalSince(now) } == [10, 10, 10, 10, 10])
    }

    @Test("later retries keep their own later time; holds, finished jobs and other users are untouched")
    func onlyEarlierRetriesBind() {
        let plans = [
            plan(1, user: "a"), plan(2, user: "a", deliver: false), plan(3, user: "a"), plan(4, user: "a"),
            plan(5, user: "c"),
        ]
        var settlements = [
            Settlement(jobID: 1, state: .pending, runAt: now + 5, error: .outcome(.timeout)),
            Settlement(jobID: 2, state: .pending, runAt: now + 3_000, error: .deferred(.quietHours)),
            Settlement(jobID: 3, state: .done),
            Settlement(jobID: 4, state: .pending, runAt: now + 20, error: .outcome(.timeout)),
            Settlement(jobID: 5, state: .pending, runAt: now + 1, error: .outcome(.timeout)),
        ]
        dispatcher.orderRetries(&settlements, of: plans)
        #expect(settlements.map { $0.runAt.map { $0.timeIntervalSince(now) } } == [5, 3_000, nil, 20, 1])
    }

    @Test(
        "a job only held behind another job's retry goes back to pending at once, spending no attempt, and is marked as waiting to be sent again"
    )
    func heldBehindRetry() {
        let rules = CategoryRules(
            name: "chat",
            retry: RetryStrategy(base: .seconds(10), cap: .seconds(100), maxAttempts: 3)
        )
        let job = Job(
            id: 9,
            userID: "a",
            category: "chat",
            priority: .normal,
            payload: .init(title: "t", body: "b"),
            attempt: 3,
            maxAttempts: 3,
            createdAt: now,
            expiresAt: now + 3_600
        )
        let devices = [
            Device(id: 1, userID: "a", provider: .apns, token: "t1"),
            Device(id: 2, userID: "a", provider: .fcm, token: "t2"),
        ]
        let messages = devices.map { dispatcher.render(job, rules: rules, device: $0, now: now) }
        var random = SplitMix64(seed: 1)
        let settlement = dispatcher.settle(
            job,
            rules: rules,
            messages: messages,
            outcomes: [.accepted, DeliveryOutcome(.retry, reason: .behindRetry)],
            now: now,
            random: &random
        )
        #expect(settlement.state == .pending && settlement.runAt == now && settlement.refundAttempt)
        #expect(settlement.error == .outcome(.behindRetry) && settlement.accepted == [1])
        #expect(settlement.awaitsResend)
        // The held message was not sent: logged as deferred, not as an attempt.
        #expect(settlement.logs.map(\.event) == [.attempt, .deferred])
        #expect(settlement.logs[1].outcome == nil && settlement.logs[1].reason == .outcome(.behindRetry))
        // The same job on its last attempt with a real failure is dead; held, it is not.
        let failed = dispatcher.settle(
            job,
            rules: rules,
            messages: messages,
            outcomes: [.accepted, DeliveryOutcome(.retry, reason: .timeout)],
            now: now,
            random: &random
        )
        #expect(failed.state == .dead)
    }
}
