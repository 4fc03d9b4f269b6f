import Foundation

/// Who this pool logged in as, for the superuser guard of `herald run`.
package struct SessionRole: Sendable {
    /// The login role (`session_user`).
    package var name: String
    /// Whether it is a superuser or can `SET ROLE` to one; unknown counts as one.
    package var isSuperuser: Bool

    /// - Important: judged on `session_user`, the role that logged in, which neither `SET ROLE`
    ///   nor `options=-c role=…` in the URL changes; `current_user` follows them, and a login that
    ///   merely starts as `herald_worker` could switch back. A login that is a member of any
    ///   superuser role can `SET ROLE` to it, so it counts as one.
    static let statement = PostgresStatement(
        name: "security_session_role",
        sql: """
            SELECT session_user::text,
                   (r.rolsuper OR EXISTS (
                       SELECT 1 FROM pg_roles s WHERE s.rolsuper AND pg_has_role(session_user, s.oid, 'MEMBER')))::text
            FROM pg_roles r WHERE r.rolname = session_user
            """
    )

    package static func current(_ pool: PostgresPool) async throws -> SessionRole {
        let rows = try await pool.query(statement)
        return SessionRole(name: rows.first?[0] ?? "?", isSuperuser: rows.first?[1] != "false")
    }
}
