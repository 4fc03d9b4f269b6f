import Foundation
import HeraldCore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Brings a database to this build's schema: applies `sql/migrations/NNNN_name.sql` files in
/// order, once each, then re-applies every `sql/functions/*.sql` file (`CREATE OR REPLACE`), so
/// each function has one live definition in `sql/` whatever version the database came from.
///
/// - Important: the whole run is one transaction holding `pg_advisory_xact_lock`, so ten
///   replicas starting at once apply each migration exactly once; the others wait, then find
///   nothing to do. Versions are recorded in `herald.schema_migrations`. A database at a newer
///   version than this build knows is left untouched (an older binary must not put its older
///   functions over a newer schema).
package struct Migrator: Sendable {
    package struct Migration: Sendable, Hashable {
        package var version: Int
        package var name: String
        package var sql: String

        package init(version: Int, name: String, sql: String) {
            self.version = version
            self.name = name
            self.sql = sql
        }
    }

    /// One `sql/functions/` file: definitions re-applied by every migrate.
    package struct FunctionFile: Sendable, Hashable {
        package var name: String
        package var sql: String
    }

    /// What `sql/` holds: the migrations in version order and the function files in name order.
    package struct Schema: Sendable, Hashable {
        package var migrations: [Migration]
        package var functions: [FunctionFile]

        package init(migrations: [Migration], functions: [FunctionFile]) {
            self.migrations = migrations.sorted { $0.version < $1.version }
            self.functions = functions.sorted { $0.name < $1.name }
        }
    }

    /// The database was migrated by a newer release than this binary.
    package struct SchemaIsNewer: Error, CustomStringConvertible {
        package var database: Int
        package var known: Int
        package var description: String {
            "the database is at schema version \(database), newer than this herald's \(known): "
                + "migrate with the newer release; nothing was changed"
        }
    }

    package struct Result: Sendable {
        package var applied: [Int]
        package var current: Int
        /// How many function files were re-applied.
        package var functionFiles: Int
    }

    /// The advisory lock key ("herald" in ASCII, as an int).
    static let lockKey: Int64 = 0x6865_7261_6C64

    let pool: PostgresPool
    let schema: Schema
    /// The buckets a new database is laid out with (`database.buckets`, migration 0015); nil
    /// leaves an installed database as it is and lays a new one out with one.
    let buckets: Int?

    package init(pool: PostgresPool, schema: Schema, buckets: Int? = nil) {
        self.pool = pool
        self.schema = schema
        self.buckets = buckets
    }

    /// The newest version the files define.
    package var latestVersion: Int { schema.migrations.last?.version ?? 0 }

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
                    """,
                    name: "migrate_lock"
                )
                if let buckets {
                    guard (1...1024).contains(buckets), buckets & (buckets - 1) == 0 else {
                        throw ConfigurationError(
                            key: "database.buckets",
                            reason: "must be a power of two from 1 to 1024, not \(buckets)"
                        )
                    }
                    try await connection.execute(
                        "SELECT set_config('herald.buckets', '\(buckets)', true)",
                        name: "migrate_buckets"
                    )
                }
                let rows = try await connection.simpleQuery(
                    "SELECT version FROM herald.schema_migrations",
                    name: "migrate_versions"
                )
                let done = Set(rows.readers.compactMap { $0.int("version") })
                if let newest = done.max(), newest > latestVersion {
                    throw SchemaIsNewer(database: newest, known: latestVersion)
                }
                var applied: [Int] = []
                for m in schema.migrations where !done.contains(m.version) {
                    logger.info(
                        "Applying migration",
                        metadata: ["migration.version": "\(m.version)", "migration.name": "\(m.name)"]
                    )
                    try await connection.execute(m.sql, name: "migration_\(m.version)")
                    try await connection.execute(
                        "INSERT INTO herald.schema_migrations (version, name) VALUES (\(m.version), '\(Self.quoteFree(m.name))')",
                        name: "migrate_record"
                    )
                    applied.append(m.version)
                }
                if let buckets,
                    let laid = try await connection.simpleQuery(
                        "SELECT buckets FROM herald.layout",
                        name: "migrate_layout"
                    ).firstReader.int("buckets"), laid != buckets
                {
                    throw ConfigurationError(
                        key: "database.buckets",
                        reason: "is \(buckets), but this database was laid out with \(laid) at install, and "
                            + "buckets are fixed then (every stored bucket would move); nothing was changed"
                    )
                }
                for file in schema.functions {
                    logger.debug("Applying functions", metadata: ["functions.file": "\(file.name)"])
                    try await connection.execute(file.sql, name: "functions_\(Self.quoteFree(file.name))")
                }
                try await connection.execute("COMMIT", name: "migrate_commit")
                return Result(
                    applied: applied,
                    current: max(done.max() ?? 0, applied.max() ?? 0),
                    functionFiles: schema.functions.count
                )
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
                name: "migrate_current"
            )
        }
        return rows.scalar.flatMap { Int($0) } ?? 0
    }

    /// Names hold only [a-z0-9_] once quoted (they go into a statement name and a row).
    private static func quoteFree(_ name: String) -> String {
        String(name.unicodeScalars.filter { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
    }

    /// The schema compiled into this binary from `sql/` (the EmbedSQL build plugin), so an
    /// installed `herald` migrates with no files beside it.
    package static var embedded: Schema {
        // The names are unique (they were two directories' files) and checked by a test.
        schema(files: EmbeddedSQL.files.map { ($0.name, $0.text) })
    }

    /// Loads a folder laid out like `sql/` (`migrations/NNNN_name.sql`, `functions/*.sql`):
    /// `HERALD_DATABASE_MIGRATIONS_DIR`, for trying a change without rebuilding.
    package static func load(directory: String) throws -> Schema {
        var files: [(String, String)] = []
        for folder in ["migrations", "functions"] {
            for name in try listSQL(directory + "/" + folder) {
                files.append((folder + "/" + name, try readFile(directory + "/" + folder + "/" + name)))
            }
        }
        let result = schema(files: files)
        let versions = result.migrations.map(\.version)
        if Set(versions).count != versions.count {
            throw ConfigurationError(key: "database.migrations_dir", reason: "two migrations share a version number")
        }
        if result.migrations.isEmpty {
            throw ConfigurationError(
                key: "database.migrations_dir",
                reason: "no migrations/NNNN_name.sql file in \(directory)"
            )
        }
        return result
    }

    /// `migrations/NNNN_name.sql` files become migrations, `functions/*.sql` function files.
    private static func schema(files: [(name: String, text: String)]) -> Schema {
        var migrations: [Migration] = []
        var functions: [FunctionFile] = []
        for (path, text) in files {
            if path.hasPrefix("functions/") {
                functions.append(FunctionFile(name: String(path.dropFirst("functions/".count)), sql: text))
            } else if path.hasPrefix("migrations/"),
                let m = migration(fileName: String(path.dropFirst("migrations/".count)), sql: text)
            {
                migrations.append(m)
            }
        }
        return Schema(migrations: migrations, functions: functions)
    }

    /// `NNNN_name.sql` as a migration; nil for any other name.
    private static func migration(fileName: String, sql: String) -> Migration? {
        guard fileName.hasSuffix(".sql"), let underscore = fileName.firstIndex(of: "_"),
            let version = Int(fileName[..<underscore])
        else { return nil }
        let label = String(fileName[fileName.index(after: underscore)...].dropLast(".sql".count))
        return Migration(version: version, name: quoteFree(label), sql: sql)
    }

    private static func listSQL(_ directory: String) throws -> [String] {
        guard let dir = opendir(directory) else {
            throw ConfigurationError(key: "database.migrations_dir", reason: "cannot open \(directory)")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".sql") { names.append(name) }
        }
        return names.sorted()
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
