import Foundation
import HeraldCore

/// The SQL of ``PostgresExpoReceiptStore``, as named statements with binds (the Expo section of
/// the runtime SQL; the outbox's lives in ``OutboxStatements``).
///
/// - Important: values are always bound (`$n`), never interpolated. Batches travel as arrays
///   expanded with `unnest`, so each store call is one statement.
package enum ExpoReceiptStatements {
    /// An accepted ticket (migration 0013); times in epoch seconds (``PostgresRecords/Row/field(_:_:)`` writes a `Date` so).
    package static let ticketRecord = PostgresCompositeType(
        "herald.expo_ticket_record",
        fields: ["ticket_id", "device_id", "job_id", "app_id", "message", "attempt", "sent_at", "check_at"]
    )
    /// The poller's decision for one ticket (migration 0013).
    package static let receiptDecision = PostgresCompositeType(
        "herald.expo_receipt_decision",
        fields: ["ticket_id", "kind", "reason", "recheck_at"]
    )
    static var compositeTypes: [PostgresCompositeType] { [ticketRecord, receiptDecision] }

    /// Records accepted tickets. Known ticket ids and tickets of since-deleted devices are skipped,
    /// so a retried batch or a device removed mid-send cannot fail the whole insert.
    ///
    /// Binds: $1 an array of ``ticketRecord``.
    package static let record = PostgresStatement(
        name: "herald_expo_tickets_record_v2",
        sql: """
            INSERT INTO herald.expo_tickets (ticket_id, device_id, job_id, app_id, message, attempt, sent_at, check_at)
            SELECT t.ticket_id, t.device_id, t.job_id, t.app_id, t.message, t.attempt,
                   to_timestamp(t.sent_at), to_timestamp(t.check_at)
            FROM unnest($1::herald.expo_ticket_record[]) t
            WHERE EXISTS (SELECT 1 FROM herald.devices d WHERE d.id = t.device_id)
            ON CONFLICT (ticket_id) DO NOTHING
            """
    )

    /// Pending tickets due at `$1` (epoch s), oldest first, at most `$2`. Columns: ticket id,
    /// device id, job id, app id, message, attempt, sent at, check at (epoch s).
    ///
    /// - Important: no `FOR UPDATE`: only the maintenance leader polls (see `ExpoReceiptStore`).
    package static let due = PostgresStatement(
        name: "herald_expo_tickets_due_v1",
        sql: """
            SELECT ticket_id, device_id::text AS device_id, job_id::text AS job_id, app_id, message::text AS message,
                   attempt::text AS attempt, extract(epoch FROM sent_at)::text AS sent_at,
                   extract(epoch FROM check_at)::text AS check_at
            FROM herald.expo_tickets
            WHERE status = 'pending' AND check_at <= to_timestamp($1::float8)
            ORDER BY check_at, ticket_id
            LIMIT $2
            """
    )

    /// Applies the poller's decisions; returns how many devices it disabled.
    ///
    /// Kinds: `ok` and `resent` delete the ticket; `error` and `disable` keep it as 'error' with
    /// the reason; `disable` also disables its device (if still active); `recheck` moves
    /// `check_at`; `expired` marks it 'expired'. Replacement tickets (resends) are inserted in
    /// the same statement, so a crash cannot lose a resent message's ticket. Every receipt that
    /// is not a plain `ok` (an error, a dead device, a resend, no receipt in time) also writes a
    /// `receipt` row to `herald.delivery_log` for the job, so `herald explain` shows it.
    ///
    /// Binds: $1 an array of ``receiptDecision``, $2 the replacement tickets, an array of
    /// ``ticketRecord``.
    package static let settle = PostgresStatement(
        name: "herald_expo_tickets_settle_v3",
        sql: """
            WITH u AS (
                SELECT * FROM unnest($1::herald.expo_receipt_decision[])
            ), finished AS (
                DELETE FROM herald.expo_tickets t USING u
                WHERE t.ticket_id = u.ticket_id AND u.kind IN ('ok', 'resent')
                RETURNING t.device_id, t.job_id, t.attempt, u.kind, u.reason
            ), changed AS (
                UPDATE herald.expo_tickets t
                SET status = CASE u.kind WHEN 'recheck' THEN 'pending' WHEN 'expired' THEN 'expired' ELSE 'error' END,
                    error = CASE WHEN u.kind IN ('error', 'disable') THEN u.reason ELSE t.error END,
                    check_at = CASE WHEN u.kind = 'recheck' THEN to_timestamp(u.recheck_at) ELSE t.check_at END,
                    settled_at = CASE WHEN u.kind = 'recheck' THEN NULL ELSE now() END
                FROM u
                WHERE t.ticket_id = u.ticket_id AND u.kind IN ('error', 'disable', 'recheck', 'expired')
                RETURNING t.device_id, t.job_id, t.attempt, u.kind, u.reason
            ), logged AS (
                INSERT INTO herald.delivery_log
                    (job_id, user_id, category, device_id, provider, event, outcome, status, reason, attempt)
                SELECT r.job_id, d.user_id,
                       coalesce((SELECT l.category FROM herald.delivery_log l WHERE l.job_id = r.job_id LIMIT 1), ''),
                       r.device_id, 'expo', 'receipt',
                       CASE r.kind WHEN 'disable' THEN 'token_invalid' WHEN 'resent' THEN 'retry'
                                   WHEN 'expired' THEN 'no_receipt' ELSE 'error' END,
                       'done',
                       CASE r.kind WHEN 'resent' THEN 'resent' WHEN 'expired' THEN 'receipt_expired' ELSE r.reason END,
                       r.attempt
                FROM (SELECT * FROM finished WHERE kind = 'resent'
                      UNION ALL SELECT * FROM changed WHERE kind IN ('error', 'disable', 'expired')) r
                JOIN herald.devices d ON d.id = r.device_id
                RETURNING 1
            ), disabled AS (
                UPDATE herald.devices d
                SET active = false, disabled_reason = 'device_not_registered', disabled_at = now()
                WHERE d.id IN (SELECT device_id FROM changed WHERE kind = 'disable') AND d.active
                RETURNING d.id
            ), replaced AS (
                INSERT INTO herald.expo_tickets (ticket_id, device_id, job_id, app_id, message, attempt, sent_at, check_at)
                SELECT r.ticket_id, r.device_id, r.job_id, r.app_id, r.message, r.attempt,
                       to_timestamp(r.sent_at), to_timestamp(r.check_at)
                FROM unnest($2::herald.expo_ticket_record[]) r
                WHERE EXISTS (SELECT 1 FROM herald.devices d WHERE d.id = r.device_id)
                ON CONFLICT (ticket_id) DO NOTHING
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM disabled)
            """
    )

    /// Deletes settled tickets (errors, expired) settled more than `$1` seconds ago, at most `$2`.
    package static let prune = PostgresStatement(
        name: "herald_expo_tickets_prune_v1",
        sql: """
            WITH gone AS (
                DELETE FROM herald.expo_tickets WHERE ticket_id IN (
                    SELECT ticket_id FROM herald.expo_tickets
                    WHERE status <> 'pending' AND settled_at < now() - make_interval(secs => $1::float8)
                    ORDER BY settled_at
                    LIMIT $2)
                RETURNING 1
            )
            SELECT count(*) FROM gone
            """
    )
}
