import Foundation
import Queue

/// A fresh database and a cluster-wide role with a unique name for one test. The role's
/// privileges are dropped in the database first, so the role goes even if the database leaks.
package func withRoleAndDatabase<T: Sendable>(
    _ prefix: String,
    options: String = "NOLOGIN",
    _ body: (String, TestDatabase) async throws -> T
) async throws -> T {
    try await withTestRole(prefix, options: options) { role in
        try await TestDatabase.withFresh { db in
            do {
                let value = try await body(role, db)
                try? await db.exec("DROP OWNED BY \(role)")
                return value
            } catch {
                try? await db.exec("DROP OWNED BY \(role)")
                throw error
            }
        }
    }
}

/// Creates a cluster-wide role with a unique name for one test and drops it afterwards.
package func withTestRole<T: Sendable>(
    _ prefix: String,
    options: String = "NOLOGIN",
    _ body: (String) async throws -> T
) async throws -> T {
    let admin = try TestDatabase.adminURL
    let name = TestDatabase.newName(prefix + "_")
    try await TestDatabase.adminExec("CREATE ROLE \(name) \(options)", adminURL: admin)
    do {
        let value = try await body(name)
        try? await TestDatabase.adminExec("DROP ROLE IF EXISTS \(name)", adminURL: admin)
        return value
    } catch {
        try? await TestDatabase.adminExec("DROP ROLE IF EXISTS \(name)", adminURL: admin)
        throw error
    }
}

extension TestDatabase {
    /// Runs `sql` in one transaction as `role` (`SET LOCAL ROLE`; nil: the connection's own role)
    /// with `herald.user_id` set to `user`; commits, or rolls back and rethrows.
    package func asRole(_ role: String?, user: String?, _ sql: String) async throws -> PostgresRows {
        let setRole = role.map { "SET LOCAL ROLE \($0);" } ?? ""
        let setUser = user.map { "SELECT set_config('herald.user_id', '\($0)', true);" } ?? ""
        return try await pool.withConnection { c in
            try await c.execute("BEGIN; \(setRole) \(setUser)", name: "test")
            do {
                let rows = try await c.simpleQuery(sql, name: "test")
                try await c.execute("COMMIT", name: "test")
                return rows
            } catch {
                try? await c.execute("ROLLBACK", name: "test")
                throw error
            }
        }
    }

    /// The SQLSTATE `sql` fails with under `asRole`, or nil when it succeeds.
    package func sqlState(asRole role: String?, user: String?, _ sql: String) async -> String? {
        do {
            _ = try await asRole(role, user: user, sql)
            return nil
        } catch {
            return PostgresError.sqlState(of: error) ?? "\(error)"
        }
    }

    /// alice and bob: preferences, one device, two unread inbox rows and a local notification
    /// each, written as the owner; `appRole` granted as an app role. Returns the inbox ids.
    package func seedTwoUsers(appRole: String) async throws -> (alice: [Int64], bob: [Int64]) {
        try await addCategory("chat")
        try await exec("SELECT herald.grant_app_role('\(appRole)')")
        var ids: [String: [Int64]] = [:]
        for user in ["alice", "bob"] {
            try await setPreferences(user, #"{"enabled":true}"#)
            let device = try await registerDevice(user, "local", "\(user)-phone")
            ids[user] = try await rows(
                """
                INSERT INTO herald.inbox (user_id, category, title, body)
                VALUES ('\(user)', 'chat', 'one', 'b'), ('\(user)', 'chat', 'two', 'b') RETURNING id
                """
            ).compactMap { $0[0].flatMap { Int64($0) } }
            try await exec(
                "INSERT INTO herald.local_notifications (job_id, device_id, user_id, title, body) VALUES (1, \(device), '\(user)', 't', 'b')"
            )
        }
        return (ids["alice"] ?? [], ids["bob"] ?? [])
    }

    /// `url` with its user replaced (the test cluster trusts loopback connections).
    package static func withUser(_ url: String, _ user: String) -> String {
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].firstIndex(of: "@") else {
            return url
        }
        return String(url[..<scheme.upperBound]) + user + String(url[at...])
    }
}
