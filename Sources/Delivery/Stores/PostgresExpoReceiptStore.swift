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
        _ = try await pool.query(ExpoReceiptStatements.record, Self.ticketBinds(tickets))
    }

    package func due(at now: Date, limit: Int) async throws -> [ExpoTicket] {
        try await pool.query(ExpoReceiptStatements.due, [String(now.timeIntervalSince1970), String(limit)])
            .readers.compactMap { r in
                guard let id = r.string("ticket_id"), let device = r.int64("device_id"), let job = r.int64("job_id"),
                    let app = r.string("app_id"), let message = r.string("message"), let sentAt = r.double("sent_at"),
                    let checkAt = r.double("check_at")
                else { return nil }
                return ExpoTicket(
                    ticketID: id, deviceID: device, jobID: job, appID: app, messageJSON: message,
                    attempt: r.int("attempt") ?? 1, sentAt: Date(timeIntervalSince1970: sentAt),
                    checkAt: Date(timeIntervalSince1970: checkAt))
            }
    }

    package func settle(_ updates: [ExpoTicketUpdate]) async throws {
        guard !updates.isEmpty else { return }
        var ids: [String?] = []
        var kinds: [String?] = []
        var reasons: [String?] = []
        var recheck: [Double?] = []
        var replacements: [ExpoTicket] = []
        for update in updates {
            ids.append(update.ticketID)
            var reason: String?
            var at: Double?
            let kind: String
            switch update.resolution {
            case .ok: kind = "ok"
            case .failed(let r):
                kind = "error"
                reason = r
            case .deviceNotRegistered:
                kind = "disable"
                reason = "device_not_registered"
            case .recheck(let date):
                kind = "recheck"
                at = date.timeIntervalSince1970
            case .resent(let replacement):
                kind = "resent"
                replacements.append(replacement)
            case .expired: kind = "expired"
            }
            kinds.append(kind)
            reasons.append(reason)
            recheck.append(at)
        }
        _ = try await pool.query(
            ExpoReceiptStatements.settle,
            [
                PostgresArray.encode(ids), PostgresArray.encode(kinds), PostgresArray.encode(reasons),
                PostgresArray.encode(recheck),
            ] + Self.ticketBinds(replacements))
    }

    /// Deletes settled tickets (errors, expired) older than `olderThan`, at most `limit`; returns how many.
    package func prune(olderThan: Duration, limit: Int) async throws -> Int {
        try await pool.query(ExpoReceiptStatements.prune, [String(olderThan.seconds), String(limit)])
            .scalar.flatMap { Int($0) } ?? 0
    }

    private static func ticketBinds(_ tickets: [ExpoTicket]) -> [String?] {
        [
            PostgresArray.encode(tickets.map { Optional($0.ticketID) }),
            PostgresArray.encode(tickets.map(\.deviceID)),
            PostgresArray.encode(tickets.map(\.jobID)),
            PostgresArray.encode(tickets.map { Optional($0.appID) }),
            PostgresArray.encode(tickets.map { Optional($0.messageJSON) }),
            PostgresArray.encode(tickets.map { Int64($0.attempt) }),
            PostgresArray.encode(tickets.map { Optional($0.sentAt.timeIntervalSince1970) }),
            PostgresArray.encode(tickets.map { Optional($0.checkAt.timeIntervalSince1970) }),
        ]
    }
}
