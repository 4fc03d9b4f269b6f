import Delivery
import HeraldCore
import Logging
import Queue
import Settings

/// Refuses to start the worker on a PostgreSQL superuser connection unless
/// `security.allow_superuser` is true.
///
/// A superuser ignores every grant and row-level security policy, so a bug in the worker, or a
/// statement smuggled through it, could reach any table in the cluster. `herald run` needs only
/// a login role granted the worker role (`herald_worker`, sql/migrations/0004_security.sql;
/// docs/security.md). Development set-ups that run everything as `postgres` set
/// `HERALD_SECURITY_ALLOW_SUPERUSER=true`.
struct SuperuserGuard: Sendable {
    /// The login role and whether it is, or can become, a superuser.
    ///
    /// - Important: judged on `session_user`, the role that logged in, which neither `SET ROLE`
    ///   nor `options=-c role=…` in the URL changes; `current_user` follows them, and a login that
    ///   merely starts as `herald_worker` could switch back. A login that is a member of any
    ///   superuser role can `SET ROLE` to it, so it counts as one.
    static let sessionRole = PostgresStatement(
        name: "security_session_role",
        sql: """
            SELECT session_user::text,
                   (r.rolsuper OR EXISTS (
                       SELECT 1 FROM pg_roles s WHERE s.rolsuper AND pg_has_role(session_user, s.oid, 'MEMBER')))::text
            FROM pg_roles r WHERE r.rolname = session_user
            """)

    /// `security.allow_superuser`. Default false.
    let allowSuperuser: Bool

    /// Throws a ``ConfigurationError`` naming `security.allow_superuser` when the pool's role is a
    /// superuser and that is not allowed; logs a warning when it is allowed.
    func check(pool: PostgresPool, logger: Logger) async throws {
        let rows = try await pool.query(Self.sessionRole)
        let role = rows.first?[0] ?? "?"
        let isSuperuser = rows.first?[1] != "false"  // unknown counts as superuser
        try Self.verdict(role: role, isSuperuser: isSuperuser, allowSuperuser: allowSuperuser)
        if isSuperuser {
            logger.warning(
                "Running as a PostgreSQL superuser (security.allow_superuser is true)",
                metadata: ["database.role": "\(role)"])
        }
    }

    /// The decision alone, without I/O.
    static func verdict(role: String, isSuperuser: Bool, allowSuperuser: Bool) throws {
        guard isSuperuser, !allowSuperuser else { return }
        throw ConfigurationError(
            key: "security.allow_superuser",
            reason: "refusing to run as PostgreSQL superuser \"\(role)\" (a superuser login, or one that can SET ROLE to a superuser): connect as a login role granted "
                + "herald_worker (docs/security.md), or set security.allow_superuser "
                + "(HERALD_SECURITY_ALLOW_SUPERUSER=true) to allow it, e.g. for local development")
    }
}
