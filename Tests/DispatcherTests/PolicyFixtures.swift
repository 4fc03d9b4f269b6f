import Dispatcher
import Foundation
import HeraldCore

/// Shared values for the policy tables: fixed instants, jobs, devices and categories.
enum Fixture {
    /// The instant of a UTC civil time (days-from-civil, independent of Foundation's calendar).
    static func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0) -> Date {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60))
    }

    /// Monday 2026-06-15 12:00 UTC: outside every quiet window used below unless a test says otherwise.
    static let now = utc(2026, 6, 15, 12)

    static let phone = Device(id: 1, userID: "u1", provider: .apns, token: "t-phone")
    static let bluetoothPhone = Device(
        id: 2,
        userID: "u1",
        provider: .expo,
        token: "t-ble",
        attributesJSON: #"{"bluetooth": true}"#
    )

    static func job(
        _ category: String = "general",
        priority: Priority = .normal,
        context: String? = nil,
        mandatory: Bool? = nil,
        expiresAt: Date = now + 86_400,
        body: String = "body"
    ) -> Job {
        Job(
            id: 1,
            userID: "u1",
            category: category,
            priority: priority,
            payload: Job.Payload(title: "title", body: body),
            options: Job.Options(context: context, mandatory: mandatory),
            createdAt: now - 1,
            expiresAt: expiresAt
        )
    }

    static func recipient(
        _ preferences: Preferences = Preferences(),
        presence: Set<String> = [],
        devices: [Device] = [phone],
        recentSends: [RecentSend] = [],
        pending: [String: Int] = [:],
        openSummaries: [SummaryKey: Date] = [:]
    ) -> RecipientContext {
        RecipientContext(
            userID: "u1",
            preferences: preferences,
            presence: presence,
            devices: devices,
            recentSends: recentSends,
            pending: pending,
            openSummaries: openSummaries
        )
    }

    /// `count` sends of `category`, one every `spacing` seconds, the newest `newestAge` seconds before `now`.
    static func sends(
        _ count: Int,
        _ category: String = "general",
        scope: String? = nil,
        coalesceKey: String? = nil,
        spacing: Double = 60,
        newestAge: Double = 10
    ) -> [RecentSend] {
        (0..<count).map { i in
            RecentSend(
                at: now - newestAge - Double(count - 1 - i) * spacing,
                category: category,
                scope: scope,
                coalesceKey: coalesceKey
            )
        }
    }

    static let deliverToPhone = PolicyDecision.deliver(Delivery(devices: [phone]))

    static func decide(
        _ job: Job = Fixture.job(),
        inputs: PolicyInputs = PolicyInputs(),
        category: CategoryPolicy = CategoryPolicy(name: "general"),
        recipient: RecipientContext = Fixture.recipient(),
        now: Date = Fixture.now
    ) -> PolicyDecision {
        PolicyEngine().decide(job, inputs: inputs, category: category, recipient: recipient, now: now)
    }
}
