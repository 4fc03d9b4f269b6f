import Delivery
import HeraldCore
import Logging
import Queue
import Settings
import Wiring

/// Refuses to start the worker on a PostgreSQL superuser connection unless
/// `security.allow_superuser` is true.
///
/// A superuser ignores every grant and row-level security policy, so a bug in the worker, or a
/// statement smuggled through it, could reach any table in the cluster. `herald run` needs only
/// a login role granted the worker role (`herald_worker`, sql/migrations/0004_security.sql;
/// docs/security.md). Development set-ups that run everything as `postgres` set
/// `HERALD_SECURITY_ALLOW_SUPERUSER=true`.
/// The login role is judged by ``SessionRole`` (`session_user`, which `SET ROLE` does not change).
struct SuperuserGuard: Sendable {
    /// `security.allow_superuser`. Default false.
    let allowSuperuser: Bool

    /// Throws a ``ConfigurationError`` naming `security.allow_superuser` when the pool's role is a
    /// superuser and that is not allowed; logs a warning when it is allowed.
    func check(pool: PostgresPool, logger: Logger) async throws {
        let session = try await SessionRole.current(pool)
        let role = session.name
        let isSuperuser = session.isSuperuser
        try Self.verdict(role: role, isSuperuser: isSuperuser, allowSuperuser: allowSuperuser)
        if isSuperuser {
            logger.warning(
                "Running as a PostgreSQL superuser (security.allow_superuser is true)",
                metadata: ["database.role": "\(role)"]
            )
        }
    }

    /// The decision alone, without I/O.
    static func verdict(role: String, isSuperuser: Bool, allowSuperuser: Bool) throws {
        guard isSuperuser, !allowSuperuser else { return }
        throw ConfigurationError(
            key: "security.allow_superuser",
            reason:
                "refusing to run as PostgreSQL superuser \"\(role)\" (a superuser login, or one that can SET ROLE to a superuser): connect as a login role granted "
                + "herald_worker (docs/security.md), or set security.allow_superuser "
                + "(HERALD_SECURITY_ALLOW_SUPERUSER=true) to allow it, e.g. for local development"
        )
    }
}
