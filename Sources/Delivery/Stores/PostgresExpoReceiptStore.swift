import Foundation
import HeraldCore
import Providers
import Queue

/// ``ExpoReceiptStore`` on `herald.expo_tickets` (migration 0003), one statement per call.
package struct PostgresExpoReceiptStore: ExpoReceiptStore {
    let pool: PostgresPool

    package init(pool: PostgresPool) { self.pool = pool }

    package func record(_ tickets: [ExpoTicket]) async throws {
        guard !tickets.isEmpty else { return }
        _ = try await pool.query(ExpoReceiptStatements.record, [Self.ticketRecords(tickets)])
    }

    package func due(at now: Date, limit: Int) async throws -> [ExpoTicket] {
        try await pool.query(ExpoReceiptStatements.due, [now.epochText, String(limit)])
            .readers.compactMap { r in
                guard let id = r.string("ticket_id"), let device = r.int64("device_id"), let job = r.int64("job_id"),
                    let app = r.string("app_id"), let message = r.string("message"), let sentAt = r.date("sent_at"),
                    let checkAt = r.date("check_at")
                else { return nil }
                return ExpoTicket(
                    ticketID: id,
                    deviceID: device,
                    jobID: job,
                    appID: app,
                    messageJSON: message,
                    attempt: r.int("attempt") ?? 1,
                    sentAt: sentAt,
                    checkAt: checkAt
                )
            }
    }

    package func settle(_ updates: [ExpoTicketUpdate]) async throws {
        guard !updates.isEmpty else { return }
        var decisions = PostgresRecords(ExpoReceiptStatements.receiptDecision)
        var replacements: [ExpoTicket] = []
        for update in updates {
            var reason: String?
            var at: Date?
            let kind: String
            switch update.resolution {
            case .ok: kind = "ok"
            case .failed(let r):
                kind = "error"
                reason = r.rawValue
            case .deviceNotRegistered:
                kind = "disable"
                reason = DeliveryOutcome.Reason.deviceNotRegistered.rawValue
            case .recheck(let date):
                kind = "recheck"
                at = date
            case .resent(let replacement):
                kind = "resent"
                replacements.append(replacement)
            case .expired: kind = "expired"
            }
            decisions.row {
                $0.field("ticket_id", update.ticketID)
                $0.field("kind", kind)
                $0.field("reason", reason)
                $0.field("recheck_at", at)
            }
        }
        _ = try await pool.query(
            ExpoReceiptStatements.settle,
            [decisions.encoded(), Self.ticketRecords(replacements)]
        )
    }

    /// Deletes settled tickets (errors, expired) older than `olderThan`, at most `limit`; returns how many.
    package func prune(olderThan: Duration, limit: Int) async throws -> Int {
        try await pool.query(ExpoReceiptStatements.prune, [olderThan.secondsText, String(limit)])
            .scalar.flatMap { Int($0) } ?? 0
    }

    /// `tickets` as one bind: an array of ``ExpoReceiptStatements/ticketRecord``.
    private static func ticketRecords(_ tickets: [ExpoTicket]) -> String {
        var records = PostgresRecords(ExpoReceiptStatements.ticketRecord)
        for t in tickets {
            records.row {
                $0.field("ticket_id", t.ticketID)
                $0.field("device_id", t.deviceID)
                $0.field("job_id", t.jobID)
                $0.field("app_id", t.appID)
                $0.field("message", t.messageJSON)
                $0.field("attempt", t.attempt)
                $0.field("sent_at", t.sentAt)
                $0.field("check_at", t.checkAt)
            }
        }
        return records.encoded()
    }
}
