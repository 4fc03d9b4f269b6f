import Foundation

/// The operator console's reads and its audit write (`Outbox+Console.swift`). None of them is on
/// the hot path; each is bounded (a time window or a `LIMIT`) so a page stays cheap on a large
/// history.
enum ConsoleStatements {
    /// The outbox in one pass, by state, category and app, as the console names the states:
    /// `due`, `scheduled`, `paused` (held by a pause) and `running`. Per cell: jobs, the age of the
    /// oldest due one (s; due cells only) and the jobs already past their category's deadline.
    static let cells = PostgresStatement(
        name: "herald_console_cells_v1",
        sql: """
            SELECT CASE WHEN o.state = 'running' THEN 'running'
                        WHEN o.paused_run_at IS NOT NULL THEN 'paused'
                        WHEN o.run_at <= now() THEN 'due' ELSE 'scheduled' END AS state,
                   o.category, o.app_id, count(*)::text AS jobs,
                   extract(epoch FROM now() - min(o.run_at) FILTER (WHERE o.run_at <= now()))::text AS oldest_due_age,
                   count(*) FILTER (WHERE o.created_at + k.deadline < now())::text AS past_deadline
            FROM herald.outbox o LEFT JOIN herald.categories k ON k.name = o.category
            GROUP BY 1, 2, 3 ORDER BY 3, 2, 1
            """
    )

    /// Open dead letters, deliveries in the last hour, active devices (as `herald status`).
    static let activity = PostgresStatement(
        name: "herald_console_activity_v1",
        sql: "SELECT \(OutboxStatements.openDeadLetters), \(OutboxStatements.activityColumns)"
    )

    /// Provider attempts per minute over the last 15 minutes: minute (UTC `HH:MI`), accepted, failed.
    static let throughput = PostgresStatement(
        name: "herald_console_throughput_v1",
        sql: """
            SELECT to_char(date_trunc('minute', l.created_at) AT TIME ZONE 'UTC', 'HH24:MI') AS minute,
                   count(*) FILTER (WHERE l.outcome = 'accepted')::text AS accepted,
                   count(*) FILTER (WHERE l.outcome IS DISTINCT FROM 'accepted')::text AS failed
            FROM herald.delivery_log l
            WHERE l.event = 'attempt' AND l.created_at >= date_trunc('minute', now()) - interval '14 minutes'
            GROUP BY 1 ORDER BY 1
            """
    )

    /// Each category with a deadline: the deadline (s), and over the last hour the jobs some
    /// device accepted and the deadline alerts raised, from one pass over that hour's history.
    /// (Jobs waiting past a deadline come from ``cells``.)
    static let deadlines = PostgresStatement(
        name: "herald_console_deadlines_v2",
        sql: """
            SELECT c.name AS category, extract(epoch FROM c.deadline)::text AS deadline,
                   coalesce(h.delivered, 0)::text AS delivered, coalesce(h.alerts, 0)::text AS alerts
            FROM herald.categories c
            LEFT JOIN (
                SELECT l.category,
                       count(DISTINCT l.job_id) FILTER (WHERE l.event = 'attempt' AND l.outcome = 'accepted') AS delivered,
                       count(*) FILTER (WHERE l.event = 'alert' AND l.reason = 'deadline_missed') AS alerts
                FROM herald.delivery_log l
                WHERE l.created_at > now() - interval '1 hour' AND l.event IN ('attempt', 'alert')
                  AND l.category IN (SELECT k.name FROM herald.categories k WHERE k.deadline IS NOT NULL)
                GROUP BY l.category
            ) h ON h.category = c.name
            WHERE c.deadline IS NOT NULL ORDER BY c.name
            """
    )

    /// Job search over the outbox (jobs still pending or running, whatever their age) and the
    /// history (each finished job's last record since $5, among the newest 5,000 matching
    /// records, so a page stays cheap on a busy day). Binds: $1 user, $2 category, $3 state,
    /// $4 dedup key, $5 since (epoch s; default the last day), $6 limit. NULL matches anything.
    /// Returns id, user, category, state, reason, time (ISO 8601).
    static let searchJobs = PostgresStatement(
        name: "herald_console_jobs_v2",
        sql: """
            WITH live AS (
                SELECT o.id, o.user_id, o.category,
                       CASE WHEN o.state = 'running' THEN 'running'
                            WHEN o.paused_run_at IS NOT NULL THEN 'paused' ELSE 'pending' END AS state,
                       coalesce(o.last_error, '') AS reason, o.created_at AS at
                FROM herald.outbox o
                WHERE ($1::text IS NULL OR o.user_id = $1) AND ($2::text IS NULL OR o.category = $2)
                  AND ($4::text IS NULL OR o.dedup_key = $4)
                ORDER BY o.id DESC LIMIT $6
            ), recent AS (
                -- The newest matching records first (a backward scan, not a sort of the whole
                -- day): a job's first record met here is its last one.
                SELECT l.* FROM herald.delivery_log l
                WHERE l.created_at >= coalesce(to_timestamp($5::float8), now() - interval '1 day')
                  AND ($1::text IS NULL OR l.user_id = $1) AND ($2::text IS NULL OR l.category = $2)
                  AND ($4::text IS NULL OR l.job_id IN (SELECT k.job_id FROM herald.dedup_keys k WHERE k.dedup_key = $4))
                ORDER BY l.id DESC LIMIT 5000
            ), finished AS (
                SELECT DISTINCT ON (r.job_id) r.job_id AS id, r.user_id, r.category, r.status AS state,
                       coalesce(r.reason, r.outcome, '') AS reason, r.created_at AS at
                FROM recent r WHERE r.job_id NOT IN (SELECT live.id FROM live)
                ORDER BY r.job_id DESC, r.id DESC
            )
            SELECT j.id::text AS id, j.user_id, j.category, j.state, j.reason,
                   to_char(j.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS at
            FROM (SELECT * FROM live UNION ALL SELECT * FROM finished) j
            WHERE $3::text IS NULL OR j.state = $3
            ORDER BY j.id DESC LIMIT $6
            """
    )

    /// A user's devices, newest first: id, provider, app, environment, active, disabled reason,
    /// permission, locale, registered at, token. The token is hashed by the caller before any
    /// page sees it.
    static let userDevices = PostgresStatement(
        name: "herald_console_devices_v1",
        sql: """
            SELECT d.id::text AS id, d.provider, d.app_id, d.environment, d.active::text AS active,
                   coalesce(d.disabled_reason, '') AS disabled_reason, coalesce(d.permission, 'unknown') AS permission,
                   coalesce(d.locale, '') AS locale,
                   to_char(d.registered_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS registered_at, d.token
            FROM herald.devices d WHERE d.user_id = $1
            ORDER BY d.active DESC, d.id DESC LIMIT 100
            """
    )

    /// A user's preferences document, or no row.
    static let userPreferences = PostgresStatement(
        name: "herald_console_preferences_v1",
        sql: "SELECT p.preferences::text FROM herald.preferences p WHERE p.user_id = $1"
    )

    /// A user's last `$2` notifications, newest first, each by its latest record: job, category,
    /// first seen, last event, provider, outcome, status, reason.
    static let userNotifications = PostgresStatement(
        name: "herald_console_notifications_v1",
        sql: """
            SELECT j.job_id::text AS job_id, l.category,
                   to_char(j.first_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS first_seen,
                   l.event, coalesce(l.provider, '') AS provider, coalesce(l.outcome, '') AS outcome, l.status,
                   coalesce(l.reason, '') AS reason
            FROM (SELECT x.job_id, max(x.id) AS last_id, min(x.created_at) AS first_at
                  FROM herald.delivery_log x WHERE x.user_id = $1
                  GROUP BY x.job_id ORDER BY x.job_id DESC LIMIT $2) j
            JOIN herald.delivery_log l ON l.id = j.last_id
            ORDER BY j.job_id DESC
            """
    )

    /// `herald.diagnose(user)` as JSON text.
    static let diagnose = PostgresStatement(name: "herald_console_diagnose_v1", sql: "SELECT herald.diagnose($1)::text")

    /// Records one operator action. Binds: $1 actor, $2 action, $3 target (JSON), $4 jobs.
    static let audit = PostgresStatement(
        name: "herald_console_audit_v1",
        sql: "INSERT INTO herald.audit_log (actor, action, target, jobs) VALUES ($1, $2, $3::jsonb, $4::bigint)"
    )

    /// The latest `$1` audit records, newest first: time, actor, action, target, jobs.
    static let auditLog = PostgresStatement(
        name: "herald_console_audit_log_v1",
        sql: """
            SELECT to_char(a.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS at, a.actor, a.action,
                   a.target::text AS target, a.jobs::text AS jobs
            FROM herald.audit_log a ORDER BY a.id DESC LIMIT $1
            """
    )

    /// Category names with their apps, for the console's filters and forms.
    static let categories = PostgresStatement(
        name: "herald_console_categories_v1",
        sql: "SELECT c.name, c.app_id FROM herald.categories c ORDER BY c.app_id, c.name"
    )
}
