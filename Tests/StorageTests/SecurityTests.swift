import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Queue
import Testing

/// Least privilege, row-level security and identity checks (sql/migrations/0004_security.sql, sql/functions/02_security.sql), against a
/// real PostgreSQL. App users are played by a per-test role granted with `herald.grant_app_role`
/// under `SET LOCAL ROLE`, the way PostgREST and Supabase switch roles per request.
@Suite("Security: roles, row-level security, identity")
struct SecurityTests {
    static let payload = #"{"title":"Hi","body":"there"}"#

    // MARK: - Roles and grants

    @Test("the migration creates NOLOGIN worker, backend and admin roles and locks functions down")
    func rolesAndFunctionGrants() async throws {
        try await TestDatabase.withFresh { db in
            let roles = try await db.rows("SELECT kind, role_name FROM herald.security_roles ORDER BY kind")
            #expect(
                roles == [["admin", "herald_admin"], ["backend", "herald_backend"], ["worker", "herald_worker"]]
            )
            #expect(
                try await db.int(
                    "SELECT count(*) FROM pg_roles WHERE rolname IN ('herald_worker', 'herald_backend', 'herald_admin') AND NOT rolcanlogin AND NOT rolsuper AND NOT rolbypassrls"
                ) == 3
            )
            let definers = try await db.rows(
                """
                SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'herald'::regnamespace AND p.prosecdef
                  AND p.proconfig @> ARRAY['search_path=pg_catalog, herald, pg_temp'] ORDER BY 1
                """
            ).map { $0[0] ?? "" }
            #expect(
                Set(definers).isSuperset(of: [
                    "enqueue", "enqueue_many", "cancel", "register_device", "unregister_device", "set_presence",
                    "mark_read", "mark_all_read", "dismiss", "dismiss_all",
                ])
            )
            let publicExecutable = try await db.rows(
                """
                SELECT p.oid::regprocedure::text FROM pg_proc p
                WHERE p.pronamespace = 'herald'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE')
                """
            ).map { $0[0] ?? "" }
            // RLS policies call current_user_id; every insert into a per-user table computes its
            // stored bucket with bucket_of (an app role writing its preferences too), a pure hash.
            #expect(publicExecutable.sorted() == ["herald.bucket_of(text)", "herald.current_user_id()"])
        }
    }

    @Test("the backend role enqueues for anyone but cannot touch herald.outbox directly")
    func backendEnqueuesWithoutTablePrivileges() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            let job = try await db.asRole(
                "herald_backend",
                user: nil,
                "SELECT herald.enqueue('anyone', 'chat', '\(Self.payload)', '{\"dedupKey\":\"k1\"}')"
            )
            #expect(job.scalar.flatMap { Int64($0) } != nil)
            #expect(
                try await db.asRole(
                    "herald_backend",
                    user: nil,
                    "SELECT herald.enqueue_many(ARRAY['a', 'b'], 'chat', '\(Self.payload)')"
                ).scalar == "2"
            )
            #expect(try await db.asRole("herald_backend", user: nil, "SELECT herald.cancel('k1')").scalar == "1")
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 2)

            for statement in [
                "INSERT INTO herald.outbox (user_id, category, priority, payload, expires_at, max_attempts) VALUES ('x', 'chat', 2, '{}', now() + interval '1 day', 3)",
                "UPDATE herald.outbox SET attempt = 0",
                "DELETE FROM herald.outbox",
                "SELECT count(*) FROM herald.outbox",
                "SELECT * FROM herald.enqueue_rows(ARRAY['x'], 'chat', '\(Self.payload)', '{}')",
                "INSERT INTO herald.categories (name) VALUES ('sneaky')",
                "SELECT herald.configure_identity('''mallory''')",
                "SELECT herald.grant_app_role('herald_backend')",
            ] {
                #expect(await db.sqlState(asRole: "herald_backend", user: nil, statement) == "42501", "\(statement)")
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 2)
        }
    }

    @Test("the worker role reads and writes every herald table but has no DDL")
    func workerHasNoDDL() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("alice", "local", "a1")
            try await db.registerDevice("bob", "local", "b1")
            // RLS lets the worker see every user's rows.
            #expect(
                try await db.asRole("herald_worker", user: nil, "SELECT count(*) FROM herald.devices").scalar == "2"
            )
            #expect(
                try await db.asRole("herald_worker", user: "alice", "SELECT count(*) FROM herald.devices").scalar == "2"
            )
            for statement in [
                "CREATE TABLE herald.scratch (id int)",
                "CREATE TABLE public.scratch (id int)",
                "ALTER TABLE herald.outbox ADD COLUMN scratch int",
                "DROP TABLE herald.inbox",
                "TRUNCATE herald.outbox",
                "CREATE INDEX scratch ON herald.outbox (id)",
                "CREATE FUNCTION herald.scratch() RETURNS int LANGUAGE sql AS 'SELECT 1'",
                "INSERT INTO herald.schema_migrations (version, name) VALUES (999, 'x')",
                "SELECT herald.configure_identity('''x''')",
            ] {
                #expect(await db.sqlState(asRole: "herald_worker", user: nil, statement) == "42501", "\(statement)")
            }
        }
    }

    // MARK: - Row-level security and identity checks

    @Test("a signed-in user reaches only their own preferences, inbox and devices, through tables and functions")
    func usersReachOnlyTheirOwnRows() async throws {
        try await withRoleAndDatabase("herald_test_app") { app, db in
            let ids = try await db.seedTwoUsers(appRole: app)
            func asAlice(_ sql: String) async throws -> String? {
                try await db.asRole(app, user: "alice", sql).scalar
            }
            func deniedForAlice(_ sql: String) async -> String? {
                await db.sqlState(asRole: app, user: "alice", sql)
            }

            // Reads see only alice's rows.
            #expect(try await asAlice("SELECT string_agg(user_id, ',') FROM herald.preferences") == "alice")
            #expect(try await asAlice("SELECT string_agg(DISTINCT user_id, ',') FROM herald.inbox") == "alice")
            #expect(try await asAlice("SELECT count(*) FROM herald.inbox") == "2")
            #expect(try await asAlice("SELECT string_agg(token, ',') FROM herald.devices") == "alice-phone")
            #expect(
                try await asAlice("SELECT string_agg(DISTINCT user_id, ',') FROM herald.local_notifications") == "alice"
            )

            // Writes to bob's rows through the tables reach nothing, or are refused.
            let bobInbox = ids.bob.map(String.init).joined(separator: ",")
            #expect(
                try await asAlice(
                    Self.count(
                        "UPDATE herald.preferences SET preferences = '{\"enabled\":false}' WHERE user_id = 'bob'"
                    )
                ) == "0"
            )
            #expect(try await asAlice(Self.count("DELETE FROM herald.preferences WHERE user_id = 'bob'")) == "0")
            #expect(
                try await asAlice(Self.count("UPDATE herald.inbox SET read_at = now() WHERE id IN (\(bobInbox))"))
                    == "0"
            )
            #expect(try await asAlice(Self.count("DELETE FROM herald.inbox WHERE user_id = 'bob'")) == "0")
            #expect(try await asAlice(Self.count("DELETE FROM herald.devices WHERE user_id = 'bob'")) == "0")
            #expect(await deniedForAlice("INSERT INTO herald.preferences (user_id) VALUES ('bob')") == "42501")
            #expect(
                await deniedForAlice("UPDATE herald.preferences SET user_id = 'bob' WHERE user_id = 'alice'") == "42501"
            )
            #expect(await deniedForAlice("UPDATE herald.inbox SET user_id = 'bob'") == "42501")  // column not granted
            #expect(
                await deniedForAlice(
                    "INSERT INTO herald.inbox (user_id, category, title, body) VALUES ('alice', 'chat', 't', 'b')"
                ) == "42501"
            )
            #expect(
                await deniedForAlice(
                    "INSERT INTO herald.devices (user_id, provider, token) VALUES ('alice', 'local', 'x')"
                ) == "42501"
            )
            #expect(await deniedForAlice("DELETE FROM herald.local_notifications") == "42501")

            // ...and through every function path.
            for statement in [
                "SELECT herald.mark_read('bob', ARRAY[\(bobInbox)]::bigint[])",
                "SELECT herald.mark_all_read('bob')",
                "SELECT herald.dismiss('bob', ARRAY[\(bobInbox)]::bigint[])",
                "SELECT herald.dismiss_all('bob')",
                "SELECT herald.register_device('bob', 'local', 'planted')",
                "SELECT herald.set_presence('bob', 'conversation:1', interval '5 minutes')",
                "SELECT herald.enqueue('bob', 'chat', '\(Self.payload)')",
                "SELECT herald.enqueue_many(ARRAY['bob'], 'chat', '\(Self.payload)')",
                "SELECT herald.cancel('anything')",
                "SELECT herald.change_inbox('bob', NULL, true, NULL)",
            ] {
                #expect(await deniedForAlice(statement) == "42501", "\(statement)")
            }
            #expect(try await asAlice("SELECT herald.mark_read('alice', ARRAY[\(bobInbox)]::bigint[])") == "0")
            #expect(try await asAlice("SELECT herald.dismiss('alice', ARRAY[\(bobInbox)]::bigint[])") == "0")
            #expect(try await asAlice("SELECT herald.unregister_device('local', 'bob-phone')") == "f")

            // Bob's rows are untouched.
            #expect(try await db.unreadCount("bob") == 2)
            #expect(try await db.int("SELECT count(*) FROM herald.devices WHERE user_id = 'bob'") == 1)
            #expect(
                try await db.scalar("SELECT preferences->>'enabled' FROM herald.preferences WHERE user_id = 'bob'")
                    == "true"
            )
            #expect(try await db.int("SELECT count(*) FROM herald.presence") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE user_id = 'bob'") == 0)

            // Alice does all of it on her own rows.
            #expect(try await asAlice("SELECT herald.mark_read('alice', ARRAY[\(ids.alice[0])]::bigint[])") == "1")
            #expect(try await asAlice("SELECT herald.dismiss('alice', ARRAY[\(ids.alice[1])]::bigint[])") == "1")
            #expect(try await asAlice("SELECT herald.mark_all_read('alice')") == "0")
            #expect(try await asAlice("SELECT herald.dismiss_all('alice')") == "1")
            #expect(
                try await asAlice("SELECT herald.register_device('alice', 'local', 'alice-tablet') IS NOT NULL") == "t"
            )
            #expect(try await asAlice("SELECT herald.unregister_device('local', 'alice-tablet')") == "t")
            _ = try await asAlice("SELECT herald.set_presence('alice', 'conversation:1', interval '5 minutes')")
            #expect(
                try await asAlice(Self.count("UPDATE herald.preferences SET preferences = '{\"enabled\":false}'"))
                    == "1"
            )
            #expect(try await asAlice(Self.count("UPDATE herald.inbox SET read_at = now()")) == "2")
            #expect(try await asAlice(Self.count("DELETE FROM herald.inbox")) == "2")
            #expect(try await asAlice(Self.count("DELETE FROM herald.devices")) == "1")
            #expect(try await asAlice(Self.count("DELETE FROM herald.preferences")) == "1")
            #expect(
                try await asAlice(
                    Self.count(
                        "INSERT INTO herald.preferences (user_id, preferences) VALUES ('alice', '{\"enabled\":true}')"
                    )
                ) == "1"
            )
            #expect(try await db.int("SELECT count(*) FROM herald.presence WHERE user_id = 'alice'") == 1)
            // Her read and dismiss calls synced her other devices; bob got nothing.
            #expect(
                try await db.int(
                    "SELECT count(*) FROM herald.outbox WHERE user_id = 'alice' AND category = 'herald.sync'"
                ) == 3
            )
            #expect(try await db.unreadCount("bob") == 2)

            // An app role with no signed-in user reaches nothing and may not act for anyone.
            #expect(try await db.asRole(app, user: nil, "SELECT count(*) FROM herald.inbox").scalar == "0")
            #expect(await db.sqlState(asRole: app, user: nil, "SELECT herald.mark_all_read('bob')") == "42501")
            #expect(
                await db.sqlState(asRole: app, user: nil, "SELECT herald.unregister_device('local', 'bob-phone')")
                    == "42501"
            )
        }
    }

    @Test("the admin role sees and assists every user; the backend acts for anyone only while no user is signed in")
    func adminAndBackend() async throws {
        try await withRoleAndDatabase("herald_test_app") { app, db in
            let ids = try await db.seedTwoUsers(appRole: app)
            for user in [nil, "alice"] as [String?] {
                #expect(
                    try await db.asRole("herald_admin", user: user, "SELECT count(*) FROM herald.inbox").scalar == "4"
                )
                #expect(
                    try await db.asRole("herald_admin", user: user, "SELECT count(*) FROM herald.preferences").scalar
                        == "2"
                )
                #expect(
                    try await db.asRole("herald_admin", user: user, "SELECT count(*) FROM herald.devices").scalar == "2"
                )
            }
            #expect(
                try await db.asRole(
                    "herald_admin",
                    user: "alice",
                    "SELECT herald.mark_read('bob', ARRAY[\(ids.bob[0])]::bigint[])"
                ).scalar == "1"
            )
            #expect(
                try await db.asRole(
                    "herald_admin",
                    user: nil,
                    Self.count("UPDATE herald.preferences SET preferences = '{}' WHERE user_id = 'bob'")
                ).scalar == "1"
            )
            #expect(
                try await db.asRole(
                    "herald_admin",
                    user: nil,
                    Self.count("UPDATE herald.categories SET ttl = '2 hours'")
                ).scalar == "2"
            )

            // Backend, no end user: a trusted server acting for anyone through the functions...
            #expect(
                try await db.asRole(
                    "herald_backend",
                    user: nil,
                    "SELECT herald.mark_read('bob', ARRAY[\(ids.bob[1])]::bigint[])"
                ).scalar == "1"
            )
            #expect(
                try await db.asRole(
                    "herald_backend",
                    user: nil,
                    "SELECT herald.register_device('carol', 'local', 'carol-phone') IS NOT NULL"
                )
                .scalar == "t"
            )
            // ...but its direct table reads follow RLS like any app role.
            #expect(try await db.asRole("herald_backend", user: nil, "SELECT count(*) FROM herald.inbox").scalar == "0")
            // Backend acting for a signed-in user: only that user.
            #expect(
                try await db.asRole("herald_backend", user: "alice", "SELECT count(*) FROM herald.inbox").scalar == "2"
            )
            #expect(
                await db.sqlState(asRole: "herald_backend", user: "alice", "SELECT herald.dismiss_all('bob')")
                    == "42501"
            )
            #expect(
                try await db.asRole(
                    "herald_backend",
                    user: "alice",
                    "SELECT herald.enqueue('bob', 'chat', '\(Self.payload)') IS NOT NULL"
                )
                .scalar == "t"
            )
        }
    }

    @Test("identity from a PostgREST JWT claim, or from Supabase's auth.uid()")
    func configurableIdentity() async throws {
        try await withRoleAndDatabase("herald_test_app") { app, db in
            _ = try await db.seedTwoUsers(appRole: app)
            // PostgREST: request.jwt.claims holds the verified JWT's claims for the transaction.
            #expect(
                try await db.scalar(
                    #"SELECT herald.configure_identity($e$nullif(current_setting('request.jwt.claims', true), '')::json->>'sub'$e$)"#
                ) != nil
            )
            let claims = #"SELECT set_config('request.jwt.claims', '{"sub":"bob","role":"authenticated"}', true);"#
            #expect(
                try await db.asRole(
                    app,
                    user: nil,
                    claims + "SELECT string_agg(DISTINCT user_id, ',') FROM herald.inbox"
                ).scalar == "bob"
            )
            #expect(
                try await db.asRole(app, user: "alice", claims + "SELECT herald.mark_all_read('bob')").scalar == "2"
            )
            #expect(
                await db.sqlState(asRole: app, user: "bob", claims + "SELECT herald.mark_all_read('alice')") == "42501"
            )
            // herald.user_id no longer counts.
            #expect(try await db.asRole(app, user: "alice", "SELECT count(*) FROM herald.inbox").scalar == "0")

            // The form without nullif works while the claims are set.
            _ = try await db.scalar(
                #"SELECT herald.configure_identity($e$current_setting('request.jwt.claims', true)::json->>'sub'$e$)"#
            )
            #expect(try await db.asRole(app, user: nil, claims + "SELECT count(*) FROM herald.inbox").scalar == "2")

            // Supabase: auth.uid() reads the same claims; user ids are UUIDs.
            let uid = "6f1e3c1a-9a57-4d2c-8d6e-0b8f0d3f5a11"
            try await db.exec(
                """
                CREATE SCHEMA auth;
                CREATE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE AS $$
                    SELECT coalesce(nullif(current_setting('request.jwt.claim.sub', true), ''),
                                    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub'))::uuid $$;
                GRANT USAGE ON SCHEMA auth TO \(app);
                INSERT INTO herald.preferences (user_id, preferences) VALUES ('\(uid)', '{"enabled":true}');
                """
            )
            #expect(try await db.scalar("SELECT herald.configure_identity('auth.uid()::text')") == "auth.uid()::text")
            let supabaseClaims =
                #"SELECT set_config('request.jwt.claims', '{"sub":"\#(uid)","role":"authenticated"}', true);"#
            #expect(
                try await db.asRole(
                    app,
                    user: nil,
                    supabaseClaims + "SELECT string_agg(user_id, ',') FROM herald.preferences"
                )
                .scalar == uid
            )

            // An expression that does not compile is refused and leaves the identity as it was.
            #expect(
                await db.sqlState(asRole: nil, user: nil, "SELECT herald.configure_identity('auth.no_such_function()')")
                    == "22023"
            )
            #expect(
                await db.sqlState(
                    asRole: nil,
                    user: nil,
                    "SELECT herald.configure_identity('1; DROP TABLE herald.inbox')"
                ) == "22023"
            )
            #expect(
                try await db.asRole(app, user: nil, supabaseClaims + "SELECT count(*) FROM herald.preferences").scalar
                    == "1"
            )
            // NULL restores the default.
            _ = try await db.scalar("SELECT herald.configure_identity(NULL)")
            #expect(try await db.asRole(app, user: "alice", "SELECT count(*) FROM herald.inbox").scalar == "2")
        }
    }

    // MARK: - Backend integration

    @Test("a trigger on an app table enqueues in the same transaction; a rollback leaves no job")
    func appTableTrigger() async throws {
        try await withRoleAndDatabase("herald_test_app") { app, db in
            try await db.addCategory("new_message")
            try await db.exec("SELECT herald.grant_app_role('\(app)')")
            try await db.exec(Self.messagesTrigger + "\nGRANT SELECT, INSERT ON public.messages TO \(app);")
            let insert =
                "INSERT INTO public.messages (sender_id, recipient_id, body) VALUES ('alice', 'bob', 'Is the bread still available?')"

            // As the owner, and as a signed-in app user who has no herald privileges at all.
            try await db.exec(insert)
            _ = try await db.asRole(app, user: "alice", insert)
            let jobs = try await db.rows(
                "SELECT user_id, category, payload->>'title', payload->>'body', options->>'context' FROM herald.outbox ORDER BY id"
            )
            #expect(jobs.count == 2)
            #expect(
                jobs.first == [
                    "bob", "new_message", "New message from alice", "Is the bread still available?",
                    "conversation:alice:bob",
                ]
            )

            // Rolled back: neither the message nor the notification exists.
            try await db.pool.withConnection { c in
                try await c.execute("BEGIN; \(insert); ROLLBACK", name: "test")
            }
            #expect(try await db.int("SELECT count(*) FROM public.messages") == 2)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 2)

            // An enqueue that herald refuses (here: no recipient) aborts the app's insert too.
            #expect(
                await db.sqlState(
                    asRole: nil,
                    user: nil,
                    "INSERT INTO public.messages (sender_id, recipient_id, body) VALUES ('alice', '', 'x')"
                ) == "22004"
            )
            #expect(try await db.int("SELECT count(*) FROM public.messages") == 2)
        }
    }

    /// The docs/supabase.md example, verbatim apart from the schema of the app table.
    static let messagesTrigger = """
        CREATE TABLE public.messages (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            sender_id    text NOT NULL,
            recipient_id text NOT NULL,
            body         text NOT NULL,
            created_at   timestamptz NOT NULL DEFAULT now()
        );

        CREATE FUNCTION public.notify_new_message() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        BEGIN
            PERFORM herald.enqueue(
                NEW.recipient_id, 'new_message',
                jsonb_build_object(
                    'title', 'New message from ' || NEW.sender_id,
                    'body', left(NEW.body, 200),
                    'route', '/messages/' || NEW.id,
                    'metadata', jsonb_build_object('messageId', NEW.id::text, 'senderId', NEW.sender_id)),
                jsonb_build_object('context', 'conversation:' || least(NEW.sender_id, NEW.recipient_id)
                                              || ':' || greatest(NEW.sender_id, NEW.recipient_id)));
            RETURN NEW;
        END
        $$;
        REVOKE EXECUTE ON FUNCTION public.notify_new_message() FROM PUBLIC;

        CREATE TRIGGER messages_notify AFTER INSERT ON public.messages
            FOR EACH ROW EXECUTE FUNCTION public.notify_new_message();
        """

    // MARK: - The worker process

    @Test("herald run refuses a superuser connection unless security.allow_superuser is true")
    func superuserRefused() async throws {
        try await TestDatabase.withFresh { db in
            let (status, output) = try await HeraldBinary.run(
                ["run"],
                environment: [
                    "HERALD_DATABASE_URL": db.url, "HERALD_SECURITY_ALLOW_SUPERUSER": "false", "HERALD_HTTP_PORT": "0",
                ]
            )
            #expect(status != 0)
            #expect(output.contains("security.allow_superuser"), "\(output)")
            #expect(output.contains("HERALD_SECURITY_ALLOW_SUPERUSER=true"))
            // The guard judges the login: a superuser that starts as herald_worker (and could
            // SET ROLE back at any time) is still a superuser.
            let disguised = db.url + (db.url.contains("?") ? "&" : "?") + "options=-c%20role%3Dherald_worker"
            let (bypassStatus, bypassOutput) = try await HeraldBinary.run(
                ["run"],
                environment: [
                    "HERALD_DATABASE_URL": disguised, "HERALD_SECURITY_ALLOW_SUPERUSER": "false",
                    "HERALD_HTTP_PORT": "0",
                ]
            )
            #expect(bypassStatus != 0)
            #expect(bypassOutput.contains("security.allow_superuser"), "\(bypassOutput)")
            let (typoStatus, typoOutput) = try await HeraldBinary.run(
                ["check-config"],
                environment: ["HERALD_DATABASE_URL": db.url, "HERALD_SECURITY_ALLOW_SUPERUSER": "ture"]
            )
            #expect(typoStatus != 0)
            #expect(typoOutput.contains("security.allow_superuser: must be true or false"), "\(typoOutput)")
        }
    }

    @Test("herald run refuses a login that is not a superuser itself but may SET ROLE to one")
    func superuserMemberRefused() async throws {
        try await withRoleAndDatabase("herald_test_climber", options: "LOGIN") { climber, db in
            try await db.exec("GRANT herald_worker TO \(climber)")
            try await db.exec("GRANT postgres TO \(climber)")  // membership: SET ROLE postgres works
            let (status, output) = try await HeraldBinary.run(
                ["run"],
                environment: [
                    "HERALD_DATABASE_URL": TestDatabase.withUser(db.url, climber),
                    "HERALD_SECURITY_ALLOW_SUPERUSER": "false",
                    "HERALD_HTTP_PORT": "0",
                ]
            )
            try? await db.exec("REVOKE postgres FROM \(climber)")
            #expect(status != 0)
            #expect(output.contains("security.allow_superuser"), "\(output)")
        }
    }

    @Test("herald run as a login role granted only herald_worker delivers end to end")
    func workerRoleDelivers() async throws {
        try await withRoleAndDatabase("herald_test_worker", options: "LOGIN") { worker, db in
            // herald_worker exists once a database is migrated (here: the template).
            try await db.exec("GRANT herald_worker TO \(worker)")
            try await db.addCategory("chat")
            try await db.addCategory("alarm", priority: "critical", maxAttempts: 1)
            try await db.exec(
                "SELECT herald.register_device('u' || g, 'local', 'dev-' || g) FROM generate_series(1, 50) g"
            )
            _ = try await db.outbox().enqueueMany(
                users: (1...50).map { "u\($0)" },
                category: "chat",
                payloadJSON: Self.payload
            )
            try await db.enqueue("nobody", "alarm")  // no device: a critical job leaves an in-app alert
            let (process, pipe) = try HeraldBinary.start(
                ["run"],
                environment: [
                    "HERALD_DATABASE_URL": TestDatabase.withUser(db.url, worker), "HERALD_HTTP_PORT": "0",
                    "HERALD_SECURITY_ALLOW_SUPERUSER": "false", "HERALD_LOG_LEVEL": "warning",
                    "HERALD_MAINTENANCE_REAP_INTERVAL_SECONDS": "1", "HERALD_MAINTENANCE_PRUNE_INTERVAL_SECONDS": "1",
                ]
            )
            for _ in 0..<300 {  // stop as soon as the condition no longer holds
                guard try await db.int("SELECT count(*) FROM herald.outbox") > 0 else { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            try await Task.sleep(for: .milliseconds(1500))  // one maintenance pass as leader
            kill(process.processIdentifier, SIGTERM)
            let output = await readToEndOffPool(pipe)
            await waitUntilExitOffPool(process)
            let log = String(decoding: output, as: UTF8.self)
            #expect(process.terminationStatus == 0, "\(log)")
            #expect(!log.contains("permission denied"), "\(log)")
            // A privilege problem shows as a failed pass; a pass cancelled by the statement
            // timeout on a loaded machine (57014) is not one, and the next pass retries it.
            let failures = log.split(separator: "\n").filter { $0.contains("failed") && !$0.contains("[57014]") }
            #expect(failures.isEmpty, "\(log)")
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.local_notifications WHERE device_id <> 0") == 50)
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE kind = 'notification'") == 50)
            #expect(
                try await db.int("SELECT count(*) FROM herald.inbox WHERE user_id = 'nobody' AND kind = 'alert'") == 1
            )
        }
    }

    static func count(_ dml: String) -> String {
        "WITH changed AS (\(dml) RETURNING 1) SELECT count(*) FROM changed"
    }
}
