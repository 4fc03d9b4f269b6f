import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("Policy: category and option parsing")
struct PolicyParsingTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var coalesce: String
        var rateLimit = "{}"
        var quietHours = "defer"
        var expected: CategoryPolicy
        var testDescription: String { "\(coalesce) \(rateLimit) \(quietHours)" }
    }

    static func policy(
        quietHours: CategoryPolicy.QuietHoursPolicy = .defer,
        coalescing: CategoryPolicy.Coalescing = .none,
        summary: CategoryPolicy.SummaryTemplate = .init(),
        summarizeAbove: Int? = nil,
        perUser: CategoryPolicy.RateLimit? = nil,
        perScope: CategoryPolicy.RateLimit? = nil,
        overLimit: CategoryPolicy.OverLimit = .summarize
    ) -> CategoryPolicy {
        CategoryPolicy(
            name: "c",
            quietHours: quietHours,
            coalescing: coalescing,
            summary: summary,
            summarizeAbove: summarizeAbove,
            perUser: perUser,
            perScope: perScope,
            overLimit: overLimit
        )
    }

    static let cases: [Case] = [
        Case(coalesce: "{}", expected: policy()),
        Case(coalesce: "garbage", rateLimit: "[]", quietHours: "sometimes", expected: policy()),
        Case(coalesce: "{}", quietHours: "drop", expected: policy(quietHours: .drop)),
        Case(coalesce: "{}", quietHours: "bypass", expected: policy(quietHours: .bypass)),
        Case(
            coalesce: #"""
                {"mode": "leading", "count": 3, "windowSeconds": 300, "summaryTitle": "New listings",
                 "summaryBody": "{count} new listings near you", "summaryRoute": "/listings", "summarizeAbove": 5}
                """#,
            expected: policy(
                coalescing: .leading(count: 3, window: .seconds(300)),
                summary: .init(title: "New listings", body: "{count} new listings near you", route: "/listings"),
                summarizeAbove: 5
            )
        ),
        Case(
            coalesce: #"{"mode": "leading", "count": 0, "windowSeconds": -1, "summarizeAbove": 0}"#,
            expected: policy(coalescing: .leading(count: 3, window: .seconds(300)))
        ),
        Case(
            coalesce: #"{"mode": "leading", "count": "5"}"#,
            expected: policy(coalescing: .leading(count: 3, window: .seconds(300)))
        ),
        Case(
            coalesce: #"{"mode": "trailing"}"#,
            expected: policy(
                coalescing: .trailing(window: .seconds(120)),
                summary: .init(body: "Multiple updates received: {body}")
            )
        ),
        Case(
            coalesce: #"{"mode": "trailing", "windowSeconds": 90, "summaryBody": "{body}"}"#,
            expected: policy(coalescing: .trailing(window: .seconds(90)), summary: .init(body: "{body}"))
        ),
        Case(coalesce: #"{"mode": "none", "count": 3}"#, expected: policy()),
        Case(coalesce: #"{"mode": "sometimes"}"#, expected: policy()),
        Case(
            coalesce: "{}",
            rateLimit: #"""
                {"perUser": {"max": 5, "windowSeconds": 600}, "perScope": {"max": 10, "windowSeconds": 86400},
                 "over": "suppress"}
                """#,
            expected: policy(
                perUser: .init(max: 5, window: .seconds(600)),
                perScope: .init(max: 10, window: .seconds(86_400)),
                overLimit: .suppress
            )
        ),
        Case(
            coalesce: "{}",
            rateLimit: #"{"perUser": {"max": 0, "windowSeconds": 600}, "over": "explode"}"#,
            expected: policy()
        ),
        Case(
            coalesce: "{}",
            rateLimit: #"{"perUser": {"max": 5}, "perScope": {"max": 2.5, "windowSeconds": 60}}"#,
            expected: policy()
        ),
    ]

    @Test("herald.categories coalesce / rate_limit / quiet_hours columns", arguments: cases)
    func category(_ c: Case) {
        let parsed = CategoryPolicy(
            name: "c",
            mandatory: false,
            optIn: false,
            quietHours: c.quietHours,
            coalesceJSON: c.coalesce,
            rateLimitJSON: c.rateLimit
        )
        #expect(parsed == c.expected)
    }

    @Test(
        "herald.outbox options as the policy engine reads them",
        arguments: [
            ("{}", PolicyInputs()),
            ("nonsense", PolicyInputs()),
            (
                #"""
                {"deliverAt": "2026-06-15T12:00:00+00:00", "geo": {"lat": 51.5, "lon": -0.12},
                 "requires": {"bluetooth": true}, "scope": "org-1", "coalesceKey": "area-1"}
                """#,
                PolicyInputs(
                    deliverAt: Fixture.now,
                    geo: GeoPoint(lat: 51.5, lon: -0.12),
                    requires: ["bluetooth": .bool(true)],
                    scope: "org-1",
                    coalesceKey: "area-1"
                )
            ),
            (#"{"geo": {"lat": "x", "lon": 0}, "requires": [1], "scope": 3, "deliverAt": "soon"}"#, PolicyInputs()),
            (#"{"geo": {"lat": 0, "lon": 181}}"#, PolicyInputs()),
        ]
    )
    func options(json: String, expected: PolicyInputs) {
        #expect(PolicyInputs(optionsJSON: json) == expected)
    }
}
