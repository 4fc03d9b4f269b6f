import HeraldCore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Applies `sql/NNNN_name.up.sql` files in order, once, under an advisory lock.
///
/// - Important: the whole run is one transaction holding `pg_advisory_xact_lock`, so ten
///   replicas starting at once apply each migration exactly once; the others wait, then find
///   nothing to do. Versions are recorded in `herald.schema_migrations`.
package struct Migrator: Sendable {
    package struct Migration: Sendable, Hashable {
        package var version: Int
        package var name: String
        package var sql: String
    }

    package struct Result: Sendable {
        package var applied: [Int]
        package var current: Int
    }

    /// The advisory lock key ("herald" in ASCII, as an int).
    static let lockKey: Int64 = 0x6865_7261_6C64

    let pool: PostgresPool
    let migrations: [Migration]

    package init(pool: PostgresPool, migrations: [Migration]) {
        self.pool = pool
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// The newest version the files define.
    package var latestVersion: Int { migrations.last?.version ?? 0 }

    package func migrate(logger: Logger) async throws -> Result {
        try await pool.withConnection { connection in
            try await connection.execute("BEGIN", name: "migrate_begin")
            do {
                try await connection.execute(
                    """
                    SELECT pg_advisory_xact_lock(\(Self.lockKey));
                    CREATE SCHEMA IF NOT EXISTS herald;
                    CREATE TABLE IF NOT EXISTS herald.schema_migrations (
                        version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
                    """, name: "migrate_lock")
                let rows = try await connection.simpleQuery(
                    "SELECT version FROM herald.schema_migrations", name: "migrate_versions")
                let done = Set(rows.rows.compactMap { RowReader($0).int(0) })
                var applied: [Int] = []
                for m in migrations where !done.contains(m.version) {
                    logger.info("Applying migration", metadata: ["migration.version": "\(m.version)", "migration.name": "\(m.name)"])
                    try await connection.execute(m.sql, name: "migration_\(m.version)")
                    try await connection.execute(
                        "INSERT INTO herald.schema_migrations (version, name) VALUES (\(m.version), '\(Self.quoteFree(m.name))')",
                        name: "migrate_record")
                    applied.append(m.version)
                }
                try await connection.execute("COMMIT", name: "migrate_commit")
                return Result(applied: applied, current: max(done.max() ?? 0, applied.max() ?? 0))
            } catch {
                try? await connection.execute("ROLLBACK", name: "migrate_rollback")
                throw error
            }
        }
    }

    /// The applied version, or 0 when the schema is missing (readiness, `status`).
    package func currentVersion() async throws -> Int {
        let rows = try await pool.withConnection { c in
            try await c.simpleQuery(
                "SELECT coalesce((SELECT max(version) FROM herald.schema_migrations), 0) WHERE to_regclass('herald.schema_migrations') IS NOT NULL",
                name: "migrate_current")
        }
        return rows.scalar.flatMap { Int($0) } ?? 0
    }

    /// File names are `NNNN_name.up.sql`; the name is checked to hold only [a-z0-9_].
    private static func quoteFree(_ name: String) -> String {
        String(name.unicodeScalars.filter { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
    }

    /// The migrations compiled into this binary from `sql/` (the EmbedSQL build plugin), so an
    /// installed `herald` migrates with no files beside it.
    package static var embedded: [Migration] {
        // The names are unique (they were one directory's files) and checked by a test.
        EmbeddedSQL.files.compactMap { migration(fileName: $0.name, sql: $0.text) }.sorted { $0.version < $1.version }
    }

    /// Loads `NNNN_name.up.sql` files from a directory (`HERALD_DATABASE_MIGRATIONS_DIR`, for
    /// trying a migration without rebuilding).
    package static func load(directory: String) throws -> [Migration] {
        guard let dir = opendir(directory) else {
            throw ConfigurationError(key: "database.migrations_dir", reason: "cannot open \(directory)")
        }
        defer { closedir(dir) }
        var result: [Migration] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasSuffix(".up.sql") else { continue }
            if let migration = migration(fileName: name, sql: try readFile(directory + "/" + name)) {
                result.append(migration)
            }
        }
        let versions = result.map(\.version)
        if Set(versions).count != versions.count {
            throw ConfigurationError(key: "database.migrations_dir", reason: "two migrations share a version number")
        }
        if result.isEmpty {
            throw ConfigurationError(key: "database.migrations_dir", reason: "no NNNN_name.up.sql file in \(directory)")
        }
        return result.sorted { $0.version < $1.version }
    }

    /// `NNNN_name.up.sql` as a migration; nil for any other name (down migrations among them).
    private static func migration(fileName: String, sql: String) -> Migration? {
        guard fileName.hasSuffix(".up.sql"), let underscore = fileName.firstIndex(of: "_"),
            let version = Int(fileName[..<underscore])
        else { return nil }
        let label = String(fileName[fileName.index(after: underscore)...].dropLast(".up.sql".count))
        return Migration(version: version, name: quoteFree(label), sql: sql)
    }

    private static func readFile(_ path: String) throws -> String {
        guard let file = fopen(path, "rb") else {
            throw ConfigurationError(key: "database.migrations_dir", reason: "cannot read \(path)")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
