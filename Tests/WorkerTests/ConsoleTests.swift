import Console
import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The console accounts every test here uses.
private let credentials = "ops:operator:operator-password-1\nsre:viewer:viewer-password-1\n"
private let op = "ops:operator-password-1"
private let viewer = "sre:viewer-password-1"

/// A real `herald run` serving the console, over a database with a real run's data.
private struct ConsoleRun {
    let db: TestDatabase
    let process: Process
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }

    static func start(_ db: TestDatabase) async throws -> ConsoleRun {
        let port = freePort()
        let (process, _) = try HeraldBinary.start(
            ["run"],
            environment: [
                "HERALD_DATABASE_URL": db.url, "HERALD_HTTP_PORT": "0", "HERALD_CONSOLE_PORT": "\(port)",
                "HERALD_CONSOLE_HOST": "127.0.0.1", "HERALD_CONSOLE_CREDENTIALS": credentials,
                "HERALD_LOG_LEVEL": "warning",
            ]
        )
        for _ in 0..<300 {  // until the console answers
            if (try? await curl(["\("http://127.0.0.1:\(port)")/style.css"]))?.status == 401 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        return ConsoleRun(db: db, process: process, port: port)
    }

    func stop() async {
        kill(process.processIdentifier, SIGTERM)
        await waitUntilExitOffPool(process)
    }

    func get(_ path: String, as account: String? = viewer) async throws -> (status: Int, body: String) {
        try await curl((account.map { ["-u", $0] } ?? []) + [base + path])
    }

    func post(
        _ path: String,
        _ fields: [String: String],
        as account: String = op,
        headers: [String] = []
    )
        async throws -> (status: Int, body: String)
    {
        var args = ["-u", account] + headers.flatMap { ["-H", $0] }
        for (k, v) in fields.sorted(by: { $0.key < $1.key }) { args += ["--data-urlencode", "\(k)=\(v)"] }
        return try await curl(args + [base + path])
    }

    /// The operator's CSRF token, read from a page as a browser would.
    func csrf() async throws -> String {
        let page = try await get("/control", as: op).body
        let match = try #require(page.firstMatch(of: /name="csrf" value="([0-9a-f]+)"/))
        return String(match.1)
    }
}

/// Debian's Chromium, headless: the page's DOM after it loaded (stylesheet included), and a
/// screenshot of it into `HERALD_CONSOLE_SCREENSHOTS` when that folder is set (docs/console.md).
private func chromium(
    _ url: String,
    screenshot name: String? = nil,
    width: Int = 1280,
    height: Int = 900
) async throws
    -> String
{
    let binary = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    let path = try #require(binary, "Chromium is not installed (make test installs Debian's chromium)")
    let common = [
        "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
        "--window-size=\(width),\(height)",
    ]
    func run(_ args: [String]) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = common + args
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = await readToEndOffPool(out)
        await waitUntilExitOffPool(process)
        return String(decoding: data, as: UTF8.self)
    }
    if let name, let folder = ProcessInfo.processInfo.environment["HERALD_CONSOLE_SCREENSHOTS"], !folder.isEmpty {
        _ = try await run(["--screenshot=\(folder)/\(name).png", url])
    }
    return try await run(["--dump-dom", url])
}

@Suite("Operator console", .serialized)
struct ConsoleTests {
    /// u1's quiet hours: an hour-long window starting two hours from now in Stockholm, so it
    /// never holds back the run's jobs (a fixed 22:00–07:00 failed every CI run at night).
    static let quietHours: (start: String, end: String) = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "Europe/Stockholm")!
        let hour = calendar.component(.hour, from: Date())
        func text(_ h: Int) -> String { (h % 24 < 10 ? "0" : "") + "\(h % 24):00" }
        return (text(hour + 2), text(hour + 3))
    }()

    /// A real run: two apps, a category with a deadline, a user with preferences, a dead letter
    /// (settled by the real pipeline), and jobs delivered by `herald run` itself.
    private static func seed(_ db: TestDatabase) async throws -> (deadJob: Int64, deviceToken: String) {
        try await db.exec(
            """
            INSERT INTO herald.categories (name, app_id, priority, max_attempts, deadline) VALUES
                ('chat', 'foodshare', 'high', 3, '5 seconds'), ('listings', 'foodshare', 'normal', 3, NULL),
                ('sos', 'dsober', 'critical', 1, '5 seconds');
            SELECT herald.register_device('u' || g, 'local', 'secret-token-' || g) FROM generate_series(1, 20) g;
            INSERT INTO herald.preferences (user_id, preferences) VALUES ('u1',
                '{"eventToggles": {"listings": false}, "quietHours": {"enabled": true, "start": "\(Self.quietHours.start)",
                  "end": "\(Self.quietHours.end)"}, "timeZone": "Europe/Stockholm"}');
            """
        )
        try await db.registerDevice("v", "fcm", "flaky-token")
        let provider = ScriptedProvider()
        provider.answer("flaky-token", with: DeliveryOutcome(.retry, reason: .unavailable))
        let dead = try #require(try await db.enqueue("v", "sos"))
        _ = try await db.consumer(providers: ProviderRegistry([.fcm: provider])).runOnce()
        #expect(try await db.int("SELECT count(*) FROM herald.dead_letters WHERE job_id = \(dead)") == 1)
        let users = (1...20).map { "u\($0)" }
        _ = try await db.outbox().enqueueMany(
            users: users,
            category: "chat",
            payloadJSON: #"{"title":"Hi","body":"Lunch?"}"#
        )
        _ = try await db.outbox().enqueueMany(
            users: users,
            category: "listings",
            payloadJSON: #"{"title":"Soup","body":"Near you"}"#
        )
        return (dead, "secret-token-1")
    }

    @Test("every page loads in headless Chromium and shows the data of a real run; no device token on any page")
    func pagesInChromium() async throws {
        try await TestDatabase.withFresh { db in
            let (deadJob, token) = try await Self.seed(db)
            let run = try await ConsoleRun.start(db)
            for _ in 0..<300 {  // until the worker drained the outbox
                guard try await db.int("SELECT count(*) FROM herald.outbox") > 0 else { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            let signedIn = "http://\(viewer)@127.0.0.1:\(run.port)"
            let delivered = try await db.int(
                "SELECT count(*) FROM herald.delivery_log WHERE event = 'attempt' AND outcome = 'accepted' AND status = 'done'"
            )
            #expect(delivered == 39, "20 chat + 19 listings (u1 turned listings off)")

            let overview = try await chromium(signedIn + "/", screenshot: "overview")
            #expect(overview.contains(#"id="delivered">\#(delivered)<"#), "overview shows the last hour's deliveries")
            #expect(overview.contains("sre · viewer"))
            #expect(overview.contains("<td>chat</td><td>5 s</td>"), "chat against its 5 s deadline")
            #expect(overview.contains(#"<a href="/dead-letters">1</a>"#), "one open dead letter")
            _ = try await chromium(signedIn + "/", screenshot: "overview-phone", width: 390, height: 844)

            let jobs = try await chromium(signedIn + "/jobs?user=u1", screenshot: "jobs")
            let u1Jobs = try await db.rows(
                "SELECT DISTINCT job_id FROM herald.delivery_log WHERE user_id = 'u1' ORDER BY 1"
            )
            #expect(u1Jobs.count == 2)
            for row in u1Jobs { #expect(jobs.contains(#"<a href="/jobs/\#(row[0] ?? "")">"#)) }
            #expect(jobs.contains("category_muted"), "u1's muted listing is found with its reason")

            let suppressed = try #require(
                try await db.scalar(
                    "SELECT job_id FROM herald.delivery_log WHERE user_id = 'u1' AND event = 'suppressed'"
                )
            )
            let job = try await chromium(signedIn + "/jobs/\(suppressed)", screenshot: "job")
            #expect(job.contains("Job \(suppressed)") && job.contains("category_muted") && job.contains("suppressed"))

            let user = try await chromium(signedIn + "/users/u1", screenshot: "user")
            #expect(user.contains("#" + Device.tokenHash(of: token)), "the device is shown by its hash")
            #expect(
                user.contains("Turned off: listings.")
                    && user.contains("Quiet hours \(Self.quietHours.start)–\(Self.quietHours.end) (Europe/Stockholm).")
            )
            #expect(user.contains("category_muted"), "the last notifications carry their reasons")

            let letters = try await chromium(signedIn + "/dead-letters", screenshot: "dead-letters")
            #expect(letters.contains(#"<a href="/jobs/\#(deadJob)">\#(deadJob)</a>"#))
            #expect(!letters.contains("Replay selected"), "a viewer sees no action")
            let operatorLetters = try await chromium(
                "http://\(op)@127.0.0.1:\(run.port)/dead-letters",
                screenshot: "dead-letters-operator"
            )
            #expect(operatorLetters.contains("Replay selected") && operatorLetters.contains(#"name="csrf""#))

            let control = try await chromium("http://\(op)@127.0.0.1:\(run.port)/control", screenshot: "control")
            #expect(control.contains("Nothing is paused.") && control.contains(#"id="pause-form""#))

            for page in [overview, jobs, job, user, letters, operatorLetters, control] {
                #expect(!page.contains("secret-token") && !page.contains("flaky-token"), "no device token on a page")
            }
            await run.stop()
        }
    }

    @Test(
        "without credentials every page answers 401; a viewer cannot act (403); a POST without the CSRF token or from another origin is refused; failed logins are limited"
    )
    func security() async throws {
        try await TestDatabase.withFresh { db in
            _ = try await Self.seed(db)
            let run = try await ConsoleRun.start(db)
            for path in ["/", "/jobs", "/jobs/1", "/users", "/users/u1", "/dead-letters", "/control", "/style.css"] {
                let anonymous = try await curl(["-i", run.base + path])
                #expect(anonymous.status == 401, "\(path)")
                #expect(anonymous.body.contains("WWW-Authenticate: Basic realm=\"Herald console\""), "\(path)")
            }
            for path in ["/", "/control"] {  // four failed logins
                #expect(try await run.get(path, as: "sre:not-the-password").status == 401, "\(path)")
                #expect(try await run.get(path, as: "nobody:viewer-password-1").status == 401, "\(path)")
            }
            #expect(try await curl(["-X", "POST", run.base + "/control"]).status == 401)

            let token = try await run.csrf()
            let pause = ["action": "pause", "category": "chat", "confirmed": "yes"]
            var withToken = pause
            withToken["csrf"] = token
            #expect(try await run.post("/control", withToken, as: viewer).status == 403, "a viewer cannot act")
            #expect(
                try await run.post(
                    "/dead-letters",
                    ["action": "purge", "id": "1", "confirmed": "yes", "csrf": token],
                    as: viewer
                ).status == 403
            )
            #expect(try await run.post("/control", pause).status == 403, "no CSRF token")
            var wrong = pause
            wrong["csrf"] = String(repeating: "0", count: token.count)
            #expect(try await run.post("/control", wrong).status == 403, "a wrong CSRF token")
            #expect(try await run.post("/control", withToken, headers: ["Origin: http://evil.example"]).status == 403)
            #expect(try await run.post("/control", withToken, headers: ["Sec-Fetch-Site: cross-site"]).status == 403)
            #expect(try await db.int("SELECT count(*) FROM herald.pauses") == 0, "nothing refused took effect")
            #expect(try await db.int("SELECT count(*) FROM herald.dead_letters") == 1)

            // A user id full of markup is one path segment and shows as text, never as markup.
            let hostile = #"<b>x</b>/&'""#
            try await db.exec(
                "SELECT herald.register_device('\(hostile.replacingOccurrences(of: "'", with: "''"))', 'local', 'hostile-token')"
            )
            let segment = try #require(hostile.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let page = try await run.get("/users/" + segment)
            #expect(page.status == 200 && page.body.contains("<h1>User &lt;b&gt;x&lt;/b&gt;/&amp;&#39;&quot;</h1>"))
            #expect(!page.body.contains("<b>x</b>") && page.body.contains("#" + Device.tokenHash(of: "hostile-token")))

            let headers = try await curl(["-i", "-u", viewer, run.base + "/"]).body
            #expect(headers.contains("Content-Security-Policy: default-src 'none'"))
            #expect(headers.contains("X-Frame-Options: DENY"))

            // Failed logins: after ten from one address (four above), even the right password waits.
            #expect(try await run.get("/", as: viewer).status == 200)
            for _ in 0..<6 { #expect(try await run.get("/", as: "sre:guess").status == 401) }
            let limited = try await curl(["-i", "-u", viewer, run.base + "/"])
            #expect(limited.status == 429 && limited.body.contains("Retry-After:"))
            await run.stop()
        }
    }

    @Test(
        "pause from the console stops claims within a claim interval and resume restarts them; cancel and replay say their counts first; every action is audited"
    )
    func actions() async throws {
        try await TestDatabase.withFresh { db in
            let (deadJob, _) = try await Self.seed(db)
            let run = try await ConsoleRun.start(db)
            for _ in 0..<300 {
                guard try await db.int("SELECT count(*) FROM herald.outbox") > 0 else { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let token = try await run.csrf()

            // Pause: the confirmation first, nothing paused yet.
            let ask = try await run.post("/control", ["action": "pause", "category": "chat", "csrf": token])
            #expect(ask.status == 200 && ask.body.contains("Pause category chat until resumed? 0 pending job(s)"))
            #expect(try await db.int("SELECT count(*) FROM herald.pauses") == 0)
            let paused = try await run.post(
                "/control",
                ["action": "pause", "category": "chat", "csrf": token, "confirmed": "yes"]
            )
            #expect(paused.status == 200 && paused.body.contains("Paused category chat"))
            let users = (1...20).map { "u\($0)" }
            _ = try await db.outbox().enqueueMany(
                users: users,
                category: "chat",
                payloadJSON: #"{"title":"a","body":"b"}"#
            )
            // The default idle poll is 500 ms and enqueue NOTIFYs: two seconds is several claim intervals.
            try await Task.sleep(for: .seconds(2))
            #expect(
                try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'chat' AND state = 'pending'")
                    == 20
            )
            #expect(
                try await db.int(
                    "SELECT count(*) FROM herald.delivery_log l JOIN herald.outbox o ON o.id = l.job_id WHERE l.event = 'attempt'"
                ) == 0
            )

            let askResume = try await run.post("/control", ["action": "resume", "category": "chat", "csrf": token])
            #expect(askResume.body.contains("Resume category chat? Its 20 pending job(s)"))
            let resumed = try await run.post(
                "/control",
                ["action": "resume", "category": "chat", "csrf": token, "confirmed": "yes"]
            )
            #expect(resumed.status == 200 && resumed.body.contains("Resumed category chat"))
            for _ in 0..<100 {
                guard try await db.int("SELECT count(*) FROM herald.outbox") > 0 else { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0, "resume restarts the claims")

            // Cancel: the count first, then exactly that many.
            try await db.exec("SELECT herald.pause('listings')")
            _ = try await db.outbox().enqueueMany(
                users: users,
                category: "listings",
                payloadJSON: #"{"title":"a","body":"b"}"#
            )
            let askCancel = try await run.post("/control", ["action": "cancel", "category": "listings", "csrf": token])
            #expect(askCancel.body.contains("Cancel 20 pending job(s) of category listings?"))
            let cancelled = try await run.post(
                "/control",
                ["action": "cancel", "category": "listings", "csrf": token, "confirmed": "yes"]
            )
            #expect(cancelled.body.contains("Cancelled 20 pending job(s)"))
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'listings'") == 0)

            // Bad input: a clear refusal, nothing done.
            let unknown = try await run.post(
                "/control",
                ["action": "pause", "category": "nope", "csrf": token, "confirmed": "yes"]
            )
            #expect(unknown.status == 400 && unknown.body.contains("unknown category"))

            // Replay the dead letter: the count first.
            let letter = try #require(
                try await db.scalar("SELECT id FROM herald.dead_letters WHERE job_id = \(deadJob)")
            )
            let askReplay = try await run.post("/dead-letters", ["action": "replay", "id": letter, "csrf": token])
            #expect(askReplay.body.contains("Replay 1 dead letter(s)"))
            #expect(try await db.int("SELECT count(*) FROM herald.dead_letters WHERE replayed_at IS NOT NULL") == 0)
            let replayed = try await run.post(
                "/dead-letters",
                ["action": "replay", "id": letter, "csrf": token, "confirmed": "yes"]
            )
            #expect(replayed.body.contains("Replayed 1 dead letter(s)"))
            #expect(try await db.int("SELECT count(*) FROM herald.dead_letters WHERE replay_job_id IS NOT NULL") == 1)

            let audit = try await db.rows(
                "SELECT actor, action, jobs FROM herald.audit_log WHERE actor LIKE 'console:%' ORDER BY id"
            )
            #expect(audit.map { $0[1] ?? "" } == ["pause", "resume", "cancel_pending", "dlq_replay"])
            #expect(audit.allSatisfy { $0[0] == "console:ops" })
            #expect(
                audit.count == 4 && audit[2][2] == "20" && audit[3][2] == "1",
                "cancel and replay audit their counts"
            )
            let page = try await run.get("/control", as: viewer).body
            #expect(page.contains("<td>console:ops</td><td>dlq_replay</td>"), "the audit log is on the page")
            await run.stop()
        }
    }
}

@Suite("Console accounts, CSRF and preferences in words")
struct ConsoleUnitTests {
    @Test("accounts parse with clear errors that never echo a password")
    func credentials() throws {
        let c = try ConsoleCredentials(
            parsing: "# on-call\nops:operator:a:password:with:colons\n\nsre:viewer:viewer-password-1\n"
        )
        #expect(c.names == ["ops", "sre"])
        #expect(c.authenticate(name: "ops", password: "a:password:with:colons") == .operator)
        #expect(c.authenticate(name: "sre", password: "viewer-password-1") == .viewer)
        #expect(c.authenticate(name: "sre", password: "viewer-password-2") == nil)
        #expect(c.authenticate(name: "nobody", password: "viewer-password-1") == nil)
        let bad: [(String, String)] = [
            ("ops:admin:long-enough-password", "role must be viewer or operator"),
            ("ops:operator:short", "at least 12 characters"),
            ("just-a-name", "expected name:role:password"),
            ("a:viewer:long-enough-password\na:viewer:long-enough-password", "listed twice"),
            ("# nothing\n", "lists no account"),
        ]
        for (text, reason) in bad {
            do {
                _ = try ConsoleCredentials(parsing: text)
                Issue.record("accepted \(text)")
            } catch {
                #expect("\(error)".contains(reason), "\(error)")
                #expect(!"\(error)".contains("long-enough-password") && !"\(error)".contains("short"))
            }
        }
    }

    @Test("CSRF tokens are per account, stable across replicas with the same secret, and change with it")
    func csrfTokens() throws {
        let a = try ConsoleCredentials(parsing: "ops:operator:operator-password-1\nsre:viewer:viewer-password-1")
        let b = try ConsoleCredentials(parsing: "ops:operator:operator-password-1\nsre:viewer:viewer-password-1")
        let rotated = try ConsoleCredentials(parsing: "ops:operator:operator-password-2\nsre:viewer:viewer-password-1")
        #expect(a.csrfToken(for: "ops") == b.csrfToken(for: "ops"))
        #expect(a.csrfToken(for: "ops") != a.csrfToken(for: "sre"))
        #expect(a.csrfToken(for: "ops") != rotated.csrfToken(for: "ops"))
        #expect(b.checkCSRF(a.csrfToken(for: "ops"), for: "ops"))
        #expect(!b.checkCSRF(a.csrfToken(for: "ops"), for: "sre"))
        #expect(!rotated.checkCSRF(a.csrfToken(for: "ops"), for: "ops"))
    }

    @Test("failed logins: the eleventh within a minute waits, another address does not, the window passes")
    func loginLimiter() {
        let limiter = LoginLimiter(maxFailures: 10, window: 60)
        for i in 0..<10 {
            #expect(limiter.retryAfter("10.0.0.1", now: 1000 + Double(i)) == nil)
            limiter.recordFailure("10.0.0.1", now: 1000 + Double(i))
        }
        #expect(limiter.retryAfter("10.0.0.1", now: 1010) == 50)
        #expect(limiter.retryAfter("10.0.0.2", now: 1010) == nil)
        #expect(limiter.retryAfter("10.0.0.1", now: 1061) == nil)
    }

    @Test(
        "preferences in words",
        arguments: [
            (nil, ["No preferences saved: every category is on, no quiet hours."]),
            ("{}", ["Nothing is turned off: every category is on, no quiet hours."]),
            ("[1]", ["The preferences document is not a JSON object; the defaults apply (everything on)."]),
            (
                #"{"enabled": false, "optIns": ["weekly_digest"], "mutedUntil": "2026-11-23T08:00:00Z"}"#,
                [
                    "Notifications are switched off for this app (only mandatory categories are sent).",
                    "Opted in to: weekly_digest.",
                    "Muted until 2026-11-23T08:00:00Z.",
                ]
            ),
            (
                #"{"eventToggles": {"chat": true, "listings": false}, "quietHours": {"startHour": 22, "endHour": 7}, "location": {"lat": 59.33, "lon": 18.06, "radiusKm": 10}}"#,
                [
                    "Turned off: listings.", "Turned on explicitly: chat.",
                    "Quiet hours 22:00–07:00 (the device's time zone, else UTC).",
                    "Only nearby notifications: within 10 km.",
                ]
            ),
        ] as [(String?, [String])]
    )
    func preferences(json: String?, expected: [String]) {
        #expect(PreferencesInWords.describe(json) == expected)
    }
}
