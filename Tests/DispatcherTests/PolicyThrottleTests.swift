import Dispatcher
import Foundation
import HeraldCore
import Testing

private let now = Fixture.now

@Suite("Policy: rate limits and coalescing")
struct PolicyThrottleTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var label: String
        var category: CategoryPolicy
        var priority = Priority.normal
        var mandatory: Bool?
        var inputs = PolicyInputs()
        var sends: [RecentSend] = []
        var pending: [String: Int] = [:]
        var open: [SummaryKey: Date] = [:]
        var expected: PolicyDecision
        var testDescription: String { label }
    }

    static let perUser = CategoryPolicy(name: "general", perUser: .init(max: 5, window: .seconds(600)))
    static let perUserSuppress = CategoryPolicy(
        name: "general",
        perUser: .init(max: 5, window: .seconds(600)),
        overLimit: .suppress
    )
    static let perScope = CategoryPolicy(name: "general", perScope: .init(max: 10, window: .seconds(86_400)))
    static let perScopeSuppress = CategoryPolicy(
        name: "general",
        perScope: .init(max: 10, window: .seconds(86_400)),
        overLimit: .suppress
    )
    static let listings = CategoryPolicy(
        name: "general",
        coalescing: .leading(count: 3, window: .seconds(300)),
        summary: .init(title: "New listings", body: "{count} new listings near you", route: "/listings")
    )
    static let delays = CategoryPolicy(name: "general", coalescing: .trailing(window: .seconds(120)))
    static let rides = CategoryPolicy(name: "general", perUser: .init(max: 5, window: .seconds(600)))
    static let backlog = CategoryPolicy(name: "general", summarizeAbove: 5)
    static let org = PolicyInputs(scope: "org-1")

    static func fold(_ dueAt: Date, _ reason: FoldReason, key: String = "general") -> PolicyDecision {
        .fold(Fold(key: key, dueAt: dueAt, reason: reason))
    }

    /// Five sends a minute apart, the newest 10 s ago: the oldest leaves the 600 s window at now + 350.
    static let fiveInTenMinutes = Fixture.sends(5)
    static let oldestLeaves = now - 10 - 240 + 600

    static let cases: [Case] = [
        Case(
            label: "seed 004 rate limiting: 4 in 10 minutes pass",
            category: perUser,
            sends: Fixture.sends(4),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 004 rate limiting: the 6th in 10 minutes folds until a slot frees",
            category: perUser,
            sends: fiveInTenMinutes,
            expected: fold(oldestLeaves, .rateLimited)
        ),
        Case(
            label: "seed 004 rate limiting: sends of every category count",
            category: perUser,
            sends: Fixture.sends(3, "other") + Fixture.sends(2, newestAge: 5),
            expected: fold(now - 130 + 600, .rateLimited)
        ),
        Case(
            label: "seed 004 rate limiting: low priority is throttled too",
            category: perUser,
            priority: .low,
            sends: fiveInTenMinutes,
            expected: fold(oldestLeaves, .rateLimited)
        ),
        Case(
            label: "seed 004 rate limiting: over-limit suppress",
            category: perUserSuppress,
            sends: fiveInTenMinutes,
            expected: .suppress(.rateLimited)
        ),
        Case(
            label: "seed 004 rate limiting: urgent (high) always passes",
            category: perUserSuppress,
            priority: .high,
            sends: fiveInTenMinutes,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 004 rate limiting: critical always passes",
            category: perUserSuppress,
            priority: .critical,
            sends: fiveInTenMinutes,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 003 req 8.3–8.4: a mandatory (SEP) category is never throttled",
            category: perUserSuppress,
            mandatory: true,
            sends: fiveInTenMinutes,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 004 rate limiting: sends older than the window do not count",
            category: perUser,
            sends: Fixture.sends(5, newestAge: 601),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 002 req 12.1: the 11th announcement of an org in a day folds",
            category: perScope,
            inputs: org,
            sends: Fixture.sends(10, scope: "org-1", spacing: 3_600),
            expected: fold(now - 10 - 9 * 3_600 + 86_400, .scopeQuota)
        ),
        Case(
            label: "seed 002 req 12.1: over quota with suppress",
            category: perScopeSuppress,
            inputs: org,
            sends: Fixture.sends(10, scope: "org-1", spacing: 3_600),
            expected: .suppress(.scopeQuota)
        ),
        Case(
            label: "seed 002 req 12.1: another org's announcements do not count",
            category: perScopeSuppress,
            inputs: org,
            sends: Fixture.sends(10, scope: "org-2", spacing: 3_600),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 002 req 12.1: another category with the same scope does not count",
            category: perScopeSuppress,
            inputs: org,
            sends: Fixture.sends(10, "events", scope: "org-1", spacing: 3_600),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 002 req 12.1: a job without scope has no quota",
            category: perScopeSuppress,
            sends: Fixture.sends(10, scope: "org-1", spacing: 3_600),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 000 req 1.5: the first 3 listings in 5 minutes go out",
            category: listings,
            sends: Fixture.sends(2),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 000 req 1.5: the 4th folds into a summary at the window's end",
            category: listings,
            sends: Fixture.sends(3),
            expected: fold(now - 10 - 120 + 300, .coalesced)
        ),
        Case(
            label: "seed 000 req 1.5: listings older than the window start a new burst",
            category: listings,
            sends: Fixture.sends(3, newestAge: 300),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 000 req 1.5: a different coalesceKey is a different burst",
            category: listings,
            inputs: PolicyInputs(coalesceKey: "area-2"),
            sends: Fixture.sends(3, coalesceKey: "area-1"),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 000 req 1.5: the same coalesceKey folds under that key",
            category: listings,
            inputs: PolicyInputs(coalesceKey: "area-1"),
            sends: Fixture.sends(3, coalesceKey: "area-1"),
            expected: fold(now - 10 - 120 + 300, .coalesced, key: "area-1")
        ),
        Case(
            label: "seed 000 req 1.5: critical never coalesces",
            category: listings,
            priority: .critical,
            sends: Fixture.sends(3),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 004 rapid updates: trailing debounce holds every update for the window",
            category: delays,
            inputs: PolicyInputs(coalesceKey: "journey-7"),
            expected: fold(now + 120, .debounced, key: "journey-7")
        ),
        Case(
            label: "seed 003 req 2.4: ride requests (no coalescing, high) each go out",
            category: rides,
            priority: .high,
            sends: Fixture.sends(20, spacing: 5),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 002 req 12.5: more than 5 pending fold into one summary now",
            category: backlog,
            pending: ["general": 6],
            expected: fold(now, .backlog)
        ),
        Case(
            label: "seed 002 req 12.5: 5 pending go out one by one",
            category: backlog,
            pending: ["general": 5],
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "quiet-hours pile-up: an open summary keeps collecting",
            category: backlog,
            open: [SummaryKey(category: "general", key: "general"): now + 30],
            expected: fold(now + 30, .summaryOpen)
        ),
        Case(
            label: "quiet-hours pile-up: an overdue open summary is due now",
            category: backlog,
            open: [SummaryKey(category: "general", key: "general"): now - 30],
            expected: fold(now, .summaryOpen)
        ),
        Case(
            label: "a summary job is never throttled again",
            category: perUserSuppress,
            inputs: PolicyInputs(isSummary: true),
            sends: fiveInTenMinutes,
            expected: Fixture.deliverToPhone
        ),
    ]

    @Test("throttling and coalescing rules", arguments: cases)
    func rules(_ c: Case) {
        let decision = Fixture.decide(
            Fixture.job(priority: c.priority, mandatory: c.mandatory),
            inputs: c.inputs,
            category: c.category,
            recipient: Fixture.recipient(recentSends: c.sends, pending: c.pending, openSummaries: c.open)
        )
        #expect(decision == c.expected)
    }

    /// Runs one user's jobs through the engine in order, recording each decision as the queue would.
    static func run(
        _ times: [Date],
        category: CategoryPolicy,
        inputs: PolicyInputs = PolicyInputs()
    )
        -> (decisions: [PolicyDecision], summary: SummaryState?)
    {
        var context = Fixture.recipient()
        var summary: SummaryState?
        var decisions: [PolicyDecision] = []
        for (i, at) in times.enumerated() {
            let job = Fixture.job(body: "update \(i + 1)")
            let decision = PolicyEngine().decide(job, inputs: inputs, category: category, recipient: context, now: at)
            context.record(decision, category: job.category, inputs: inputs, now: at)
            if case .fold(let fold) = decision {
                if summary == nil {
                    summary = SummaryState(fold, payload: job.payload)
                } else {
                    summary?.fold(fold, payload: job.payload)
                }
            }
            decisions.append(decision)
        }
        return (decisions, summary)
    }

    @Test("seed 000 req 1.5: 8 listings in a burst: 3 sent, then \"5 new listings near you\" at the window's end")
    func leadingBurst() throws {
        let times = (0..<8).map { now + Double($0) * 10 }
        let (decisions, summary) = Self.run(times, category: Self.listings)
        let due = now + 300
        #expect(decisions.prefix(3).allSatisfy { $0 == Fixture.deliverToPhone })
        #expect(decisions.dropFirst(3).allSatisfy { $0 == Self.fold(due, .coalesced) })
        let state = try #require(summary)
        #expect(state.count == 5)
        #expect(state.poll(now: due - 1, template: Self.listings.summary) == .wait(until: due))
        #expect(
            state.poll(now: due, template: Self.listings.summary)
                == .send(title: "New listings", body: "5 new listings near you", route: "/listings")
        )
    }

    @Test("seed 004 rapid updates: 3 delays in 2 minutes become one \"Multiple updates received\" with the latest")
    func trailingDebounce() throws {
        let (decisions, summary) = Self.run(
            [now, now + 30, now + 60],
            category: Self.delays,
            inputs: PolicyInputs(coalesceKey: "journey-7")
        )
        #expect(decisions.count == 3)
        let state = try #require(summary)
        #expect(state.dueAt == now + 180)
        let template = CategoryPolicy(
            name: "general",
            mandatory: false,
            optIn: false,
            quietHours: "defer",
            coalesceJSON: #"{"mode": "trailing", "windowSeconds": 120}"#,
            rateLimitJSON: "{}"
        ).summary
        #expect(
            state.poll(now: now + 180, template: template)
                == .send(title: "title", body: "Multiple updates received: update 3", route: nil)
        )
    }

    @Test("seed 004 rapid updates: a single debounced update goes out as itself")
    func trailingSingle() throws {
        let (_, summary) = Self.run([now], category: Self.delays)
        let state = try #require(summary)
        #expect(
            state.poll(now: now + 120, template: Self.delays.summary)
                == .send(title: "title", body: "update 1", route: nil)
        )
    }

    @Test("seed 004 rate limiting: 7 normal jobs at once: 5 sent, 2 folded into one summary")
    func rateLimitBatch() throws {
        let (decisions, summary) = Self.run(Array(repeating: now, count: 7), category: Self.perUser)
        #expect(decisions.prefix(5).allSatisfy { $0 == Fixture.deliverToPhone })
        #expect(decisions[5] == Self.fold(now + 600, .rateLimited))
        #expect(decisions[6] == Self.fold(now + 600, .summaryOpen))
        #expect(try #require(summary).count == 2)
    }

    @Test(
        "summary templates fill {count}, {title} and {body} once",
        arguments: [
            ("{count} new listings near you", "4 new listings near you"),
            ("{title}: {body}", "Bread: {count} loaves"),
            ("{unknown} {count", "{unknown} {count"),
            ("no placeholders", "no placeholders"),
            ("{}{count}}", "{}4}"),
        ]
    )
    func templates(template: String, expected: String) {
        #expect(fillTemplate(template, ["count": "4", "title": "Bread", "body": "{count} loaves"]) == expected)
    }
}
