import Foundation
import HeraldCore

/// Every SQL statement the worker runs at runtime, as named statements with binds.
///
/// - Important: values are always bound (`$n`), never interpolated. Batches travel as arrays
///   and are expanded with `unnest`, so each operation costs one statement per batch.
///   Acks and lease changes reach rows through the primary key, and every state change is
///   fenced by `state = 'running' AND lease_owner = $1`, so a worker that lost its lease cannot
///   overwrite a row another worker now holds.
package enum OutboxStatements {
    /// The hot-path statements, by name, for `herald sql` (reviewing plans with EXPLAIN).
    package static var hotPath: [PostgresStatement] {
        [
            claim, claimWithScopeTurns, appsWithSeveralScopes, sendsFromInbox, acknowledge, extendLeases,
            reapExpiredLeases, freeStrayRecipients,
        ]
    }

    /// The number of buckets the database is laid out with (migration 0015).
    static let layout = PostgresStatement(name: "herald_layout_v1", sql: "SELECT buckets FROM herald.layout")

    /// Seconds of send history loaded per recipient for rate limits and coalescing windows
    /// (`recipients.sends` keeps the same day: `herald.trim_sends`, sql/functions/05_inbox.sql).
    static let historyWindow = 86_400
    /// Newest sends kept per recipient (`herald.trim_sends` keeps as many).
    static let historyLimit = 100

    /// The longest window category `k`'s coalescing or limits look back over, in seconds (a
    /// leading window defaults to 300 s); NULL for a category that reads no history.
    static func lookBack(_ k: String) -> String {
        """
        greatest(CASE WHEN \(k).coalesce <> '{}' THEN 300 END, \(jsonSeconds("\(k).coalesce")),
                 \(jsonSeconds("\(k).rate_limit->'perUser'")), \(jsonSeconds("\(k).rate_limit->'perScope'")))
        """
    }

    /// `windowSeconds` of the JSON object `object` as seconds when it is a number, else NULL (a
    /// window the policy would not read as one: the claim's `reach` must never be shorter than
    /// a window the policy uses, and a longer one only sends more history).
    static func jsonSeconds(_ object: String) -> String {
        "CASE WHEN jsonb_typeof(\(object)->'windowSeconds') = 'number' THEN (\(object)->>'windowSeconds')::float8 END"
    }

    /// Scopes walked per app per claim.
    static let scopeTurns = 8
    /// Due jobs taken per walked scope per claim (at most ``scopeTurns`` × this beyond the batch).
    static let scopeTurnJobs = 16

    /// A job's scope as the claim index `outbox_claim_scope` keys it ('' for none).
    static func scopeKey(_ alias: String) -> String { "coalesce(\(alias).options->>'scope', '')" }

    /// The condition that keeps a scan of `alias` (a per-user table) in the statement's bucket,
    /// bound as `bind` (migration 0015): on every scan of such a table in a hot-path statement.
    static func inBucket(_ alias: String, _ bind: String = "$6") -> String { "\(alias).bucket = \(bind)::smallint" }

    /// The greatest scope of app `a.app_id` with pending jobs in bucket `bucket`, below `bound` if
    /// given: one backward probe of `outbox_claim_scope`, landing on that scope's newest entries.
    static func lastScope(below bound: String? = nil, alias o: String = "o", bucket: String = "$6") -> String {
        "(SELECT max(\(scopeKey(o))) FROM herald.outbox \(o) WHERE \(inBucket(o, bucket)) AND \(o).app_id = a.app_id "
            + "AND \(o).state = 'pending'" + (bound.map { " AND \(scopeKey(o)) < \($0)" } ?? "") + ")"
    }

    /// The scope the walk visits after `bound`: the next one down, or wrapping round to the top.
    static func scopeBefore(_ bound: String) -> String {
        "coalesce(\(lastScope(below: bound)), \(lastScope()))"
    }

    /// Locks the recipient of job row `alias` unless another claim is taking it or a batch holds
    /// it, and only in the version this statement's snapshot read: a user a batch took or freed
    /// after the snapshot is left for the next claim, because the history this claim reads would
    /// miss that batch's sends.
    ///
    /// Three steps, in this order (`OFFSET 0` keeps the planner from merging them): read the row
    /// in the snapshot (`rs`, one index probe: free, and which version); look whether that
    /// version is still the live one as of now (`herald.recipient_unchanged_in_bucket`, a heap
    /// fetch by ctid); lock it by that ctid (a TID scan, no second index probe), skipping it if
    /// another transaction has it locked. A row another claim is taking at this moment (locked,
    /// not yet committed) passes the look, since nothing has changed yet, and `SKIP LOCKED`
    /// passes it over; in a drain that is half the rows a claim scans: two replicas' claims
    /// overlap, each walking past the rows the other is taking (docs/benchmarks.md, "Where a
    /// claim's time goes under load"). A row changed after the snapshot fails the look and stays
    /// unlocked. One changed between the look and the lock: the lock follows it to its newest
    /// version and rechecks the conditions there, and `xmin` (the version's creator) rejects it;
    /// it stays locked until this claim commits, as it did when the recheck compared turns.
    ///
    /// The lock is a `LATERAL` subquery the scan joins (`rl`), whose one row's `rat` is the
    /// locked row's ctid, or null when the user is skipped; the join keeps the rows
    /// where it is not null. The candidates carry it, so `held` updates the
    /// row by that ctid (a TID scan: the row is locked, so it cannot change before) instead of
    /// probing `recipients_pkey` a second time.
    ///
    /// - Important: a filter the planner estimates as passing almost every row (`IS NOT NULL`),
    ///   not a comparison of two scalar subqueries: the planner gives a comparison of subqueries
    ///   a selectivity of 0.5 %, and once the queue's statistics said a few thousand jobs were
    ///   due it expected fewer rows than the batch, so it fetched every due job, locking each
    ///   one's recipient, and sorted them (4 s claims, acks waiting on the locks). So estimated,
    ///   the claim walks the index in order and stops at the batch. `OFFSET 0` keeps the filter
    ///   out of the subquery (the lock runs once a row) and the subquery out of the join order
    ///   (it follows its job row).
    /// - Important: the look before the lock is as of now (sql/functions/03_enqueue.sql says
    ///   why), so a user taken meanwhile stays unlocked.
    static func lockRecipient(_ alias: String) -> String {
        """
        JOIN LATERAL (
                            SELECT (SELECT v.at FROM (SELECT rs.ctid AS at, rs.xmin AS made_by FROM herald.recipients rs
                                                      WHERE \(inBucket("rs")) AND rs.user_id = \(alias).user_id AND rs.lease_owner IS NULL
                                                        AND herald.recipient_unchanged_in_bucket(rs.bucket, rs.ctid)
                                                      OFFSET 0) v
                                    WHERE EXISTS (SELECT FROM herald.recipients r
                                                  WHERE \(inBucket("r")) AND r.ctid = v.at AND r.xmin = v.made_by
                                                  FOR UPDATE SKIP LOCKED)) AS rat
                            OFFSET 0) rl ON rl.rat IS NOT NULL
        """
    }

    /// - Important: every per-recipient lookup is a `LATERAL` subquery driven by the claimed
    ///   users, so it runs as one index probe per user whatever the statistics say. With
    ///   `user_id IN (…)` the planner, believing a fast-growing inbox empty, turned the unread
    ///   count into a nested loop over the whole inbox (2.5 s per claim).
    ///
    /// Claims up to `$4` due jobs, most urgent first, leasing them to `$1` until `$2 + $3` (epoch
    /// seconds), and returns in the same round trip everything the dispatcher needs about them.
    /// Within a priority, apps take turns (migration 0011): one app's flood does not hold back
    /// another app's jobs. Each app's section of the claim index is scanned separately, up to
    /// `$4` jobs each (only apps with due jobs find any), and the turns are interleaved. A user's
    /// jobs go in order within each app; a user with jobs in two apps may get the second app's
    /// first.
    ///
    /// One batch at a time holds a recipient (migration 0008): the claim locks the recipient rows
    /// of the due jobs it scans (`FOR UPDATE SKIP LOCKED`), skips users another batch holds or is
    /// taking, and marks the users of the jobs it claims as held, so a user's jobs are decided in
    /// order (priority, due time, id). A user whose row changed since this statement's snapshot
    /// (a newer row version: a batch took or freed it meanwhile, ``lockRecipient``) is left for
    /// the next claim: the history read below
    /// would miss that batch's sends. A user with an earlier due job the batch does not take is
    /// left whole too (``gapUsers``): a skip in the scan is whole only while the lock it met lasts.
    ///
    /// Rows are `(kind, record)`. Kinds: `j` job, `d` active device, `c` category, `p` preferences,
    /// `r` live presence, `s` recent sends (inbox, oldest first), `u` unread count (badge),
    /// `b` due backlog per category, `o` open summary, `w` a job waiting to be sent again, and from
    /// ``claimWithScopeTurns`` `l` where the scope walk ended in each app. Each kind's record holds
    /// the fields its ``ClaimColumns`` enum lists, in that order.
    ///
    /// Within an app, scopes take turns too (migration 0014), in ``claimWithScopeTurns``: it also
    /// walks up to ``scopeTurns`` of each app's scopes with pending jobs, after the worker's cursor
    /// (the `l` rows return where the walk ended), and takes up to ``scopeTurnJobs`` due jobs of
    /// each; the batch is then filled turn by turn. A job is claimed only with every earlier due
    /// job of its user among the candidates, so a user's jobs still go in order.
    ///
    /// One bucket at a time (migration 0015): every scan of a per-user table keeps to bucket `$6`,
    /// and so does the batch (its acknowledgement names the bucket too).
    ///
    /// With a critical lane, the batch slots leave critical work to it (``laneUsers``): a
    /// slot's claim of a whole batch is the slowest statement of the hot path (tens of ms under
    /// load), and a critical job it picked up waited for all of it.
    ///
    /// Binds: $1 worker id, $2 now (epoch s), $3 lease (s), $4 limit, $5 the least urgent priority
    /// rank to claim (3 = all; 0 = critical only, the critical lane), $6 the bucket, $7 the most
    /// urgent rank to claim (0 = all; 1 = the slots beside a critical lane).
    static let claim = PostgresStatement(name: "herald_claim_v39", sql: claimSQL(scopeTurns: false), genericPlan: true)

    /// ``claim`` with scopes taking turns: also walks each app's scopes and takes each walked
    /// scope's first due jobs (see ``claim``). Same binds, plus $8 the scope cursor per app (a
    /// JSON object, app id → the last scope walked); also returns `l` rows. The worker runs it
    /// while an app has several scopes pending (``appsWithSeveralScopes`` finds out every 250 ms
    /// while none has: ``Outbox/claim(limit:lease:now:through:from:)``).
    static let claimWithScopeTurns = PostgresStatement(
        name: "herald_claim_turns_v23",
        sql: claimSQL(scopeTurns: true),
        genericPlan: true
    )

    /// How many due jobs more urgent than the claim's first rank ($7) the slots leave to the
    /// critical lane; past that many (a flood of critical jobs) every claim takes them.
    package static let laneUsersLimit = 100

    /// The users the batch slots leave whole to the critical lane: those with a due job more
    /// urgent than `$7` in bucket `$6` (one index probe per app; none when `$7` is 0), as
    /// `lane_users (users, from_rank)`, the rank the slots claim from. A user is left whole, not
    /// just its critical jobs, so that whoever holds a user takes its jobs in order (priority,
    /// due time, id); the lane takes the critical ones, then the slots the rest. With
    /// ``laneUsersLimit`` or more such jobs (a flood) no user is left and `from_rank` is 0: the
    /// slots claim every rank as before, since the lane alone would be a bottleneck.
    /// A critical retry coming due has no NOTIFY: a slot's claim finds its user here and the
    /// slot signals the lane (the `q` row).
    static let laneUsers = """
                lane_users AS MATERIALIZED (
                    SELECT CASE WHEN count(*) < \(laneUsersLimit) THEN coalesce(array_agg(l.user_id), '{}') ELSE '{}' END AS users,
                           CASE WHEN count(*) < \(laneUsersLimit) THEN $7::smallint ELSE 0 END AS from_rank
                    FROM (SELECT u.user_id FROM (SELECT DISTINCT k.app_id FROM herald.categories k) a CROSS JOIN LATERAL (
                              SELECT c.user_id FROM herald.outbox c
                              WHERE \(inBucket("c")) AND c.app_id = a.app_id AND c.state = 'pending'
                                AND c.run_at <= to_timestamp($2::float8) AND c.priority < $7::smallint
                              ORDER BY c.priority, c.run_at, c.id
                              LIMIT \(laneUsersLimit)) u
                          LIMIT \(laneUsersLimit)) l
                )
        """

    /// `paused (names)`: the categories paused now, read once per claim through the pause gate
    /// (`herald.paused_for_claim`, sql/functions/08_control.sql) with a snapshot of its own, so a
    /// pause that committed while this statement ran is seen, and `herald.pause` waits for this
    /// claim to commit if it read without the pause. Their held jobs wait at 'infinity'; `taken`
    /// leaves one that turned pending since the last sweep (not the scan: an unknown array there
    /// made the planner sort the whole queue). NULL while a pause's transaction stays open.
    ///
    /// The critical lane's claim (`$5` = 0: critical jobs only) also commits without waiting for
    /// its WAL to reach disk (`synchronous_commit` off for this transaction; PostgreSQL writes it
    /// within `wal_writer_delay`, and any later durable commit, such as the batch's ack, flushes it
    /// first): the flush was a third of a critical job's median time from its enqueue's commit to
    /// its provider request while a broadcast drained. A claim lost with it in a crash of
    /// PostgreSQL leaves its jobs pending as before, so they are sent again: a critical job
    /// claimed in the last moments before the crash may reach a device twice (with the same
    /// collapse id), and is never lost. Every other claim, every ack and every enqueue stays
    /// durable (docs/faults.md).
    static let pausedGate = """
                paused AS MATERIALIZED (
                    SELECT herald.paused_for_claim()::text[] AS names
                    FROM (SELECT set_config('synchronous_commit',
                                            CASE WHEN $5::smallint = 0 THEN 'off' ELSE current_setting('synchronous_commit') END,
                                            true)) AS lane_commit
                )
        """

    /// On a claim's scan: the gate's read comes first, a one-time filter before the scan's first
    /// row, so a claim that waits for a pause's commit waits before it locks any recipient, and
    /// one that cannot know what is paused (NULL) scans and locks nothing.
    static let gateOpen = "(SELECT names FROM paused) IS NOT NULL"

    /// The slots' side of ``laneUsers`` on job row `alias` of a claim's scan: from `from_rank` on
    /// (an index condition), and not a user left to the lane.
    static func leftToLane(_ alias: String) -> String {
        """
        \(alias).priority >= (SELECT from_rank FROM lane_users)
                              AND \(alias).user_id <> ALL ((SELECT users FROM lane_users)::text[])
        """
    }

    /// Every send of each user in `$1` (text[]) since that user's time in `$2` (epoch s,
    /// float8[]), in bucket `$3`, from the inbox, as the claim's `s` rows carry them (user id, an
    /// array of ``SentColumn`` records, oldest first). Only for users whose recipient row may lack
    /// some of a window their jobs look back over (the row keeps the newest ``historyLimit`` of
    /// the day, and a flood of one category pushes another's older sends out of it); the batch
    /// holds them, so the inbox cannot gain a send of theirs meanwhile. One index range per user.
    static let sendsFromInbox = PostgresStatement(
        name: "herald_sends_from_inbox_v1",
        sql: """
            SELECT u.user_id, s.sends
            FROM unnest($1::text[], $2::float8[]) AS u(user_id, since) CROSS JOIN LATERAL (
                SELECT array_agg(\(SentColumn.row()) ORDER BY i.at, i.id) AS sends
                FROM (SELECT n.id, n.category, n.coalesce_key, n.scope, n.created_at AS at FROM herald.inbox n
                      WHERE \(inBucket("n", "$3")) AND n.user_id = u.user_id AND n.kind = 'notification'
                        AND n.created_at > to_timestamp(u.since)) i
            ) s
            WHERE s.sends IS NOT NULL
            """,
        genericPlan: true
    )

    /// The apps with more than one scope pending in bucket `$1` (`app_id` rows): two index probes
    /// per app, both landing on the newest entries of a scope. A worker whose apps have one scope
    /// pending each runs this every 250 ms instead of the scope walk in every claim.
    static let appsWithSeveralScopes = PostgresStatement(
        name: "herald_scopes_pending_v2",
        sql: """
            SELECT a.app_id FROM (SELECT DISTINCT k.app_id FROM herald.categories k) a
            WHERE \(lastScope(below: lastScope(alias: "m", bucket: "$1"), bucket: "$1")) IS NOT NULL
            """,
        genericPlan: true
    )

    /// The claim's SQL: the candidates (each app's queue, and with `scopeTurns` the walked
    /// scopes' turns), then what both variants share from the claim of the candidates on.
    private static func claimSQL(scopeTurns turns: Bool) -> String {
        (turns ? scopeTurnCandidates : queueCandidates) + claimAndContext(gapProbe: turns)
            + (turns ? "\n" + scopeCursorRows : "")
    }

    /// Each app's queue, apps taking turns.
    private static let queueCandidates = """
        WITH \(pausedGate), \(laneUsers), candidates AS (
            -- Each app's due jobs in order, along its own section of the claim index, locking
            -- their recipients (not the jobs), row by row as the index scan goes, in
            -- subqueries the planner cannot turn into a join (as a join it drove the claim
            -- from the recipients table and sorted the whole queue). A user another claim is
            -- taking (row locked) or a batch holds (`lease_owner`) is skipped whole, so every
            -- user taken is taken from its first due job on and its jobs go in order; a user
            -- whose row changed since this statement's snapshot (a batch took or freed it) is
            -- left for the next claim, because the history this statement reads would miss
            -- that batch's sends. Each job comes with its row version's ctid (`at`), which
            -- `taken` locks it by, and its recipient row's (`rat`), which `held` updates.
            --
            -- A user's run: the scan meets each user once in each app (at the user's first
            -- due job there; a later one is passed over before its lock), and takes with it
            -- the user's next due jobs in the app, in order, as many as the batch has room
            -- for: a batch takes a user's due jobs together (as claims before v38 did only
            -- when they lay in a row in the queue), and each user's probes below are paid
            -- once for all of them. Nothing between the scan and the limit sorts, so the scan
            -- stops once the batch is full.
            SELECT f.id, f.at, f.user_id, f.rat FROM (
                SELECT j.id, j.at, j.user_id, j.rat, j.priority,
                       row_number() OVER (PARTITION BY j.app_id ORDER BY j.n) AS place
                FROM (SELECT DISTINCT k.app_id FROM herald.categories k) a
                CROSS JOIN LATERAL (
                    \(userRuns(app: "a.app_id", columns: "ur.id, ur.at, c.user_id, c.rat, c.app_id, ur.priority, row_number() OVER () AS n"))
                ) j
            ) f
            -- Apps take turns within each priority: every app's first job, then every app's
            -- second, and so on (an app's jobs keep their order).
            ORDER BY f.priority, f.place, f.id
            LIMIT $4
        """

    /// The users' runs of app `app`'s queue (a user's run: see ``queueCandidates``): the scan of
    /// the app's section of the claim index meets each user once, at the user's first due job in
    /// the app (a later one is passed over by one probe of `outbox_user_queue` before its lock),
    /// locks the recipient, and takes the user's next due jobs in the app with it, in order (one
    /// range of the same index, `ur`: `id`, `at` its ctid, `priority`, `run_at`, and with
    /// `scopes` its `scope`); at most `$4` rows in all, selected as `columns` (of `c`, the user's
    /// first job with its recipient's `rat`, and `ur`). Nothing sorts between the scan and the limit.
    static func userRuns(app: String, columns: String, scopes: Bool = false) -> String {
        """
        SELECT \(columns)
                        FROM (SELECT c.user_id, rl.rat, c.app_id, c.priority, c.run_at, c.id
                              FROM herald.outbox c \(lockRecipient("c"))
                              WHERE \(inBucket("c")) AND c.app_id = \(app) AND c.state = 'pending'
                                AND c.run_at <= to_timestamp($2::float8) AND c.priority <= $5::smallint
                                AND \(leftToLane("c")) AND \(gateOpen)
                                -- The user's first due job in the app (its later ones come in its
                                -- run): one probe of `outbox_user_queue`, before the lock.
                                AND NOT \(earlierDueJobExists("e", than: "c", and: "e.priority >= (SELECT from_rank FROM lane_users)"))
                              ORDER BY c.priority, c.run_at, c.id
                              -- No more users than the batch has room for, whatever the plan.
                              LIMIT $4) c
                        CROSS JOIN LATERAL (
                            SELECT ur.id, ur.ctid AS at, ur.priority, ur.run_at\(scopes ? ", " + scopeKey("ur") + " AS scope" : "")
                            FROM herald.outbox ur
                            WHERE \(inBucket("ur")) AND ur.user_id = c.user_id AND ur.app_id = c.app_id
                              AND ur.state = 'pending' AND ur.priority <= $5::smallint
                              AND (ur.priority, ur.run_at, ur.id) >= (c.priority, c.run_at, c.id)
                              AND ur.run_at <= to_timestamp($2::float8)
                            ORDER BY ur.priority, ur.run_at, ur.id
                            LIMIT $4) ur
                        LIMIT $4
        """
    }

    /// Each app's queue and each walked scope's turn, apps and scopes taking turns.
    private static let scopeTurnCandidates = """
        WITH \(pausedGate), \(laneUsers), apps AS MATERIALIZED (
            SELECT DISTINCT k.app_id FROM herald.categories k
        ), lanes AS MATERIALIZED (
            -- Scopes take turns within an app: per app, up to \(scopeTurns) scopes with pending
            -- jobs (`options.scope`, '' for none), the first before this worker's cursor for
            -- the app ($8, `{app: scope}`), in descending order, wrapping round: a loose scan
            -- of `outbox_claim_scope`, one or two index probes per scope. Descending, because
            -- each probe then lands on a scope's newest entries (live), not on its oldest,
            -- which the claims have just taken and VACUUM has not yet removed (walking those
            -- dead entries, ascending, made every claim of a draining broadcast slower).
            SELECT a.app_id, w.scope, w.n, count(*) OVER (PARTITION BY a.app_id) AS lanes
            FROM apps a CROSS JOIN LATERAL (
                WITH RECURSIVE walk(scope, first, n) AS (
                    SELECT s.scope, s.scope, 1 FROM (SELECT \(scopeBefore("($8::jsonb->>a.app_id)")) AS scope) s
                    WHERE s.scope IS NOT NULL
                    UNION ALL
                    SELECT nx.scope, w.first, w.n + 1
                    FROM walk w CROSS JOIN LATERAL (SELECT \(scopeBefore("w.scope")) AS scope) nx
                    WHERE w.n < \(scopeTurns) AND nx.scope <> w.first
                ) SELECT scope, n FROM walk) w
        ), queue AS (
            -- Each app's due jobs in order, as the users' runs the plain claim takes
            -- (``queueCandidates``, whose comment says why each step is as it is): a user's
            -- due jobs in the app come together, its later ones in other scopes too (placed
            -- below in their own scope's turns; a user's jobs still go in order).
            SELECT j.* FROM apps a CROSS JOIN LATERAL (
                \(userRuns(app: "a.app_id", columns: "ur.id, ur.at, c.rat, c.app_id, ur.scope, c.user_id, ur.priority, ur.run_at", scopes: true))
                ) j
        ), turns AS (
            -- The first due jobs of each walked scope, along its section of
            -- `outbox_claim_scope` (only in apps with more than one scope pending: otherwise
            -- the app's queue above is that scope). A user whose first due job in the app lies
            -- in another scope is left to that scope: a user's jobs go in order.
            SELECT j.* FROM lanes l CROSS JOIN LATERAL (
                SELECT c.id, c.ctid AS at, rl.rat, c.app_id, \(scopeKey("c")) AS scope, c.user_id, c.priority, c.run_at
                FROM herald.outbox c \(lockRecipient("c"))
                WHERE \(inBucket("c")) AND c.app_id = l.app_id AND \(scopeKey("c")) = l.scope AND c.state = 'pending'
                  AND c.run_at <= to_timestamp($2::float8) AND c.priority <= $5::smallint
                  AND NOT \(earlierDueJobExists("e", than: "c", and: "\(scopeKey("e")) <> l.scope"))
                  AND \(leftToLane("c")) AND \(gateOpen)
                ORDER BY c.priority, c.run_at, c.id
                LIMIT \(scopeTurnJobs)) j
            WHERE l.lanes > 1
        ), ranked AS (
            -- Turns within each priority: every app's first job, then every app's second, and
            -- so on; within an app, every scope's first, every scope's second… (each scope's
            -- jobs keep their order).
            SELECT id, at, rat, user_id, priority, run_at,
                   row_number() OVER (ORDER BY priority, app_place, id) AS pos
            FROM (SELECT id, at, rat, user_id, priority, run_at,
                         row_number() OVER (PARTITION BY app_id ORDER BY priority, scope_place, id) AS app_place
                  FROM (SELECT id, at, rat, app_id, user_id, priority, run_at,
                               row_number() OVER (PARTITION BY app_id, scope ORDER BY priority, run_at, id) AS scope_place
                        FROM (SELECT * FROM queue UNION SELECT * FROM turns) q) s) p
        ), candidates AS (
            -- The batch's worth in that order, except a job whose user has an earlier job
            -- (priority, due time, id) left out: a user's jobs go in order.
            SELECT id, at, user_id, rat FROM (
                SELECT id, at, user_id, rat, max(pos) OVER (PARTITION BY user_id ORDER BY priority, run_at, id) AS reach
                FROM ranked) r
            WHERE reach <= $4
        """

    /// From the claim of the candidates on: lease them, hold their users, and read the context.
    /// `gapProbe`: whether `gaps` probes each user's queue for an earlier due job (``gapUsers(probe:)``).
    private static func claimAndContext(gapProbe: Bool) -> String {
        """
        ), taken AS MATERIALIZED (
            -- The candidates' job rows, each fetched by the ctid the scan read it at (a TID
            -- scan per candidate: no primary-key probe; one equality per row, so no other
            -- index looks cheaper to the planner whatever the statistics say: with
            -- `ctid = ANY (…)` and statistics from a drained queue it walked an index of the
            -- whole queue instead). Rows another statement has locked (a pause's hold, a
            -- cancel) are skipped, not waited for: a claim never waits, so one that began
            -- before a pause commits before the pause returns. A row changed since the scan
            -- read it is followed to its newest version by the lock, and then either checked
            -- there or, where PostgreSQL's recheck of a TID scan compares the ctid, left out;
            -- either way a hold committed meanwhile (run_at 'infinity') is not taken, and a
            -- row left out leaves its user whole (`gaps`). A paused category's rows are not
            -- locked at all (the hold would skip them). Each row comes with the ctid of the
            -- version locked (`at`): `claimed` updates it by that.
            SELECT j.id, j.at, j.user_id, j.app_id, j.priority, j.run_at FROM candidates c CROSS JOIN LATERAL (
                SELECT x.id, x.ctid AS at, x.user_id, x.app_id, x.priority, x.run_at FROM herald.outbox x
                WHERE x.ctid = c.at AND \(inBucket("x"))
                  AND x.state = 'pending' AND x.run_at <= to_timestamp($2::float8)
                  AND \(notPaused("x"))
                FOR UPDATE SKIP LOCKED) j
        ), \(gapUsers(probe: gapProbe))
        ), claimed AS (
            UPDATE herald.outbox o
            SET state = 'running', attempt = o.attempt + 1, lease_owner = $1,
                lease_expires_at = to_timestamp($2::float8 + $3::float8)
            -- By ctid (a TID scan, no primary-key probe): `taken` locked each of these rows at
            -- the version its scan read (`gaps` leaves out a user whose row the lock found at
            -- another), and a locked row cannot change before this update.
            WHERE \(inBucket("o")) AND o.ctid = ANY (ARRAY(
                    SELECT t.at FROM taken t WHERE t.user_id <> ALL (ARRAY(SELECT user_id FROM gaps))))
            RETURNING o.*
        ), held AS (
            -- A recipient is held exactly while it has jobs running: those just claimed.
            -- The row also carries the user's unread count (the badge), kept by the inbox.
            -- And its recent sends (migration 0016), kept by the inbox's triggers.
            -- By the ctid the scan locked each row at (a TID scan, no second primary-key
            -- probe): locked, the row cannot have changed since.
            UPDATE herald.recipients r SET lease_owner = $1, turn = r.turn + 1
            WHERE \(inBucket("r")) AND r.ctid = ANY (ARRAY(
                    SELECT DISTINCT c.rat FROM candidates c WHERE c.user_id IN (SELECT user_id FROM claimed)))
            RETURNING r.user_id, r.unread, r.sends
        ), users AS (
            SELECT user_id FROM held
        ), \(gates)
        ), looks AS MATERIALIZED (
            -- The batch's categories that read send history (coalescing, rate limits), with
            -- the longest window each looks back over (`lookBack`; due backlogs are
            -- `backlogs` below).
            SELECT k.name, \(lookBack("k")) AS look FROM herald.categories k
            WHERE k.name IN (SELECT category FROM claimed) AND (k.coalesce <> '{}' OR k.rate_limit <> '{}')
        ), needs AS (
            -- Per user with a job in such a category, `reach`: the longest window that user's
            -- own jobs look back over, in seconds, plus one (capped at the day the row keeps).
            -- Sends older than that decide nothing for them in this batch and are not sent to
            -- the worker; a user whose jobs read no history gets no `s` row at all.
            SELECT c.user_id, least(\(historyWindow), coalesce(max(k.look), 0)) + 1 AS reach
            FROM claimed c JOIN looks k ON k.name = c.category
            GROUP BY c.user_id
        ), backlogs AS MATERIALIZED (
            -- The batch's categories that summarize a long due backlog, and how far to count:
            -- the policy only asks whether a user's backlog passes `summarizeAbove` (an
            -- integer ≥ 1, as the policy reads it), so a count stops one past it, however many
            -- jobs a user has waiting.
            SELECT k.name, k.app_id, c.cap FROM herald.categories k
            CROSS JOIN LATERAL (SELECT k.coalesce->'summarizeAbove' AS above) a
            CROSS JOIN LATERAL (
                SELECT CASE WHEN jsonb_typeof(a.above) = 'number' AND a.above::text::numeric >= 1
                             AND a.above::text::numeric = trunc(a.above::text::numeric)
                       THEN least(a.above::text::numeric, 1000000000)::bigint + 1 END AS cap) c
            WHERE k.name IN (SELECT category FROM claimed) AND c.cap IS NOT NULL
        )
        \(JobColumn.selectList()) FROM claimed
        UNION ALL
        \(DeviceColumn.selectList()) FROM users u CROSS JOIN LATERAL (
            SELECT * FROM herald.devices d WHERE \(inBucket("d")) AND d.user_id = u.user_id AND d.active) d
        UNION ALL
        \(CategoryColumn.selectList()) FROM herald.categories k WHERE k.name IN (SELECT category FROM claimed)
        UNION ALL
        \(PreferencesColumn.selectList())
        FROM users u CROSS JOIN LATERAL (SELECT * FROM herald.preferences p WHERE \(inBucket("p")) AND p.user_id = u.user_id) p
        WHERE (SELECT g.preferences FROM gates g)
        UNION ALL
        \(PresenceColumn.selectList())
        FROM users u CROSS JOIN LATERAL (
            SELECT * FROM herald.presence r
            WHERE \(inBucket("r")) AND r.user_id = u.user_id AND r.expires_at > to_timestamp($2::float8)) r
        WHERE (SELECT g.presence FROM gates g)
        UNION ALL
        \(SendsColumn.selectList())
        FROM held u JOIN needs n ON n.user_id = u.user_id CROSS JOIN LATERAL (
            -- One row per recipient: its sends of the window as an array of records, from the
            -- row the claim holds (no read of the inbox), oldest first as the row keeps them
            -- (herald.append_sends); no sort here, and the policy sorts what it counts. The row
            -- keeps the newest \(historyLimit): with the list's length and its oldest send, the
            -- worker sees when a full list may lack older sends of a window one of the user's
            -- jobs looks back over (another category's flood pushed them out), and then reads
            -- that user's window from the inbox (`sendsFromInbox`).
            SELECT array_agg(\(SentColumn.row())) AS sends, cardinality(u.sends) AS size,
                   (u.sends[1]).at AS oldest
            FROM unnest(u.sends) AS i
            WHERE i.at > to_timestamp($2::float8) - make_interval(secs => n.reach)
        ) h
        WHERE h.sends IS NOT NULL
        UNION ALL
        \(UnreadColumn.selectList()) FROM held h WHERE h.unread > 0
        UNION ALL
        -- The statement's snapshot still sees this batch's rows as pending: they are counted here.
        \(BacklogColumn.selectList())
        FROM users u CROSS JOIN backlogs k CROSS JOIN LATERAL (
            SELECT k.name AS category, count(*) AS n FROM (
                SELECT FROM herald.outbox b
                WHERE \(inBucket("b")) AND b.user_id = u.user_id AND b.app_id = k.app_id AND b.category = k.name
                  AND b.state = 'pending'
                  AND b.run_at <= to_timestamp($2::float8) AND b.summary_key IS NULL
                LIMIT k.cap) x
        ) q
        WHERE q.n > 0
        UNION ALL
        \(OpenSummaryColumn.selectList())
        FROM users u CROSS JOIN LATERAL (
            SELECT category, summary_key, run_at FROM herald.outbox m
            WHERE \(inBucket("m")) AND m.user_id = u.user_id AND state = 'pending' AND summary_key IS NOT NULL) q
        WHERE (SELECT g.summaries FROM gates g)
        UNION ALL
        -- Jobs of the user waiting to be sent again (this batch's own included: the snapshot
        -- still sees them pending); a device's newer jobs wait behind them. The oldest 100: a
        -- job due before a later one of these is held again when it comes round.
        \(RetryingColumn.selectList())
        FROM users u CROSS JOIN LATERAL (
            SELECT id, priority, run_at, accepted_devices FROM herald.outbox w
            WHERE \(inBucket("w")) AND w.user_id = u.user_id AND state = 'pending' AND retrying
            ORDER BY id LIMIT \(historyLimit)) q
        WHERE (SELECT g.retrying FROM gates g)
        UNION ALL
        \(LaneUsersColumn.selectList()) FROM lane_users l WHERE cardinality(l.users) > 0
        """
    }

    /// `gaps (user_id)`: the users of `taken` with an earlier due job in the same app that this
    /// claim does not take, and the users of a candidate whose job row was not taken; the claim
    /// leaves them whole (their recipient rows, locked by its scan, are not held and come free
    /// at its commit).
    ///
    /// The scan skips a user whose recipient row another claim has locked, and that is meant to
    /// skip the user whole; but a claim locks the rows of every user its scan passes, and the
    /// jobs its batch then leaves out (past another app's turns, past the scope turns' reach)
    /// leave those users locked, not held, until it commits. If it commits while this scan is
    /// between two jobs of such a user, the scan skipped the first and locks the row at the
    /// second: without this check the batch took the user's later jobs before its earlier ones
    /// (seen in the 4 × 4 test on a loaded machine: a user's first five updates decided after
    /// the three after them). Any other statement that locks the row and changes it in place
    /// (the inbox trigger's upsert when an app marks a notification read) does the same, and so
    /// does a job row a pause or a cancel has locked (skipped in `taken`, the later ones not):
    /// the probe catches it when it is the user's first, the second part anywhere else (a
    /// cancel inside a backend's transaction that then rolls back leaves the job due).
    /// With `probe` (the scope-turns claim, whose candidates can start mid-queue): one probe of
    /// `outbox_user_queue` (migration 0020) per user and app of the batch, landing on the user's
    /// first pending job in the app (this batch's own, when there is no gap), read in the
    /// statement's snapshot like the scan (a job taken by a claim that committed after it belongs
    /// to a user whose row that claim holds, which this scan did not lock); the probe is
    /// ``earlierDueJobExists(_:than:and:)``, one subquery per user whatever the statistics say.
    /// The plain claim has no such part: its scan already made that probe, in the same snapshot,
    /// before it locked the user's row (a user's first due job in the app or nothing), and a
    /// user's first taken job is either the scan's row (no earlier due job, by that probe) or a
    /// later one of its run, after a candidate not taken, which the second part finds.
    private static func gapUsers(probe: Bool) -> String {
        let firstPart =
            probe
            ? """
                SELECT f.user_id FROM (
                    SELECT DISTINCT ON (t.user_id, t.app_id) t.user_id, t.app_id, t.priority, t.run_at, t.id
                    FROM taken t ORDER BY t.user_id, t.app_id, t.priority, t.run_at, t.id) f
                WHERE \(earlierDueJobExists("e", than: "f", and: "\(leftToLane("e")) AND \(notPaused("e"))"))
                UNION ALL

            """ : ""
        return """
            gaps AS (
            \(firstPart)    -- A candidate whose job row was not taken (another statement has it locked, or
                -- changed it since the scan read it), wherever it lies among the user's: the
                -- user's jobs after it must not go first. Usually none, and then no read at all.
                -- Taken at another version than the scan read counts as not taken: where
                -- PostgreSQL's recheck of a TID scan does not compare the ctid, the lock follows a
                -- changed row to its newest version, which this statement's snapshot (and so
                -- `claimed`'s TID scan) cannot see.
                SELECT d.user_id FROM herald.outbox d
                WHERE \(inBucket("d")) AND d.id = ANY (ARRAY(
                        SELECT c.id FROM candidates c
                        WHERE NOT EXISTS (SELECT FROM taken t WHERE t.id = c.id AND t.at = c.at)))
                  AND \(notPaused("d"))
            """
    }

    /// `gates (preferences, presence, summaries, retrying)`: whether bucket `$6` has any
    /// preferences, presence (live or not yet swept), open summary jobs, jobs waiting to be sent
    /// again (migration 0021: the first entry of an index led by the bucket, once per claim).
    /// The claim reads those per user only when its bucket has some: otherwise each is a probe
    /// per user that finds nothing (2,000 of the ~19,500 buffer visits of a sink claim of 500).
    /// Read in the statement's snapshot, as the per-user reads are, so a gate is closed only
    /// when those reads would all have come back empty.
    private static let gates = """
        gates AS MATERIALIZED (
            SELECT EXISTS (SELECT FROM herald.preferences gp WHERE \(inBucket("gp"))) AS preferences,
                   EXISTS (SELECT FROM herald.presence gr WHERE \(inBucket("gr"))) AS presence,
                   EXISTS (SELECT FROM herald.outbox gm
                           WHERE \(inBucket("gm")) AND gm.state = 'pending' AND gm.summary_key IS NOT NULL) AS summaries,
                   EXISTS (SELECT FROM herald.outbox gw
                           WHERE \(inBucket("gw")) AND gw.state = 'pending' AND gw.retrying) AS retrying
        """

    /// Job row `alias` is not of a category paused now (the claim's `paused`, read once).
    static func notPaused(_ alias: String) -> String {
        "\(alias).category <> ALL ((SELECT names FROM paused)::text[])"
    }

    /// Job row `alias` is a due pending job of the same user and app as job `job` (a row with
    /// `user_id`, `app_id`, `priority`, `run_at`, `id`), within the claim's priority bound, and
    /// comes before it in claim order: a range of `outbox_user_queue` (migration 0020).
    static func earlierDueJob(_ alias: String, than job: String) -> String {
        """
        \(inBucket(alias)) AND \(alias).user_id = \(job).user_id AND \(alias).app_id = \(job).app_id \
        AND \(alias).state = 'pending' \
        AND (\(alias).priority, \(alias).run_at, \(alias).id) < (\(job).priority, \(job).run_at, \(job).id) \
        AND \(alias).run_at <= to_timestamp($2::float8) AND \(alias).priority <= $5::smallint
        """
    }

    /// Whether job `job` has an ``earlierDueJob(_:than:)`` (row `alias`) that also meets
    /// `conditions`: one probe of `outbox_user_queue` per outer row.
    ///
    /// - Important: `OFFSET 0` keeps it a subquery run once per outer row, its index condition
    ///   bound to that row's user, whatever the statistics say. As a semi-join (the planner may
    ///   make one of an `EXISTS`), planned from statistics saying the outbox was empty (taken after
    ///   a drain, before a burst; autovacuum's next ANALYZE is up to a minute away), the claim's
    ///   gap check walked `outbox_user_queue` whole per claimed user: a claim of 500 on 50,000 due
    ///   jobs took 24 s, 0.6–0.9 s with this (docs/benchmarks.md, "Statistics from a drained
    ///   queue"; the maintenance leader then analyzes the outbox, `herald.refresh_queue_statistics`).
    static func earlierDueJobExists(_ alias: String, than job: String, and conditions: String) -> String {
        """
        EXISTS (SELECT FROM herald.outbox \(alias)
                WHERE \(earlierDueJob(alias, than: job)) AND \(conditions)
                OFFSET 0)
        """
    }

    /// Where each app's scope walk ended.
    private static let scopeCursorRows = """
        UNION ALL
        \(ScopeCursorColumn.selectList()) FROM lanes l WHERE l.n = l.lanes
        """

    /// The acknowledgement's row kinds (migration 0012), one bind each.
    static let settledJob = PostgresCompositeType(
        "herald.settled_job",
        fields: ["id", "state", "run_at", "error", "refund", "alert", "retrying", "fold_key", "fold_due"]
    )
    static let acceptedDevice = PostgresCompositeType("herald.accepted_device", fields: ["job_id", "device_id"])
    static let logRecord = PostgresCompositeType(
        "herald.log_record",
        fields: [
            "job_id", "user_id", "category", "device_id", "provider", "event", "outcome", "status", "reason",
            "attempt", "latency_ms",
        ]
    )
    static let disabledDevice = PostgresCompositeType("herald.disabled_device", fields: ["id", "reason"])
    package static let inboxRecord = PostgresCompositeType(
        "herald.inbox_record",
        fields: [
            "job_id", "user_id", "category", "title", "body", "route", "metadata", "coalesce_key", "scope",
            "summary_count",
        ]
    )
    /// Every composite type a statement binds (checked against the database by `SchemaTests`).
    package static var compositeTypes: [PostgresCompositeType] {
        [settledJob, acceptedDevice, logRecord, disabledDevice, inboxRecord, localRecord]
            + ExpoReceiptStatements.compositeTypes
    }

    /// The states a settlement can leave the outbox in, in the order `settled`'s `gone_codes` number them.
    static let goneStates: [JobState] = JobState.allCases.filter { $0 != .pending }
    /// ``goneStates`` as a SQL array of their names (1-based: a `gone_codes` entry modulo 16).
    static var goneStateNames: String { "'{\(goneStates.map(\.rawValue).joined(separator: ","))}'::text[]" }

    /// `settled`: the batch's settlements as one row of arrays sorted by job id, which the ack's
    /// writes search (``again``, ``goneCode``, ``odd(_:)``: `width_bucket`, a binary search)
    /// instead of joining the settlements to the outbox. Retries (`again_…`, state `pending`):
    /// the ids, the time each runs again, its error, and its flags (1 refund the attempt, 2 alert,
    /// 4 waits to be sent again). The rest (`gone_…`): the ids and each one's code, its state's
    /// place in ``goneStateNames`` plus 16 for an alert. The dead and the folded (`odd_…`, few):
    /// their ids and whole settlements, for the error and the fold's key and due time. And the
    /// devices that accepted each job (`accepted_jobs`, sorted, beside `accepted_devices`): a
    /// job's devices are the slice from its first entry to its last. Fixed-width arrays where
    /// every row reads them: PostgreSQL finds an element of an array of variable-width values by
    /// walking from its start, and each array sorted here is a sort of its own.
    private static let settledArrays = """
        settled AS MATERIALIZED (
                SELECT * FROM (SELECT array_agg(j.id ORDER BY j.id) FILTER (WHERE j.state = 'pending') AS again_ids,
                             array_agg(j.run_at ORDER BY j.id) FILTER (WHERE j.state = 'pending') AS again_at,
                             array_agg(j.error ORDER BY j.id) FILTER (WHERE j.state = 'pending') AS again_errors,
                             array_agg(j.refund::int + 2 * j.alert::int + 4 * j.retrying::int ORDER BY j.id)
                                 FILTER (WHERE j.state = 'pending') AS again_flags,
                             array_agg(j.id ORDER BY j.id) FILTER (WHERE j.state <> 'pending') AS gone_ids,
                             array_agg(array_position(\(goneStateNames), j.state) + 16 * j.alert::int ORDER BY j.id)
                                 FILTER (WHERE j.state <> 'pending') AS gone_codes,
                             array_agg(j.id ORDER BY j.id) FILTER (WHERE j.state IN ('dead', 'summarized')) AS odd_ids,
                             array_agg(j ORDER BY j.id) FILTER (WHERE j.state IN ('dead', 'summarized')) AS odd
                      FROM unnest($2::herald.settled_job[]) AS j) s
                CROSS JOIN (
                    SELECT coalesce(array_agg(a.job_id ORDER BY a.job_id, a.n), '{}') AS accepted_jobs,
                           coalesce(array_agg(a.device_id ORDER BY a.job_id, a.n), '{}') AS accepted_devices
                    FROM unnest($3::herald.accepted_device[]) WITH ORDINALITY AS a(job_id, device_id, n)) a
            )
        """
    /// The place of retried row `o`'s settlement in `settled`'s `again_…` arrays.
    private static let again = "width_bucket(o.id, k.again_ids)"
    /// Finished row `o`'s code in `settled` (its state's place in ``goneStateNames``, plus 16 for
    /// an alert).
    private static let goneCode = "k.gone_codes[width_bucket(o.id, k.gone_ids)]"
    /// The settlement of dead or folded row `alias` (`odd`).
    private static func odd(_ alias: String) -> String { "k.odd[width_bucket(\(alias).id, k.odd_ids)]" }

    /// Acknowledges a whole batch: retries and deferrals go back to `pending`, finished jobs leave
    /// the hot table, dead ones move to `dead_letters` (critical ones also leave an inbox alert,
    /// unless their deadline already left one; a pending job past its deadline leaves it now, and
    /// a delivered one resolves it),
    /// delivered notifications get their inbox row, folded jobs join (or open) their summary job,
    /// the delivery log gets every record, and dead tokens disable their devices.
    ///
    /// Binds: $1 worker; then one array per row kind: $2 `herald.settled_job[]` (every job of
    /// the batch), $3 `herald.accepted_device[]`, $4 `herald.log_record[]`,
    /// $5 `herald.disabled_device[]`, $6 `herald.inbox_record[]`, $7 the batch's bucket (a batch
    /// is one bucket: its claim's). Returns how many jobs this worker still owned.
    ///
    /// - Important: the fence is `lease_owner = $1` alone (every exit from `running` clears the
    ///   owner). The batch's rows are reached through the primary key by an array of their ids
    ///   (`id = ANY (…)`, an index condition whatever the statistics say), and nothing joins the
    ///   outbox to the settlements: each row finds its settlement in ``settledArrays`` by binary
    ///   search (`width_bucket` over the sorted ids). As a join (`USING` the settlements), planned
    ///   from statistics that said the outbox was empty (taken after a drain), the ack walked the
    ///   whole primary key twice, once for the retries and once for the rest, and with a generic
    ///   plan matched each row against every settlement: 78–117 ms an ack of 500 on a 50,000-job
    ///   queue, growing with the queue; 13–19 ms now (docs/benchmarks.md, "The ack and the
    ///   job-row lock on statistics from a drained queue"). Nothing joins two batch-long sets either:
    ///   that ran as a nested loop (quadratic in the batch size). Folds into the same summary are
    ///   grouped first: one upsert may not touch a row twice.
    static let acknowledge = PostgresStatement(
        name: "herald_ack_v13",
        sql: """
            WITH \(settledArrays), retried AS (
                UPDATE herald.outbox o
                SET state = 'pending', run_at = to_timestamp(k.again_at[\(again)]), lease_owner = NULL,
                    lease_expires_at = NULL, last_error = k.again_errors[\(again)],
                    attempt = o.attempt - (k.again_flags[\(again)] & 1),
                    accepted_devices = o.accepted_devices
                        || k.accepted_devices[width_bucket(o.id - 1, k.accepted_jobs) + 1:width_bucket(o.id, k.accepted_jobs)],
                    alerted_at = CASE WHEN k.again_flags[\(again)] & 2 <> 0 THEN now() ELSE o.alerted_at END,
                    retrying = k.again_flags[\(again)] & 4 <> 0
                FROM settled k
                WHERE \(inBucket("o", "$7")) AND o.id = ANY ((SELECT again_ids FROM settled)::bigint[]) AND o.lease_owner = $1
                RETURNING o.id, o.user_id, o.category, o.payload, k.again_flags[\(again)] & 2 <> 0 AS alert
            ), finished AS (
                -- Each finished row with its settlement's state and alert flag; the parts below
                -- that need more of a settlement (a dead job's error, a fold's key) look it up.
                DELETE FROM herald.outbox o USING settled k
                WHERE \(inBucket("o", "$7")) AND o.id = ANY ((SELECT gone_ids FROM settled)::bigint[]) AND o.lease_owner = $1
                RETURNING o.id, o.user_id, o.category, o.payload, o.options, o.dedup_key, o.attempt, o.created_at,
                          o.priority, o.max_attempts, o.expires_at, o.alerted_at, o.app_id,
                          (\(goneStateNames))[\(goneCode) % 16] AS settled, \(goneCode) >= 16 AS alert
            ), dead AS (
                INSERT INTO herald.dead_letters
                    (job_id, user_id, category, payload, options, dedup_key, attempts, last_error, enqueued_at)
                SELECT f.id, f.user_id, f.category, f.payload, f.options, f.dedup_key, f.attempt,
                       coalesce((SELECT (\(odd("f"))).error FROM settled k), 'unknown'), f.created_at
                FROM finished f WHERE f.settled = 'dead'
                ON CONFLICT (job_id) DO NOTHING
                RETURNING job_id
            ), alerts AS (
                -- A job alerted when its deadline passed (alerted_at) gets no second alert.
                INSERT INTO herald.inbox (user_id, job_id, kind, category, title, body, route, metadata)
                SELECT f.user_id, f.id, 'alert', f.category, f.payload->>'title', f.payload->>'body',
                       f.payload->>'route', coalesce(f.payload->'metadata', '{}')
                FROM (SELECT id, user_id, category, payload FROM finished WHERE alerted_at IS NULL AND alert
                      UNION ALL SELECT id, user_id, category, payload FROM retried WHERE alert) f
                RETURNING job_id, user_id
            ), resolved AS (
                -- Delivered after its deadline alert: the alert is resolved; the app may hide it.
                UPDATE herald.inbox i SET resolved_at = now()
                WHERE \(inBucket("i", "$7")) AND i.kind = 'alert' AND i.resolved_at IS NULL AND i.job_id = ANY (ARRAY(
                    SELECT f.id FROM finished f WHERE f.settled = 'done' AND f.alerted_at IS NOT NULL))
            ), shown AS (
                INSERT INTO herald.inbox
                    (job_id, user_id, category, title, body, route, metadata, coalesce_key, scope, summary_count)
                SELECT x.job_id, x.user_id, x.category, x.title, x.body, x.route, coalesce(x.metadata, '{}'), x.coalesce_key,
                       x.scope, x.summary_count
                FROM unnest($6::herald.inbox_record[]) AS x
                WHERE x.job_id IN (SELECT id FROM finished)
                RETURNING id, user_id, category, coalesce_key, scope, created_at
            ), folds AS (
                SELECT f.id, f.user_id, f.category, f.app_id, f.payload, f.options, f.priority, f.max_attempts,
                       (x.settlement).fold_key AS key, (x.settlement).fold_due AS due
                FROM finished f CROSS JOIN LATERAL (SELECT \(odd("f")) AS settlement FROM settled k) x
                WHERE f.settled = 'summarized' AND (x.settlement).fold_key IS NOT NULL
            ), grouped AS (
                SELECT user_id, category, min(app_id) AS app_id, key, count(*)::int AS n, max(due) AS due,
                       min(priority) AS priority,
                       max(max_attempts) AS max_attempts,
                       (array_agg(payload ORDER BY id DESC))[1] AS payload,
                       (array_agg(options ORDER BY id DESC))[1] AS options,
                       (array_agg(id ORDER BY id DESC))[1:herald.max_summary_items()] AS ids,
                       (array_agg(coalesce(payload->>'title', '') ORDER BY id DESC))[1:herald.max_summary_items()] AS titles
                FROM folds GROUP BY user_id, category, key
            ), summaries AS (
                INSERT INTO herald.outbox AS o
                    (user_id, category, app_id, priority, payload, options, run_at, expires_at, max_attempts,
                     summary_key, summary_count, summarized_ids, summarized_titles)
                SELECT g.user_id, g.category, g.app_id, g.priority, g.payload,
                       (g.options - 'dedupKey' - 'deliverAt' - 'expiresAt' - 'collapseId')
                           || jsonb_build_object('summary', true),
                       to_timestamp(g.due), to_timestamp(g.due) + interval '1 day', g.max_attempts, g.key, g.n,
                       g.ids, g.titles
                FROM grouped g
                ON CONFLICT (user_id, category, summary_key) WHERE summary_key IS NOT NULL AND state = 'pending'
                DO UPDATE SET summary_count = o.summary_count + EXCLUDED.summary_count, payload = EXCLUDED.payload,
                    summarized_ids = (EXCLUDED.summarized_ids || o.summarized_ids)[1:herald.max_summary_items()],
                    summarized_titles = (EXCLUDED.summarized_titles || o.summarized_titles)[1:herald.max_summary_items()],
                    options = EXCLUDED.options, run_at = greatest(o.run_at, EXCLUDED.run_at),
                    expires_at = greatest(o.expires_at, EXCLUDED.expires_at),
                    priority = least(o.priority, EXCLUDED.priority)
            ), owned AS (
                SELECT id FROM retried UNION ALL SELECT id FROM finished
            ), added AS MATERIALIZED (
                -- Per user of the batch, what this statement's inbox rows add to the recipient
                -- row: unread rows (the badge) and sends (oldest first, as the inbox trigger
                -- would append them; `counted` below tells that trigger to leave them to this).
                -- In user order, which `released` locks the rows in (the probes follow it), as
                -- every statement that locks several recipient rows does: no deadlock.
                SELECT a.user_id, count(*) FILTER (WHERE a.unread) AS unread,
                       coalesce(array_agg(ROW(a.category, a.coalesce_key, a.scope, a.at)::herald.recent_send
                                          ORDER BY a.at, a.id) FILTER (WHERE a.send), '{}') AS sends
                FROM (SELECT user_id, NULL::bigint AS id, NULL::text AS category, NULL::text AS coalesce_key,
                             NULL::text AS scope, NULL::timestamptz AS at, false AS unread, false AS send
                      FROM retried
                      UNION ALL
                      SELECT user_id, NULL, NULL, NULL, NULL, NULL, false, false FROM finished
                      UNION ALL
                      SELECT user_id, id, category, coalesce_key, scope, created_at, true, true FROM shown
                      UNION ALL
                      SELECT user_id, NULL, NULL, NULL, NULL, NULL, true, false FROM alerts) a
                GROUP BY a.user_id
                ORDER BY a.user_id
            ), released AS (
                -- The batch's recipients go back with the writes above, atomically: the next
                -- claim of one of these users sees this batch's inbox rows and summaries. The
                -- same new row version carries the inbox rows' unread count and sends (one version
                -- per user, not a second one from the inbox trigger). A row this worker no longer
                -- holds still gets its counts (there is none: every inbox row here is of a job
                -- this worker owned, and so held its user), but keeps its holder.
                UPDATE herald.recipients r
                SET lease_owner = CASE WHEN r.lease_owner = $1 THEN NULL ELSE r.lease_owner END,
                    turn = r.turn + CASE WHEN r.lease_owner = $1 THEN 1 ELSE 0 END,
                    unread = r.unread + a.unread,
                    sends = herald.append_sends(r.sends, a.sends)
                FROM added a
                WHERE \(inBucket("r", "$7")) AND r.user_id = a.user_id AND (r.lease_owner = $1 OR a.unread > 0)
            ), counted AS (
                -- The inbox trigger (herald.inbox_unread) leaves this statement's inserts alone:
                -- `released` counted them. Local to this transaction, which is this statement.
                SELECT set_config('herald.inbox_counted', 'on', true)
            ), logged AS (
                INSERT INTO herald.delivery_log
                    (job_id, user_id, category, device_id, provider, event, outcome, status, reason, attempt,
                     latency_ms, worker)
                SELECT l.job_id, l.user_id, l.category, l.device_id, l.provider, l.event, l.outcome, l.status,
                       l.reason, l.attempt, l.latency_ms, $1
                FROM unnest($4::herald.log_record[]) AS l
                WHERE l.job_id IN (SELECT id FROM owned)
            ), disabled AS (
                UPDATE herald.devices d SET active = false, disabled_reason = x.reason, disabled_at = now()
                FROM unnest($5::herald.disabled_device[]) AS x
                WHERE \(inBucket("d", "$7")) AND d.id = x.id AND d.active
                RETURNING d.id
            ), events AS (
                -- Status events for backends (LISTEN herald_events), delivered at commit; none when
                -- nothing happened. 300 ids per notification keep each payload under
                -- PostgreSQL's 8,000-byte limit.
                SELECT e.kind, e.id, (row_number() OVER () - 1) / 300 AS chunk
                FROM (SELECT 'deadLetters' AS kind, job_id AS id FROM dead
                      UNION ALL SELECT 'alerts', job_id FROM alerts
                      UNION ALL SELECT 'disabledDevices', id FROM disabled) e
            ), notified AS (
                SELECT pg_notify('herald_events', json_build_object(
                    'deadLetters', coalesce(json_agg(id ORDER BY id) FILTER (WHERE kind = 'deadLetters'), '[]'),
                    'alerts', coalesce(json_agg(id ORDER BY id) FILTER (WHERE kind = 'alerts'), '[]'),
                    'disabledDevices', coalesce(json_agg(id ORDER BY id) FILTER (WHERE kind = 'disabledDevices'), '[]')
                )::text)
                FROM events GROUP BY chunk
            )
            SELECT (SELECT count(*) FROM owned), (SELECT count(*) FROM notified) FROM counted
            """,
        genericPlan: true
    )

    /// Extends the leases of every job `$1` holds in bucket `$4` to `$2 + $3` (epoch s). (Its
    /// recipients stay held as long as their jobs run: a hold has no lease of its own.)
    ///
    /// - Important: rows another statement has locked are skipped, not waited for: they are being
    ///   acknowledged (or reaped), which settles them anyway. Waiting would let this statement and
    ///   an ack of the same worker lock the same rows in different orders and deadlock (seen under
    ///   load: PostgreSQL then aborts one of them after `deadlock_timeout`, 1 s).
    static let extendLeases = PostgresStatement(
        name: "herald_extend_leases_v3",
        sql: """
            UPDATE herald.outbox o SET lease_expires_at = to_timestamp($2::float8 + $3::float8)
            WHERE \(inBucket("o", "$4")) AND o.id = ANY (ARRAY(
                    SELECT r.id FROM herald.outbox r
                    WHERE \(inBucket("r", "$4")) AND r.state = 'running' AND r.lease_owner = $1
                    FOR UPDATE SKIP LOCKED))
              AND o.state = 'running' AND o.lease_owner = $1
            """,
        genericPlan: true
    )

    /// Returns jobs whose lease expired before `$1` (a crashed replica) to `pending`, or to the
    /// dead letters when that lease was their last attempt. At most `$2` per call. $3 = reaper id,
    /// $4 the bucket.
    /// A returned job keeps its due time, so its recipient's jobs are still claimed in order; its
    /// recipient is freed afterwards by ``freeStrayRecipients``. The expired rows are reached by
    /// their ids (`id = ANY`), not by a join, which statistics from a drained queue planned as a
    /// walk of the whole outbox, as they did the ack's (``acknowledge``).
    static let reapExpiredLeases = PostgresStatement(
        name: "herald_reap_v4",
        sql: """
            WITH expired AS (
                SELECT x.id FROM herald.outbox x
                WHERE \(inBucket("x", "$4")) AND state = 'running' AND lease_expires_at < to_timestamp($1::float8)
                ORDER BY lease_expires_at LIMIT $2
                FOR UPDATE SKIP LOCKED
            ), back AS (
                UPDATE herald.outbox o
                SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,
                    last_error = 'lease_expired'
                WHERE \(inBucket("o", "$4")) AND o.id = ANY (ARRAY(SELECT e.id FROM expired e)) AND o.attempt < o.max_attempts
                RETURNING o.id, o.user_id, o.category, o.attempt
            ), gone AS (
                DELETE FROM herald.outbox o
                WHERE \(inBucket("o", "$4")) AND o.id = ANY (ARRAY(SELECT e.id FROM expired e)) AND o.attempt >= o.max_attempts
                RETURNING o.*
            ), dead AS (
                INSERT INTO herald.dead_letters
                    (job_id, user_id, category, payload, options, dedup_key, attempts, last_error, enqueued_at)
                SELECT g.id, g.user_id, g.category, g.payload, g.options, g.dedup_key, g.attempt,
                       'attempts_exhausted: lease_expired', g.created_at
                FROM gone g
                ON CONFLICT (job_id) DO NOTHING
            ), alerts AS (
                INSERT INTO herald.inbox (user_id, job_id, kind, category, title, body, route, metadata)
                SELECT g.user_id, g.id, 'alert', g.category, g.payload->>'title', g.payload->>'body',
                       g.payload->>'route', coalesce(g.payload->'metadata', '{}')
                FROM gone g WHERE g.priority = 0
            ), logged AS (
                INSERT INTO herald.delivery_log (job_id, user_id, category, event, status, reason, attempt, worker)
                SELECT id, user_id, category, 'released', 'pending', 'lease_expired', attempt, $3 FROM back
                UNION ALL
                SELECT id, user_id, category, 'dead', 'dead', 'attempts_exhausted: lease_expired', attempt, $3
                FROM gone
            )
            SELECT (SELECT count(*) FROM back) AS released, (SELECT count(*) FROM gone) AS dead
            """
    )

    /// Frees every held recipient whose holder has no job of that user `running`: after the
    /// reaper returned a crashed worker's jobs (in a statement of its own: it must see them no
    /// longer running), so jobs enqueued after a crash never overtake the crashed batch's; and as
    /// a safety net on the leader's retention pass (claims, acks and releases change a hold with
    /// its jobs, so none should be found there). One pass over the table and, hashed, over the
    /// running jobs; `turn` as this snapshot saw it, so a row held anew meanwhile is left alone.
    /// One bucket (`$1`) per call. Returns how many.
    static let freeStrayRecipients = PostgresStatement(
        name: "herald_free_stray_recipients_v2",
        sql: """
            WITH freed AS (
                UPDATE herald.recipients r
                SET lease_owner = NULL, turn = r.turn + 1
                FROM (SELECT x.user_id, x.turn FROM herald.recipients x
                      WHERE \(inBucket("x", "$1")) AND x.lease_owner IS NOT NULL
                        AND (x.user_id, x.lease_owner) NOT IN (
                            SELECT o.user_id, o.lease_owner FROM herald.outbox o
                            WHERE \(inBucket("o", "$1")) AND o.state = 'running')) s
                WHERE \(inBucket("r", "$1")) AND r.user_id = s.user_id AND r.turn = s.turn
                RETURNING 1
            )
            SELECT count(*) FROM freed
            """
    )

    /// Hands every job `$1` still holds back to `pending` without using up its attempt
    /// (graceful shutdown past its deadline).
    static let releaseOwned = PostgresStatement(
        name: "herald_release_v2",
        sql: """
            WITH back AS (
                UPDATE herald.outbox
                SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,
                    attempt = greatest(attempt - 1, 0)
                WHERE state = 'running' AND lease_owner = $1
                RETURNING id, user_id, category, attempt
            ), recipients AS (
                UPDATE herald.recipients r SET lease_owner = NULL, turn = r.turn + 1
                WHERE r.user_id = ANY (ARRAY(SELECT DISTINCT user_id FROM back)) AND r.lease_owner = $1
            ), logged AS (
                INSERT INTO herald.delivery_log (job_id, user_id, category, event, status, reason, attempt, worker)
                SELECT id, user_id, category, 'released', 'pending', 'shutdown', attempt, $1 FROM back
            )
            SELECT count(*) FROM back
            """
    )

    /// The active pauses, oldest first: category, app, until (ISO 8601 or NULL), who, since.
    static let pauses = PostgresStatement(
        name: "herald_pauses_v1",
        sql: """
            SELECT p.category, p.app_id,
                   to_char(p.until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS until, p.paused_by,
                   to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS since
            FROM herald.pauses p WHERE p.until IS NULL OR p.until > now()
            ORDER BY p.created_at, p.id
            """
    )

    /// Binds: $1 category, $2 app, $3 until (epoch s or NULL), $4 actor (or NULL). Returns jobs held.
    static let pause = PostgresStatement(
        name: "herald_pause_v1",
        sql: """
            SELECT herald.pause($1, $2, to_timestamp($3::float8))
            FROM (SELECT set_config('herald.actor', coalesce($4, ''), true)) actor
            """
    )

    /// Binds: $1 category, $2 app, $3 actor (or NULL). Returns jobs released.
    static let resume = PostgresStatement(
        name: "herald_resume_v1",
        sql: "SELECT herald.resume($1, $2) FROM (SELECT set_config('herald.actor', coalesce($3, ''), true)) actor"
    )

    /// Binds: $1 category, $2 scope, $3 app, $4 actor (or NULL). Returns jobs cancelled.
    static let cancelPending = PostgresStatement(
        name: "herald_cancel_pending_v1",
        sql:
            "SELECT herald.cancel_pending($1, $2, $3) FROM (SELECT set_config('herald.actor', coalesce($4, ''), true)) actor"
    )

    /// What cancel_pending would cancel now (dry run). Binds as `cancelPending` without the actor.
    static let countPending = PostgresStatement(
        name: "herald_count_pending_v1",
        sql: """
            SELECT count(*) FROM herald.outbox o
            WHERE o.state = 'pending' AND ($1::text IS NULL OR o.category = $1)
              AND ($2::text IS NULL OR o.options->>'scope' = $2)
              AND ($3::text IS NULL OR o.category IN (SELECT k.name FROM herald.categories k WHERE k.app_id = $3))
            """
    )

    /// One chunk of holding: up to $1 pending jobs of paused categories. Returns how many.
    static let holdPaused = PostgresStatement(name: "herald_hold_paused_v1", sql: "SELECT herald.hold_paused($1)")

    /// One chunk of releasing: up to $1 held jobs no pause covers any more. Returns how many.
    static let releaseUnpaused = PostgresStatement(
        name: "herald_release_unpaused_v1",
        sql: "SELECT herald.release_unpaused($1)"
    )

    /// A message the local-fallback provider showed (migration 0013).
    package static let localRecord = PostgresCompositeType(
        "herald.local_record",
        fields: ["job_id", "device_id", "user_id", "title", "body", "subtitle", "route", "data", "collapse_id"]
    )

    /// Records what the local-fallback provider showed, one row per message. Binds: $1 an array
    /// of ``localRecord``.
    package static let recordLocal = PostgresStatement(
        name: "herald_record_local_v2",
        sql: """
            INSERT INTO herald.local_notifications
                (job_id, device_id, user_id, title, body, subtitle, route, data, collapse_id)
            SELECT r.job_id, r.device_id, r.user_id, r.title, r.body, r.subtitle, r.route, r.data, r.collapse_id
            FROM unnest($1::herald.local_record[]) r
            """
    )

    static let enqueue = PostgresStatement(
        name: "herald_enqueue_v1",
        sql: "SELECT herald.enqueue($1, $2, $3::jsonb, $4::jsonb)"
    )

    static let enqueueMany = PostgresStatement(
        name: "herald_enqueue_many_v1",
        sql: "SELECT herald.enqueue_many($1::text[], $2, $3::jsonb, $4::jsonb)"
    )

    /// Open (not replayed) dead letters.
    static let openDeadLetters = "(SELECT count(*) FROM herald.dead_letters WHERE replayed_at IS NULL) AS dead_letters"

    /// Deliveries in the last hour and active devices: what `herald status` and the console's
    /// overview show beside the queue.
    static let activityColumns = """
        (SELECT count(*) FROM herald.delivery_log WHERE created_at > now() - interval '1 hour' AND status = 'done' AND event = 'attempt' AND outcome = 'accepted') AS delivered_last_hour,
        (SELECT count(*) FROM herald.devices WHERE active) AS active_devices
        """

    /// Queue depth: the columns both `depth` and `status` start with, over ``depthSources``.
    private static let depthColumns = """
        p.pending_due, p.pending_later - h.paused_later AS pending_scheduled, r.running,
        coalesce(extract(epoch FROM now() - p.oldest_due), 0) AS oldest_pending_age,
        \(openDeadLetters),
        h.paused,
        (SELECT count(*) FROM herald.pauses WHERE until IS NULL OR until > now()) AS active_pauses
        """

    /// Each state counted through its own partial index (a claim index for pending jobs,
    /// `outbox_running`, `outbox_held` for paused ones), so a depth costs what the queue holds,
    /// not what the table once held: the outbox keeps its largest size (vacuum does not truncate
    /// it), and a count over the whole table read all of it on every measurement — 400 MB, 50,000
    /// pages, 240 ms, every interval, after one broadcast of 1,000,000 jobs. A paused job is
    /// pending with `run_at` infinity (`herald.hold_paused`), so it is taken out of the scheduled.
    private static let depthSources = """
        (SELECT count(*) FILTER (WHERE o.run_at <= now()) AS pending_due,
                count(*) FILTER (WHERE o.run_at > now()) AS pending_later,
                min(o.run_at) FILTER (WHERE o.run_at <= now()) AS oldest_due
         FROM herald.outbox o WHERE o.state = 'pending') p,
        (SELECT count(*) AS running FROM herald.outbox o WHERE o.state = 'running') r,
        (SELECT count(*) AS paused,
                count(*) FILTER (WHERE o.state = 'pending' AND o.run_at > now()) AS paused_later
         FROM herald.outbox o WHERE o.paused_run_at IS NOT NULL) h
        """

    /// Depth, lag and open dead letters: what the maintenance leader measures every interval.
    static let depth = PostgresStatement(
        name: "herald_depth_v3",
        sql: "SELECT \(depthColumns) FROM \(depthSources)"
    )

    /// `depth` plus the last hour's deliveries and the active devices (`herald status`).
    static let status = PostgresStatement(
        name: "herald_status_v4",
        sql: """
            SELECT \(depthColumns),
                \(activityColumns)
            FROM \(depthSources)
            """
    )

    static let deadLetterList = PostgresStatement(
        name: "herald_dlq_list_v2",
        sql: """
            SELECT d.id, d.job_id, d.user_id, d.category, d.attempts, d.last_error,
                   to_char(d.failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS failed_at,
                   d.replay_job_id
            FROM herald.dead_letters d
            WHERE ($1::bool OR d.replayed_at IS NULL)
              AND ($3::text IS NULL OR d.category = $3)
              AND ($4::text IS NULL OR strpos(d.last_error, $4) > 0)
              AND ($5::text IS NULL OR EXISTS (
                  SELECT 1 FROM herald.delivery_log l WHERE l.job_id = d.job_id AND l.provider = $5))
              AND ($6::float8 IS NULL OR d.failed_at >= to_timestamp($6))
              AND ($7::float8 IS NULL OR d.failed_at < to_timestamp($7))
            ORDER BY d.id DESC LIMIT $2
            """
    )

    static let deadLetterShow = PostgresStatement(
        name: "herald_dlq_show_v1",
        sql: """
            SELECT id, job_id, user_id, category, attempts, last_error,
                   to_char(failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS failed_at,
                   replay_job_id, payload::text AS payload, options::text AS options,
                   to_char(enqueued_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS enqueued_at
            FROM herald.dead_letters WHERE id = $1
            """
    )

    /// Re-enqueues dead letters (`$1` ids) as new jobs with fresh
    /// attempts and TTL, keeping the original collapse id so devices replace, not repeat.
    static let deadLetterReplay = PostgresStatement(
        name: "herald_dlq_replay_v3",
        sql: """
            WITH d AS (
                SELECT x.* FROM herald.dead_letters x
                WHERE x.id = ANY ($1::bigint[]) AND x.replayed_at IS NULL
                ORDER BY x.id
                FOR UPDATE
            ), ins AS (
                INSERT INTO herald.outbox
                    (user_id, category, app_id, priority, payload, options, dedup_key, run_at, expires_at, max_attempts, replay_of)
                SELECT d.user_id, d.category, c.app_id, herald.priority_rank(coalesce(d.options->>'priority', c.priority)),
                       d.payload,
                       (d.options - 'expiresAt' - 'deliverAt')
                           || jsonb_build_object('collapseId', coalesce(d.options->>'collapseId', 'herald-' || d.job_id)),
                       d.dedup_key, now(), now() + c.ttl, c.max_attempts, d.job_id
                FROM d JOIN herald.categories c ON c.name = d.category
                RETURNING id, replay_of, user_id, category
            ), marked AS (
                UPDATE herald.dead_letters x SET replayed_at = now(), replay_job_id = ins.id
                FROM ins WHERE x.job_id = ins.replay_of
                RETURNING x.id, ins.id AS new_job
            ), logged AS (
                INSERT INTO herald.delivery_log (job_id, user_id, category, event, status, reason)
                SELECT ins.replay_of, ins.user_id, ins.category, 'replayed', 'pending', 'replayed as job ' || ins.id
                FROM ins
            )
            SELECT id::text AS id, new_job::text AS new_job FROM marked ORDER BY id
            """
    )

    static let deadLetterPurge = PostgresStatement(
        name: "herald_dlq_purge_v2",
        sql: """
            WITH gone AS (
                DELETE FROM herald.dead_letters
                WHERE id = ANY ($1::bigint[]) AND failed_at < now() - make_interval(secs => $2::float8)
                RETURNING 1
            )
            SELECT count(*) FROM gone
            """
    )

    /// Every record of one job, oldest first, with where it stands now (`herald explain <job>`).
    static let explainJob = PostgresStatement(
        name: "herald_explain_job_v1",
        sql: """
            SELECT to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), l.user_id, l.category,
                   l.event, coalesce(l.provider, ''), coalesce(l.outcome, ''), l.status, coalesce(l.reason, ''),
                   l.attempt::text, coalesce(round(l.latency_ms::numeric, 1)::text, ''), coalesce(l.worker, '')
            FROM herald.delivery_log l WHERE l.job_id = $1
            UNION ALL
            SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), o.user_id, o.category,
                   'now', '', '', o.state,
                   'due ' || to_char(o.run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                       || coalesce(', last error ' || o.last_error, ''),
                   o.attempt::text, '', coalesce(o.lease_owner, '')
            FROM herald.outbox o WHERE o.id = $1
            UNION ALL
            SELECT to_char(d.failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), d.user_id, d.category,
                   'dead_letter', '', '', 'dead', 'dead letter ' || d.id || ': ' || d.last_error
                       || coalesce(', replayed as job ' || d.replay_job_id, ''),
                   d.attempts::text, '', ''
            FROM herald.dead_letters d WHERE d.job_id = $1
            ORDER BY 1
            """
    )

    /// A recipient's latest decisions, newest first (`herald explain --user X`).
    static let explainUser = PostgresStatement(
        name: "herald_explain_user_v1",
        sql: """
            SELECT to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), l.job_id::text,
                   l.category, l.event, coalesce(l.provider, ''), coalesce(l.outcome, ''), l.status,
                   coalesce(l.reason, ''), l.attempt::text
            FROM herald.delivery_log l WHERE l.user_id = $1
            ORDER BY l.id DESC LIMIT $2
            """
    )

    /// Deletes dead letters older than their retention and expired dedup keys (at most `$2` rows
    /// each per call) and expired presence. Binds: $1 dead-letter retention (s), $2 rows.
    static let pruneHistory = PostgresStatement(
        name: "herald_prune_v2",
        sql: """
            WITH lock AS (
                SELECT pg_try_advisory_xact_lock(72630001) AS ok  -- one replica prunes at a time
            ), dlq AS (
                DELETE FROM herald.dead_letters WHERE (SELECT ok FROM lock) AND id IN (
                    SELECT id FROM herald.dead_letters
                    WHERE failed_at < now() - make_interval(secs => $1::float8) LIMIT $2)
                RETURNING 1
            ), keys AS (
                DELETE FROM herald.dedup_keys WHERE (SELECT ok FROM lock) AND (user_id, dedup_key) IN (
                    SELECT user_id, dedup_key FROM herald.dedup_keys
                    WHERE expires_at IS NOT NULL AND expires_at < now() LIMIT $2)
                RETURNING 1
            ), presence AS (
                DELETE FROM herald.presence WHERE (SELECT ok FROM lock) AND expires_at < now()
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM dlq) AS dead_letters, (SELECT count(*) FROM keys) AS dedup_keys,
                   (SELECT count(*) FROM presence) AS presence
            """
    )

    /// Analyzes the outbox when it holds four times the rows its planner statistics say, and at
    /// least `$1` (`herald.refresh_queue_statistics`, sql/functions/10_statistics.sql: after a
    /// drain the statistics say the queue is empty, and a burst planned as such made claims of
    /// seconds). Returns whether it analyzed.
    static let refreshQueueStatistics = PostgresStatement(
        name: "herald_refresh_queue_statistics_v1",
        sql: "SELECT herald.refresh_queue_statistics($1::bigint)"
    )

    /// Retention for one partitioned history table (`herald.prune_history`, migration 0010):
    /// rows deleted, day partitions dropped and created. Binds: $1 table, $2 seconds kept, $3 rows.
    static let pruneHistoryTable = PostgresStatement(
        name: "herald_prune_history_v1",
        sql: "SELECT deleted, dropped, created FROM herald.prune_history($1, $2::float8, $3::int)"
    )
}
