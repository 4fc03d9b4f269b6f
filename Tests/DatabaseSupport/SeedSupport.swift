import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// Helpers for the seed scenario tests (Seed*.swift): categories with every policy column,
/// preferences, devices with options, enqueues with raw JSON, and readable delivery-log checks.
extension TestDatabase {
    /// Inserts a `herald.categories` row. JSON and interval arguments are SQL text (dollar-quoted here).
    package func addSeedCategory(
        _ name: String,
        priority: String = "normal",
        mandatory: Bool = false,
        optIn: Bool = false,
        quietHours: String = "defer",
        dedupWindow: String? = nil,
        coalesce: String = "{}",
        rateLimit: String = "{}",
        ttl: String = "1 day",
        maxAttempts: Int = 5,
        backoffBase: String = "2 seconds",
        backoffCap: String = "10 minutes",
        sound: String? = nil,
        interruptionLevel: String? = nil,
        apnsCategory: String? = nil,
        androidChannel: String? = nil,
        defaultRoute: String? = nil,
        silent: Bool = false,
        previewChars: Int? = nil,
        deadline: String? = nil
    ) async throws {
        func text(_ value: String?) -> String { value.map { "$q$\($0)$q$" } ?? "NULL" }
        try await exec(
            """
            INSERT INTO herald.categories (name, priority, mandatory, opt_in, quiet_hours, dedup_window, coalesce,
                rate_limit, ttl, max_attempts, backoff_base, backoff_cap, sound, interruption_level, apns_category,
                android_channel, default_route, silent, preview_chars, deadline)
            VALUES (\(text(name)), \(text(priority)), \(mandatory), \(optIn), \(text(quietHours)),
                \(text(dedupWindow))::interval, \(text(coalesce))::jsonb, \(text(rateLimit))::jsonb, \(text(ttl))::interval,
                \(maxAttempts), \(text(backoffBase))::interval, \(text(backoffCap))::interval, \(text(sound)),
                \(text(interruptionLevel)), \(text(apnsCategory)), \(text(androidChannel)), \(text(defaultRoute)),
                \(silent), \(previewChars.map(String.init) ?? "NULL"), \(text(deadline))::interval)
            """
        )
    }

    /// Upserts a user's `herald.preferences` row (what the app's settings screen writes).
    package func setPreferences(_ user: String, _ json: String) async throws {
        try await exec(
            """
            INSERT INTO herald.preferences (user_id, preferences) VALUES ($q$\(user)$q$, $q$\(json)$q$::jsonb)
            ON CONFLICT (user_id) DO UPDATE SET preferences = EXCLUDED.preferences, updated_at = now()
            """
        )
    }

    /// `herald.register_device` with options (JSON text); returns the device id.
    @discardableResult
    package func registerDevice(
        _ user: String,
        _ provider: String,
        _ token: String,
        options: String
    ) async throws -> Int64 {
        let id = try await scalar(
            "SELECT herald.register_device($q$\(user)$q$, $q$\(provider)$q$, $q$\(token)$q$, $q$\(options)$q$::jsonb)"
        )
        return try #require(Int64(id ?? ""))
    }

    /// `herald.enqueue` with a raw JSON payload and options.
    @discardableResult
    package func enqueueJSON(
        _ user: String,
        _ category: String,
        payload: String,
        options: String = "{}"
    ) async throws
        -> Int64?
    {
        try await outbox().enqueue(user: user, category: category, payloadJSON: payload, optionsJSON: options)
    }

    /// `herald.enqueue_many` with a raw JSON payload and options; returns how many were enqueued.
    @discardableResult
    package func enqueueManyJSON(
        _ users: [String],
        _ category: String,
        payload: String,
        options: String = "{}"
    )
        async throws -> Int
    {
        try await outbox().enqueueMany(users: users, category: category, payloadJSON: payload, optionsJSON: options)
    }

    /// Every `delivery_log` record of one job, oldest first, as `[event, status, reason]`.
    package func decisions(_ job: Int64) async throws -> [[String]] {
        try await rows(
            "SELECT event, status, coalesce(reason, '') FROM herald.delivery_log WHERE job_id = \(job) ORDER BY id"
        )
        .map { $0.map { $0 ?? "" } }
    }

    /// The newest outbox job ids of a user (oldest first), optionally of one category.
    package func jobIDs(_ user: String, category: String? = nil) async throws -> [Int64] {
        let filter = category.map { " AND category = $q$\($0)$q$" } ?? ""
        return try await rows("SELECT id FROM herald.outbox WHERE user_id = $q$\(user)$q$\(filter) ORDER BY id")
            .compactMap { $0.first.flatMap { $0 }.flatMap { Int64($0) } }
    }

    /// The pending summary job of a user, if any: (id, summary_count, run_at).
    package func openSummary(_ user: String) async throws -> (id: Int64, count: Int, runAt: Date)? {
        let row = try await rows(
            """
            SELECT id, summary_count, extract(epoch FROM run_at) FROM herald.outbox
            WHERE user_id = $q$\(user)$q$ AND summary_key IS NOT NULL AND state = 'pending'
            """
        ).first
        guard let row, let id = row[0].flatMap({ Int64($0) }), let count = row[1].flatMap({ Int($0) }),
            let runAt = row[2].flatMap({ Double($0) }).map(Date.init(timeIntervalSince1970:))
        else { return nil }
        return (id, count, runAt)
    }

    /// The instant a timestamptz SQL expression names (evaluated by PostgreSQL).
    package func instant(_ expression: String) async throws -> Date {
        Date(
            timeIntervalSince1970: try #require(
                Double(try await scalar("SELECT extract(epoch FROM (\(expression)))") ?? "")
            )
        )
    }

    /// The epoch of local wall-clock `time` (e.g. `23:30`) `daysAhead` days after today in `zone`.
    ///
    /// Tomorrow night (daysAhead 1) is always after PostgreSQL's `now()`, so jobs enqueued now are due then.
    package func localInstant(_ time: String, daysAhead: Int, zone: String) async throws -> Date {
        try await instant(
            "((now() AT TIME ZONE '\(zone)')::date + \(daysAhead) + time '\(time)') AT TIME ZONE '\(zone)'"
        )
    }

    /// Unread, undeleted inbox rows of a user: the badge the app shows.
    package func unreadCount(_ user: String) async throws -> Int {
        try await int(
            "SELECT count(*) FROM herald.inbox WHERE user_id = $q$\(user)$q$ AND read_at IS NULL AND deleted_at IS NULL"
        )
    }

    /// Users whose recipient row differs from their inbox, as "user: unread/sends ≠ unread/sends":
    /// the unread count (the badge a claim reads) and the recent sends (the history it reads;
    /// compared as sets, in time order). The worker's acknowledgement writes both in the update
    /// that frees the user; the inbox trigger keeps them for every other write.
    package func recipientRowDrift() async throws -> [String] {
        try await rows(
            """
            SELECT r.user_id || ': ' || r.unread || '/' || coalesce(k.kept::text, '{}')
                   || ' ≠ ' || coalesce(i.n, 0) || '/' || coalesce(k.inbox::text, '{}')
            FROM herald.recipients r
            LEFT JOIN (SELECT user_id, count(*) AS n FROM herald.inbox
                       WHERE read_at IS NULL AND deleted_at IS NULL GROUP BY user_id) i ON i.user_id = r.user_id
            CROSS JOIN LATERAL (
                SELECT (SELECT array_agg(x ORDER BY x.at, x.category, x.coalesce_key, x.scope)
                        FROM unnest(r.sends) x) AS kept,
                       (SELECT array_agg(x ORDER BY x.at, x.category, x.coalesce_key, x.scope)
                        FROM unnest(herald.sends_from_inbox(r.user_id)) x) AS inbox) k
            WHERE r.unread <> coalesce(i.n, 0) OR k.kept IS DISTINCT FROM k.inbox
            ORDER BY 1
            """
        ).compactMap { $0[0] }
    }
}

extension ManualClock {
    /// Moves the clock up to just after real time (jobs enqueued since are due) unless it is already later.
    package func catchUp() {
        let real = SystemClock().now() + 1
        if now() < real { set(real) }
    }
}

extension ScriptedProvider {
    /// What was sent to the device with this token, in order.
    package func sent(to token: String) -> [PushMessage] { sent.filter { $0.device.token == token } }
}

/// ISO-8601 text for an instant (what a backend would pass as `deliverAt` / `expiresAt`).
package func iso(_ date: Date) -> String { Dispatcher.iso8601(date) }

extension Array {
    package func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
