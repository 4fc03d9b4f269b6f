import Crypto
import DatabaseTestSupport
import Foundation
import HeraldCore
import Logging
import Queue
import Testing

/// `sql/` as a schema: migrations applied once, functions re-applied by every migrate, and a
/// database from any released version upgraded in place to exactly what a fresh one gets.
@Suite("Schema: migrations once, functions re-applied, every released version upgrades in place")
struct SchemaTests {
    /// The released migrations as they shipped (versions 1–6, functions inside), frozen in
    /// Tests/Fixtures/released-schema: what databases in the field were built from.
    static func releasedMigrations() throws -> [Migrator.Migration] {
        let folder = TestDatabase.repositoryRoot + "/Tests/Fixtures/released-schema"
        return try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".up.sql") }.sorted()
            .map { name in
                Migrator.Migration(
                    version: Int(name.prefix(4))!,
                    name: String(name.dropFirst(5).dropLast(".up.sql".count)),
                    sql: try String(contentsOfFile: folder + "/" + name, encoding: .utf8)
                )
            }
    }

    /// The migrations released since the sql/ split, as shipped (checked before each upgrade).
    static let releasedMigrationMD5 = [7: "573fda8849cc099c75837387391724ec", 8: "f0cedc322bc4dd29daf88db3847c5bbf"]

    /// A release since the sql/ split (7 or later) as it shipped: today's migrations up to its
    /// version (released migrations never change; `releasedMigrationMD5` holds them to it) and its
    /// function files, frozen in Tests/Fixtures/released-schema/functions-vN, each release's folder
    /// holding what it changed over the one before.
    static func splitRelease(_ version: Int) throws -> Migrator.Schema {
        let files = FileManager.default
        let root = TestDatabase.repositoryRoot
        let folder = files.temporaryDirectory.appendingPathComponent("herald-release-\(version)-\(UUID().uuidString)")
            .path
        defer { try? files.removeItem(atPath: folder) }
        for sub in ["migrations", "functions"] {
            try files.createDirectory(atPath: folder + "/" + sub, withIntermediateDirectories: true)
        }
        for name in try files.contentsOfDirectory(atPath: root + "/sql/migrations")
        where (Int(name.prefix(4)) ?? .max) <= version {
            try files.copyItem(atPath: root + "/sql/migrations/" + name, toPath: folder + "/migrations/" + name)
        }
        for release in 7...version {
            let source = root + "/Tests/Fixtures/released-schema/functions-v\(release)"
            for name in try files.contentsOfDirectory(atPath: source) {
                try? files.removeItem(atPath: folder + "/functions/" + name)
                try files.copyItem(atPath: source + "/" + name, toPath: folder + "/functions/" + name)
            }
        }
        return try Migrator.load(directory: folder)
    }

    /// Everything a caller or the worker can observe of schema `herald`, one sorted line per
    /// object: functions (arguments, result, attributes, grants, a hash of the body), columns,
    /// tables (row-level security, grants), indexes, constraints, triggers, policies, the built-in
    /// rows, default privileges. Partitions of the history tables are left out (which days exist
    /// depends on the date and on the data a database had when it was upgraded).
    static let signature = """
        SELECT kind || ' ' || item FROM (
          SELECT 'function' AS kind, p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') -> '
                 || pg_get_function_result(p.oid) || ' args=' || pg_get_function_arguments(p.oid)
                 || ' lang=' || l.lanname || ' vol=' || p.provolatile::text || ' secdef=' || p.prosecdef
                 || ' strict=' || p.proisstrict || ' config=' || coalesce(array_to_string(p.proconfig, ','), '')
                 || ' acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(p.proacl) x), '')
                 || ' src=' || md5(coalesce(p.prosrc, '') || coalesce(pg_get_function_sqlbody(p.oid), '')) AS item
          FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = 'herald'::regnamespace
          UNION ALL
          SELECT 'column', c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                 || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
                 || ' acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(a.attacl) x), '')
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          WHERE c.relnamespace = 'herald'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p')
            AND NOT c.relispartition
          UNION ALL
          SELECT 'relation', c.relname || ' kind=' || c.relkind::text || ' rls=' || c.relrowsecurity
                 || ' acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(c.relacl) x), '')
          FROM pg_class c WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind IN ('r', 'v', 'p', 'S') AND NOT c.relispartition
          UNION ALL
          SELECT 'index', pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
          WHERE c.relnamespace = 'herald'::regnamespace AND NOT c.relispartition
          UNION ALL
          SELECT 'constraint', conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
          FROM pg_constraint WHERE connamespace = 'herald'::regnamespace
            AND NOT EXISTS (SELECT 1 FROM pg_class pc WHERE pc.oid = conrelid AND pc.relispartition)
          UNION ALL
          SELECT 'trigger', pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
          WHERE c.relnamespace = 'herald'::regnamespace AND NOT t.tgisinternal AND NOT c.relispartition
          UNION ALL
          SELECT 'policy', tablename || ' ' || policyname || ' ' || permissive || ' ' || roles::text || ' ' || cmd
                 || ' ' || coalesce(qual, '') || ' ' || coalesce(with_check, '')
          FROM pg_policies WHERE schemaname = 'herald' AND NOT EXISTS (
            SELECT 1 FROM pg_class pc WHERE pc.relname = tablename AND pc.relnamespace = 'herald'::regnamespace AND pc.relispartition)
          UNION ALL
          SELECT 'schema', n.nspname || ' acl='
                 || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(n.nspacl) x), '')
          FROM pg_namespace n WHERE n.nspname = 'herald'
          UNION ALL
          SELECT 'default_acl', d.defaclobjtype::text || ' '
                 || (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(d.defaclacl) x)
          FROM pg_default_acl d WHERE d.defaclnamespace = 'herald'::regnamespace
          UNION ALL
          SELECT 'row', 'categories ' || (SELECT string_agg(name, ',' ORDER BY name) FROM herald.categories)
          UNION ALL
          SELECT 'row', 'security_roles '
                 || (SELECT string_agg(role_name || ':' || kind, ',' ORDER BY role_name) FROM herald.security_roles)
        ) s ORDER BY 1
        """

    /// An empty database as a `TestDatabase` (dropped afterwards).
    static func withEmptyDatabase<T: Sendable>(_ body: (TestDatabase) async throws -> T) async throws -> T {
        try await TestDatabase.withEmpty { url in
            var configuration = PostgresPool.Configuration()
            configuration.size = 2
            configuration.connection.url = url
            configuration.connection.statementTimeout = .seconds(60)
            let db = TestDatabase(name: "", url: url, pool: PostgresPool(configuration: configuration))
            do {
                let value = try await body(db)
                await db.pool.shutdown()
                return value
            } catch {
                await db.pool.shutdown()
                throw error
            }
        }
    }

    static func migrate(_ db: TestDatabase, _ schema: Migrator.Schema) async throws -> Migrator.Result {
        try await Migrator(pool: db.pool, schema: schema).migrate(logger: TestDatabase.logger)
    }

    static func signature(of db: TestDatabase) async throws -> [String] {
        try await db.rows(Self.signature).map { $0.first.flatMap { $0 } ?? "" }
    }

    @Test("a database at any released version (1–6) upgrades in place: same schema as a fresh one, its jobs kept")
    func everyReleasedVersionUpgradesInPlace() async throws {
        let released = try Self.releasedMigrations()
        #expect(released.map(\.version) == Array(1...6))
        let fresh = try await Self.withEmptyDatabase { db in
            _ = try await Self.migrate(db, Migrator.embedded)
            try await db.addCategory("chat")
            return try await Self.signature(of: db)
        }
        #expect(fresh.filter { $0.hasPrefix("function ") }.count > 30)
        for version in 1...6 {
            try await Self.withEmptyDatabase { db in
                // What the release of that version did: its migrations, functions inside them.
                _ = try await Self.migrate(
                    db,
                    Migrator.Schema(migrations: Array(released.prefix(version)), functions: [])
                )
                try await db.addCategory("chat")
                try await db.exec("SELECT herald.register_device('alice', 'local', 'tok-a')")
                let job = try await db.scalar(
                    "SELECT herald.enqueue('alice', 'chat', '{\"title\": \"kept\", \"body\": \"across the upgrade\"}')"
                )
                let result = try await Self.migrate(db, Migrator.embedded)
                #expect(result.applied == Migrator.embedded.migrations.map(\.version).filter { $0 > version })
                let difference = Set(try await Self.signature(of: db)).symmetricDifference(fresh).sorted()
                #expect(difference.isEmpty, "from version \(version)")
                #expect(
                    try await db.scalar("SELECT payload->>'title' FROM herald.outbox WHERE id = \(job ?? "0")")
                        == "kept"
                )
                #expect(try await db.int("SELECT count(*) FROM herald.devices WHERE user_id = 'alice'") == 1)
                #expect(try await db.enqueue("alice", "chat") != nil, "the upgraded functions work")
            }
        }
    }

    @Test(
        "a database at a release since the sql/ split (7, 8) upgrades in place: same schema, jobs kept, unread counts carried"
    )
    func splitReleasesUpgradeInPlace() async throws {
        let fresh = try await Self.withEmptyDatabase { db in
            _ = try await Self.migrate(db, Migrator.embedded)
            try await db.addCategory("chat")
            return try await Self.signature(of: db)
        }
        for version in [7, 8] {
            let released = try Self.splitRelease(version)
            #expect(released.migrations.map(\.version) == Array(1...version))
            // Released migrations never change: these are the files those releases shipped.
            for migration in released.migrations where migration.version >= 7 {
                let md5 = Hex.encode(Insecure.MD5.hash(data: Data(migration.sql.utf8)))
                #expect(
                    md5 == Self.releasedMigrationMD5[migration.version],
                    "migration \(migration.version) changed after its release"
                )
            }
            try await Self.withEmptyDatabase { db in
                _ = try await Self.migrate(db, released)
                try await db.addCategory("chat")
                let job = try await db.scalar(
                    "SELECT herald.enqueue('alice', 'chat', '{\"title\": \"kept\", \"body\": \"across the upgrade\"}')"
                )
                try await db.exec(
                    """
                    INSERT INTO herald.inbox (user_id, category, title, body, read_at)
                    VALUES ('alice', 'chat', 'a', 'b', NULL), ('alice', 'chat', 'b', 'b', NULL),
                           ('alice', 'chat', 'c', 'b', now()), ('erin', 'chat', 'd', 'b', NULL)
                    """
                )
                let result = try await Self.migrate(db, Migrator.embedded)
                #expect(result.applied == Migrator.embedded.migrations.map(\.version).filter { $0 > version })
                let difference = Set(try await Self.signature(of: db)).symmetricDifference(fresh).sorted()
                #expect(difference.isEmpty, "from version \(version)")
                #expect(
                    try await db.scalar("SELECT payload->>'title' FROM herald.outbox WHERE id = \(job ?? "0")")
                        == "kept"
                )
                #expect(
                    try await db.rows("SELECT user_id, unread::text FROM herald.recipients ORDER BY 1") == [
                        ["alice", "2"], ["erin", "1"],
                    ]
                )
                // The inbox became a partitioned table; its rows stayed where they were (the legacy
                // partition), its ids go on from there.
                #expect(
                    try await db.scalar("SELECT relkind::text FROM pg_class WHERE oid = 'herald.inbox'::regclass")
                        == "p"
                )
                #expect(try await db.int("SELECT count(*) FROM herald.inbox_legacy") == 4)
                #expect(
                    try await db.int(
                        "SELECT count(*) FROM herald.history_partitions() WHERE partition = 'delivery_log_legacy'"
                    ) == 0
                )
                #expect(
                    try await db.scalar(
                        "INSERT INTO herald.inbox (user_id, category, title, body) VALUES ('alice', 'chat', 'e', 'b') RETURNING id"
                    )
                        == "5"
                )
            }
        }
    }

    @Test("every function has one live definition: sql/functions (current_user_id: its migration, as configured state)")
    func oneDefinitionPerFunction() async throws {
        let schema = Migrator.embedded
        let pattern = try Regex(#"(?m)^CREATE (?:OR REPLACE )?FUNCTION herald\.(\w+)\("#)
        var definedIn: [String: [String]] = [:]
        for file in schema.functions {
            for match in file.sql.matches(of: pattern) {
                definedIn[String(match.output[1].substring ?? ""), default: []].append("functions/" + file.name)
            }
        }
        for migration in schema.migrations {
            for match in migration.sql.matches(of: pattern) {
                definedIn[String(match.output[1].substring ?? ""), default: []].append("migration \(migration.version)")
            }
        }
        #expect(definedIn.filter { $0.value.count != 1 }.isEmpty, "\(definedIn.filter { $0.value.count != 1 })")
        #expect(definedIn["current_user_id"] == ["migration 4"])
        // (configure_identity's own CREATE, in a format string, is not at a line start; nor is
        // bucket_of's, created once by migration 15 with the install's bucket mask in its body.)
        #expect(Self.migrationText(15).contains("CREATE FUNCTION herald.bucket_of(user_id text)"))
        try await TestDatabase.withFresh { db in
            let live = Set(
                try await db.rows("SELECT proname FROM pg_proc WHERE pronamespace = 'herald'::regnamespace").compactMap
                { $0[0] }
            )
            #expect(live == Set(definedIn.keys).union(["bucket_of"]))
        }
    }

    static func migrationText(_ version: Int) -> String {
        Migrator.embedded.migrations.first { $0.version == version }?.sql ?? ""
    }

    /// The tables with rows per user, which share the distribution key `bucket` (migration 15).
    static let bucketedTables = [
        "outbox", "recipients", "devices", "preferences", "presence", "inbox", "delivery_log", "local_notifications",
        "dead_letters", "dedup_keys",
    ]

    /// Every scan of a bucketed table (a partition of one included) in `statement`'s generic plan,
    /// and whether its conditions keep it to one bucket (`bucket = $n`).
    static func bucketScans(
        _ statement: PostgresStatement,
        binds: [String],
        in db: TestDatabase
    ) async throws
        -> [(relation: String, keeps: Bool)]
    {
        let json = try await db.explain(
            statement,
            binds: binds,
            options: "FORMAT JSON, VERBOSE",
            around: ("SET plan_cache_mode = force_generic_plan", "RESET plan_cache_mode")
        )
        let bucketed = try Regex(#"^(\#(bucketedTables.joined(separator: "|")))(_p\d{8}|_default|_legacy)?$"#)
        // (No \b: Swift's default word boundaries keep "o.bucket" one word.)
        let keepsBucket = try Regex(#"[.(]bucket = \$\d+\)"#)
        return json.planScans.compactMap { node in
            guard let relation = node["Relation Name"]?.string, relation.wholeMatch(of: bucketed) != nil else {
                return nil
            }
            let conditions = ["Index Cond", "Filter", "Recheck Cond"].compactMap { node[$0]?.string }
            return (relation, conditions.contains { $0.contains(keepsBucket) })
        }
    }

    @Test(
        "no hot-path statement spans buckets: every scan of a per-user table in their plans keeps to one bucket (bucket = $n)"
    )
    func hotPathStaysInOneBucket() async throws {
        try await TestDatabase.withFresh(buckets: 4) { db in
            #expect(try await db.scalar("SELECT buckets FROM herald.layout") == "4")
            for table in Self.bucketedTables {
                #expect(
                    try await db.scalar(
                        "SELECT attgenerated FROM pg_attribute WHERE attrelid = 'herald.\(table)'::regclass AND attname = 'bucket'"
                    ) == "s",
                    "\(table) has the stored bucket"
                )
            }
            let empty = "{}"
            // Binds by statement name without its version suffix.
            let binds: [String: [String]] = [
                "herald_claim": ["w", "1800000000", "60", "100", "3", "2", "1"],
                "herald_claim_turns": ["w", "1800000000", "60", "100", "3", "2", "1", #"{"default": "org-1"}"#],
                "herald_scopes_pending": ["2"],
                "herald_sends_from_inbox": ["{u1}", "{1800000000}", "2"],
                "herald_ack": ["w", empty, empty, empty, empty, empty, "2"],
                "herald_extend_leases": ["w", "1800000000", "60", "2"],
                "herald_reap": ["1800000000", "100", "w", "2"],
                "herald_free_stray_recipients": ["2"],
            ]
            func unversioned(_ name: String) -> String { name.replacing(#/_v\d+$/#, with: "") }
            let hotPath = OutboxStatements.hotPath
            #expect(Set(binds.keys) == Set(hotPath.map { unversioned($0.name) }), "every hot-path statement is checked")
            var claimed: Set<String> = []
            for statement in hotPath {
                let scans = try await Self.bucketScans(
                    statement,
                    binds: binds[unversioned(statement.name)] ?? [],
                    in: db
                )
                #expect(!scans.isEmpty, "\(statement.name) scans per-user tables")
                let spanning = scans.filter { !$0.keeps }.map(\.relation)
                #expect(spanning.isEmpty, "\(statement.name) scans without a bucket: \(spanning)")
                if unversioned(statement.name) == "herald_claim" { claimed = Set(scans.map(\.relation)) }
                // A function's own queries are not in the plan: one the statement calls that
                // reads a per-user table must be handed the bucket.
                for call in statement.sql.matches(of: #/herald\.([a-z_]+)\(([^()]*)\)/#) {
                    let tables = Self.bucketedTables.joined(separator: "|")
                    let readsPerUser =
                        try await db.scalar(
                            """
                            SELECT coalesce(bool_or(prosrc ~ '\\mherald\\.(\(tables))\\M'), false) FROM pg_proc
                            WHERE proname = '\(call.1)' AND pronamespace = 'herald'::regnamespace
                            """
                        ) == "t"
                    #expect(
                        !readsPerUser || call.2.contains("bucket"),
                        "\(statement.name) calls herald.\(call.1)(\(call.2)) without the bucket"
                    )
                    if call.1 == "recipient_unchanged_in_bucket" {
                        #expect(readsPerUser, "the check sees the function's query")
                    }
                }
            }
            // What the claim reads per user, each in the claim's bucket.
            #expect(
                claimed.isSuperset(of: ["outbox", "recipients", "devices", "preferences", "presence"]),
                "\(claimed)"
            )
            // Recent sends come from the recipient row the claim holds (migration 0016), not the inbox.
            #expect(!claimed.contains { $0.hasPrefix("inbox") }, "\(claimed)")
            // The check itself: a statement that reads every bucket (the queue's depth) is caught.
            let everyBucket = PostgresStatement(
                name: "depth",
                sql: "SELECT count(*) FROM herald.outbox WHERE state = 'pending'"
            )
            let depth = try await Self.bucketScans(everyBucket, binds: [], in: db)
            #expect(depth.contains { $0.relation == "outbox" && !$0.keeps })
        }
    }

    @Test(
        "buckets are fixed at install: 1 unless `database.buckets` says otherwise, not a power of two refused, another number on an installed database refused with nothing changed"
    )
    func bucketsFixedAtInstall() async throws {
        try await TestDatabase.withFresh { db in
            #expect(try await db.scalar("SELECT buckets FROM herald.layout") == "1")
            #expect(try await db.int("SELECT count(*) FROM herald.recipients") == 0)
            try await db.exec("INSERT INTO herald.recipients (user_id) VALUES ('alice'), ('bob')")
            #expect(try await db.rows("SELECT DISTINCT bucket::text FROM herald.recipients") == [["0"]])
            await #expect(throws: ConfigurationError.self) {
                try await Migrator(pool: db.pool, schema: Migrator.embedded, buckets: 8).migrate(
                    logger: TestDatabase.logger
                )
            }
            #expect(try await db.scalar("SELECT buckets FROM herald.layout") == "1")
            // Naming the number it has changes nothing either.
            _ = try await Migrator(pool: db.pool, schema: Migrator.embedded, buckets: 1).migrate(
                logger: TestDatabase.logger
            )
        }
        try await Self.withEmptyDatabase { db in
            let error = await #expect(throws: ConfigurationError.self) {
                try await Migrator(pool: db.pool, schema: Migrator.embedded, buckets: 6).migrate(
                    logger: TestDatabase.logger
                )
            }
            #expect(error?.description.contains("power of two") == true, "\(String(describing: error))")
            _ = try await Migrator(pool: db.pool, schema: Migrator.embedded, buckets: 16).migrate(
                logger: TestDatabase.logger
            )
            let rows = try await db.pool.withConnection { connection in
                try await connection.simpleQuery(
                    """
                    SELECT (SELECT buckets FROM herald.layout)::text,
                           (SELECT count(DISTINCT herald.bucket_of('user-' || i)) FROM generate_series(1, 400) i)::text
                    """,
                    name: "layout"
                )
            }.rows
            #expect(rows.first?[0] == "16")
            #expect(rows.first?[1] == "16", "400 users spread over all 16 buckets: \(rows)")
        }
    }

    @Test("the ack's composite types in the database have the fields, in order, that the worker writes")
    func compositeTypesMatch() async throws {
        try await TestDatabase.withFresh { db in
            for type in OutboxStatements.compositeTypes {
                let fields = try await db.rows(
                    """
                    SELECT a.attname FROM pg_attribute a
                    WHERE a.attrelid = (SELECT typrelid FROM pg_type WHERE oid = '\(type.name)'::regtype)
                      AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
                    """
                ).compactMap { $0[0] }
                #expect(fields == type.fields, "\(type.name)")
            }
        }
    }

    @Test(
        "a batch of composite rows survives quoting: quotes, backslashes, commas, parentheses, braces, empty text, NULL, NUL bytes, Unicode"
    )
    func compositeRecordsRoundTrip() async throws {
        let nasty = [
            #"a "quoted" \ back\slash"#, "(paren), {brace}, comma", "", "åäö 🚆 \u{1E}", "NULL", "x\u{0}y", " lead",
        ]
        var records = PostgresRecords(OutboxStatements.inboxRecord)
        for (i, text) in nasty.enumerated() {
            records.row {
                $0.field("job_id", Int64(i))
                $0.field("user_id", text)
                $0.field("category", "c")
                $0.field("title", text)
                $0.field("body", i.isMultiple(of: 2) ? text : nil as String?)
                $0.field("route", nil as String?)
                $0.field("metadata", #"{"k": "\#(i)"}"#)
                $0.field("coalesce_key", text)
                $0.field("scope", nil as String?)
                $0.field("summary_count", i)
            }
        }
        try await TestDatabase.withFresh { db in
            let statement = PostgresStatement(
                name: "test_inbox_records",
                sql: """
                    SELECT job_id::text, user_id, title, body, route, metadata->>'k', coalesce_key, scope,
                           summary_count::text
                    FROM unnest($1::herald.inbox_record[]) ORDER BY job_id
                    """
            )
            let rows = try await db.pool.query(statement, [records.encoded()]).rows
            #expect(rows.count == nasty.count)
            for (i, row) in rows.enumerated() {
                let text = nasty[i].replacingOccurrences(of: "\u{0}", with: "")
                #expect(
                    row == [
                        String(i), text, text, i.isMultiple(of: 2) ? text : nil, nil, String(i), text, nil, String(i),
                    ]
                )
            }
        }
    }

    @Test(
        "a bind with a NUL byte is refused with PostgreSQL's own SQLSTATE (22021), wherever the byte lies; the same text without it goes through"
    )
    func nulBindRefused() async throws {
        try await TestDatabase.withFresh { db in
            let statement = PostgresStatement(name: "test_nul_bind", sql: "SELECT length($1::text)::text")
            let long = String(repeating: "abcdefgh", count: 50_000)
            for text in ["\u{0}", "x\u{0}", long + "\u{0}" + long, "åäö 🚆\u{0}"] {
                do {
                    _ = try await db.pool.query(statement, [text])
                    Issue.record("a NUL byte went through")
                } catch let error as PostgresError {
                    #expect(error.sqlState == "22021")
                }
                let clean = text.replacingOccurrences(of: "\u{0}", with: "")
                #expect(try await db.pool.query(statement, [clean]).rows == [[String(clean.count)]])
            }
        }
    }

    @Test(
        "a statement that asks for its generic plan runs on it from its first execution; the next statement on the same connection that does not ask gets PostgreSQL's own choice back"
    )
    func genericPlanPerStatement() async throws {
        // One connection: every statement below shares its session.
        try await TestDatabase.withFresh(poolSize: 1) { db in
            let generic = PostgresStatement(
                name: "test_generic_plan",
                sql:
                    "SELECT current_setting('plan_cache_mode'), count(*)::text FROM herald.outbox WHERE id = $1::bigint",
                genericPlan: true
            )
            let chosen = PostgresStatement(name: "test_chosen_plan", sql: "SELECT current_setting('plan_cache_mode')")
            for round in 1...3 {
                #expect(try await db.pool.query(generic, [String(round)]).rows == [["force_generic_plan", "0"]])
                #expect(try await db.pool.query(chosen).scalar == "auto")
            }
            // PostgreSQL's own record: the generic plan from the first of the three executions,
            // never a custom one (by default the first five would have been custom).
            let plans = try await db.pool.query(
                PostgresStatement(
                    name: "test_prepared_plans",
                    sql: "SELECT generic_plans::text, custom_plans::text FROM pg_prepared_statements WHERE name = $1"
                ),
                [generic.name]
            ).rows
            #expect(plans == [["3", "0"]])
        }
    }

    @Test(
        "records and arrays PostgreSQL writes read back field by field: nested, NULL vs empty, quotes, backslashes, Unicode"
    )
    func recordTextReadsBack() async throws {
        let nasty = [
            #"a "quoted" \ back\slash"#, "(paren), {brace}, comma", "", "åäö 🚆 \u{1E}", "NULL", " lead", "plain",
        ]
        try await TestDatabase.withFresh { db in
            // Each record: ordinal, the text, NULL, empty text, an array of records, an array of
            // text with a NULL element, an empty array; as the claim nests them (arrays of records
            // inside a record).
            let statement = PostgresStatement(
                name: "test_record_text",
                sql: """
                    SELECT ROW(n::text, t, NULL::text, '', ARRAY[ROW(t, NULL::text, ''::text), ROW('x', t, NULL)],
                               ARRAY[t, NULL], '{}'::text[])::text
                    FROM unnest($1::text[]) WITH ORDINALITY AS x(t, n) ORDER BY n
                    """
            )
            let rows = try await db.pool.query(statement, [PostgresArray.encode(nasty)]).rows
            #expect(rows.count == nasty.count)
            for (i, row) in rows.enumerated() {
                let text = nasty[i]
                let fields = PostgresText.recordFields(row[0] ?? "")
                #expect(fields.count == 7)
                guard fields.count == 7 else { continue }
                #expect(fields[0] == String(i + 1))
                #expect(fields[1] == text)
                #expect(fields[2] == nil)
                #expect(fields[3] == "")
                let records = PostgresText.arrayElements(fields[4] ?? "").map { PostgresText.recordFields($0 ?? "") }
                #expect(records == [[text, nil, ""], ["x", text, nil]])
                #expect(PostgresText.arrayElements(fields[5] ?? "") == [text, nil])
                #expect(fields[6] == "{}" && PostgresText.arrayElements("{}").isEmpty)
            }
        }
        #expect(PostgresText.recordFields("()") == [nil])
        #expect(PostgresText.recordFields("(a,)") == ["a", nil])
        #expect(PostgresText.recordFields("not a record").isEmpty)
    }

    @Test("migrate again: nothing applied, functions re-applied, the schema and a configured identity unchanged")
    func migrateIsIdempotent() async throws {
        try await TestDatabase.withFresh { db in
            let before = try await Self.signature(of: db)
            _ = try await db.scalar("SELECT herald.configure_identity($$current_setting('app.user', true)$$)")
            let configured = try await db.scalar(
                "SELECT prosrc || coalesce(pg_get_function_sqlbody(oid), '') FROM pg_proc WHERE proname = 'current_user_id'"
            )
            // A function edited by hand (a hotfix) is put back to its definition in sql/.
            try await db.exec(
                "CREATE OR REPLACE FUNCTION herald.max_payload_bytes() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$"
            )
            let result = try await Self.migrate(db, Migrator.embedded)
            #expect(result.applied.isEmpty)
            #expect(result.functionFiles == Migrator.embedded.functions.count)
            #expect(try await db.int("SELECT herald.max_payload_bytes()") == 3584)
            #expect(
                try await db.scalar(
                    "SELECT prosrc || coalesce(pg_get_function_sqlbody(oid), '') FROM pg_proc WHERE proname = 'current_user_id'"
                ) == configured
            )
            let after = try await Self.signature(of: db)
            #expect(
                after.filter { !$0.contains("current_user_id()") }
                    == before.filter { !$0.contains("current_user_id()") }
            )
        }
    }

    @Test("a database migrated by a newer release is left untouched, with a clear error")
    func newerDatabaseIsLeftAlone() async throws {
        try await TestDatabase.withFresh { db in
            let next = Migrator.embedded.migrations.count + 1
            try await db.exec(
                "INSERT INTO herald.schema_migrations (version, name) VALUES (\(next), 'from_the_future')"
            )
            try await db.exec(
                "CREATE OR REPLACE FUNCTION herald.max_payload_bytes() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT 4096 $$"
            )
            let error = await #expect(throws: Migrator.SchemaIsNewer.self) {
                _ = try await Self.migrate(db, Migrator.embedded)
            }
            #expect(error?.description.contains("schema version \(next), newer than this herald's \(next - 1)") == true)
            #expect(try await db.int("SELECT herald.max_payload_bytes()") == 4096, "the newer release's function stays")
        }
    }
}
