import Logging
import Queue

/// Refuses to start the worker on a PostgreSQL superuser connection unless
/// `security.allow_superuser` is true.
///
/// A superuser ignores every grant and row-level security policy, so a bug in the worker, or a
/// statement smuggled through it, could reach any table in the cluster. `herald run` needs only
/// a login role granted the worker role (`herald_worker`, sql/0004_security.up.sql;
/// docs/security.md). Development set-ups that run everything as `postgres` set
/// `HERALD_SECURITY_ALLOW_SUPERUSER=true`.
struct SuperuserGuard: Sendable {
    /// The connected role and whether it is a superuser (`is_superuser` follows `SET ROLE`).
    static let sessionRole = PostgresStatement(
        name: "security_session_role", sql: "SELECT current_user::text, current_setting('is_superuser')")

    /// `security.allow_superuser`. Default false.
    let allowSuperuser: Bool

    /// Throws a ``ConfigurationError`` naming `security.allow_superuser` when the pool's role is a
    /// superuser and that is not allowed; logs a warning when it is allowed.
    func check(pool: PostgresPool, logger: Logger) async throws {
        let rows = try await pool.query(Self.sessionRole)
        let role = rows.first?[0] ?? "?"
        let isSuperuser = rows.first?[1] == "on"
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
            reason: "refusing to run as PostgreSQL superuser \"\(role)\": connect as a login role granted "
                + "herald_worker (docs/security.md), or set security.allow_superuser "
                + "(HERALD_SECURITY_ALLOW_SUPERUSER=true) to allow it, e.g. for local development")
    }
}
