import Foundation
import HeraldCore
import Testing

/// The reasons Herald writes are a closed list, and docs/reasons.md is that list for operators:
/// these tests hold the two together in both directions.
@Suite("Reasons: one closed vocabulary, every word documented")
struct ReasonVocabularyTests {
    static let page: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("docs/reasons.md"), encoding: .utf8)) ?? ""
    }()

    /// Every kind of job-level reason, one of each; `kind(of:)` switches over all of them, so a
    /// new case does not compile until it is listed here.
    static let jobReasons: [LogReason] = [
        .outcome(.timeout), .deferred(.quietHours), .suppressed(.presence), .folded(.backlog),
        .payloadRejected(.payloadTooLarge), .attemptsExhausted(.unavailable), .expiredWhileRetrying(.timeout),
        .unknownCategory, .expiredBeforeDelivery, .alreadyAccepted, .deadlineMissed, .deliveredAfterDeadline,
        .shownAsAlert, .shownInInbox,
    ]

    static func kind(of reason: LogReason) -> Int {
        switch reason {
        case .outcome: 0
        case .deferred: 1
        case .suppressed: 2
        case .folded: 3
        case .payloadRejected: 4
        case .attemptsExhausted: 5
        case .expiredWhileRetrying: 6
        case .unknownCategory: 7
        case .expiredBeforeDelivery: 8
        case .alreadyAccepted: 9
        case .deadlineMissed: 10
        case .deliveredAfterDeadline: 11
        case .shownAsAlert: 12
        case .shownInInbox: 13
        }
    }

    /// The backticked words of the first column of the page's per-device tables.
    static var documentedDeviceReasons: [String] {
        guard let start = page.range(of: "## Per device") else { return [] }
        return page[start.upperBound...].split(separator: "\n").compactMap { line in
            guard line.hasPrefix("| `") else { return nil }
            return line.dropFirst(3).split(separator: "`").first.map(String.init)
        }
    }

    @Test("the page exists and has the per-device tables")
    func pageIsThere() {
        #expect(Self.documentedDeviceReasons.count >= 90, "\(Self.documentedDeviceReasons.count)")
    }

    @Test("every device reason is lowercase snake_case and documented once in the per-device tables")
    func deviceReasons() {
        let documented = Self.documentedDeviceReasons
        for reason in DeliveryOutcome.Reason.allCases {
            #expect(reason.rawValue.allSatisfy { $0.isLowercase || $0 == "_" }, "\(reason.rawValue)")
            #expect(documented.filter { $0 == reason.rawValue }.count == 1, "\(reason.rawValue)")
        }
    }

    @Test("the per-device tables list no word the code does not have")
    func noStaleDeviceReason() {
        let known = Set(DeliveryOutcome.Reason.allCases.map(\.rawValue))
        #expect(Self.documentedDeviceReasons.filter { !known.contains($0) } == [])
    }

    @Test("every rule reason is documented with its event")
    func ruleReasons() {
        for r in DeferReason.allCases { #expect(Self.page.contains("| `deferred` | `\(r.rawValue)` |"), "\(r)") }
        for r in SuppressionReason.allCases {
            #expect(Self.page.contains("| `suppressed` | `\(r.rawValue)` |"), "\(r)")
        }
        for r in FoldReason.allCases { #expect(Self.page.contains("| `summarized` | `\(r.rawValue)` |"), "\(r)") }
    }

    @Test("every job-level reason is documented; dead-letter causes name the device reason after a colon")
    func jobReasonsAreDocumented() {
        #expect(Set(Self.jobReasons.map(Self.kind(of:))).count == 14)
        for reason in Self.jobReasons {
            let text = reason.text
            if let colon = text.firstIndex(of: ":") {
                #expect(Self.page.contains("`\(text[..<colon]): <reason>`"), "\(text)")
                #expect(text[text.index(after: colon)...].hasPrefix(" "), "\(text)")
            } else {
                #expect(Self.page.contains("`\(text)`"), "\(text)")
            }
        }
        #expect(LogReason.attemptsExhausted(.unavailable).text == "attempts_exhausted: unavailable")
        // Interpolated (log metadata), every reason reads as its stored text, not its case name.
        #expect("\(DeliveryOutcome.Reason.expiredProviderToken)" == "expired_provider_token")
        #expect(
            "\(SuppressionReason.noActiveDevice) \(DeferReason.quietHours) \(FoldReason.rateLimited)"
                == "no_active_device quiet_hours rate_limited"
        )
        #expect("\(LogReason.payloadRejected(.badDeviceToken))" == "payload_rejected: bad_device_token")
        #expect(LogReason.outcome(.connectionClosed).text == "connection_closed")
    }
}
