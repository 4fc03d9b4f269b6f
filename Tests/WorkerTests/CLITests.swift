import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

@Suite("The herald CLI: dead-letter filters, dry runs, --json everywhere", .serialized)
struct CLITests {
    /// Runs `herald <arguments> --json` against `db` and parses the output.
    func json(_ db: TestDatabase, _ arguments: [String]) async throws -> [String: Any] {
        let (status, output) = try await HeraldBinary.run(
            arguments + ["--json"],
            environment: ["HERALD_DATABASE_URL": db.url]
        )
        #expect(status == 0, "herald \(arguments.joined(separator: " ")): \(output)")
        let object = try JSONSerialization.jsonObject(with: Data(output.utf8))
        return try #require(object as? [String: Any], "not a JSON object: \(output)")
    }

    @Test("dlq list/replay/purge filter by category, reason, provider and time; dry run and count before acting")
    func deadLetterFilters() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat", maxAttempts: 1)
            try await db.addCategory("sos", priority: "critical", maxAttempts: 1)
            try await db.registerDevice("u", "apns", "rejects")
            try await db.registerDevice("v", "fcm", "flaky")
            let provider = ScriptedProvider()
            provider.answer("rejects", with: DeliveryOutcome(.payloadRejected, reason: .badPayload))
            provider.answer("flaky", with: DeliveryOutcome(.retry, reason: .unavailable))
            let chat = try #require(try await db.enqueue("u", "chat"))
            let sos = try #require(try await db.enqueue("v", "sos"))
            #expect(
                try await db.consumer(providers: ProviderRegistry([.apns: provider, .fcm: provider])).runOnce() == 2
            )

            #expect(try await json(db, ["dlq", "list"])["count"] as? Int == 2)
            let bySOS = try await json(db, ["dlq", "list", "--category", "sos"])
            #expect((bySOS["dead_letters"] as? [[String: Any]])?.map { $0["job_id"] as? Int } == [Int(sos)])
            #expect(try await json(db, ["dlq", "list", "--reason", "payload_rejected"])["count"] as? Int == 1)
            #expect(try await json(db, ["dlq", "list", "--provider", "fcm"])["count"] as? Int == 1)
            #expect(
                try await json(
                    db,
                    ["dlq", "list", "--since", "2000-01-01T00:00:00Z", "--until", "2001-01-01T00:00:00Z"]
                )["count"] as? Int == 0
            )

            let dry = try await json(db, ["dlq", "replay", "--category", "sos", "--dry-run"])
            #expect(dry["matched"] as? Int == 1 && dry["dry_run"] as? Bool == true)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            let (refused, message) = try await HeraldBinary.run(
                ["dlq", "replay", "--category", "sos"],
                environment: ["HERALD_DATABASE_URL": db.url]
            )
            #expect(refused != 0 && message.contains("1 dead letters match: add --yes"))
            let replayed = try await json(db, ["dlq", "replay", "--category", "sos", "--yes"])
            #expect((replayed["replayed"] as? [[String: Any]])?.count == 1)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE user_id = 'v'") == 1)

            let purged = try await json(db, ["dlq", "purge", "--reason", "payload_rejected", "--yes"])
            #expect(purged["purged"] as? Int == 1)
            #expect(try await db.int("SELECT count(*) FROM herald.dead_letters WHERE job_id = \(chat)") == 0)
        }
    }

    @Test("an installed herald migrates with no settings and no sql/ beside it; what it carries is sql/")
    func installedBinaryMigratesAnywhere() async throws {
        let schema = Migrator.embedded
        #expect(schema == (try Migrator.load(directory: TestDatabase.repositoryRoot + "/sql")))
        let embedded = schema.migrations
        #expect(embedded.map(\.version) == Array(1...embedded.count))
        #expect(schema.functions.count >= 8)
        try await TestDatabase.withEmpty { url in
            let prefix = FileManager.default.temporaryDirectory.appendingPathComponent(
                "herald-install-\(UUID().uuidString)"
            )
            let bin = prefix.appendingPathComponent("bin")
            try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: prefix) }
            let installed = bin.appendingPathComponent("herald")
            try FileManager.default.copyItem(atPath: HeraldBinary.path, toPath: installed.path)
            let process = Process()
            process.executableURL = installed
            process.arguments = ["migrate", "--json"]
            process.currentDirectoryURL = prefix
            var environment = HeraldBinary.environment(["HERALD_DATABASE_URL": url])
            environment["HERALD_DATABASE_MIGRATIONS_DIR"] = nil
            process.environment = environment
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let output = String(decoding: await readToEndOffPool(pipe), as: UTF8.self)
            await waitUntilExitOffPool(process)
            #expect(process.terminationStatus == 0, "\(output)")
            #expect(
                output.contains("\"version\":\(embedded.count)") || output.contains("\"version\" : \(embedded.count)"),
                "\(output)"
            )
        }
    }

    @Test("every command's --json output parses")
    func everyCommandSpeaksJSON() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            let latest = try TestDatabase.migrations().map(\.version).max()
            #expect(try await json(db, ["migrate"])["version"] as? Int == latest)
            let enqueued = try await json(
                db,
                ["enqueue", "--user", "u", "--category", "chat", "--title", "Hi", "--body", "there"]
            )
            #expect(enqueued["enqueued"] as? Int == 1)
            #expect(
                try await json(
                    db,
                    ["enqueue", "--user", "a", "--user", "b", "--category", "chat", "--title", "T", "--body", "B"]
                )["enqueued"] as? Int == 2
            )
            #expect(try await json(db, ["status"])["pending_due"] as? Int == 3)
            #expect(try await json(db, ["check-config", "--connect"])["schema_version"] as? Int == latest)
            #expect(try await json(db, ["dlq", "list"])["count"] as? Int == 0)
            try await db.exec("SELECT herald.cancel('none')")
            _ = try await db.consumer(providers: ProviderRegistry()).runOnce()
            let job = try #require(try await json(db, ["explain", "1"])["records"] as? [[String: String]])
            #expect(job.first?["status"] == "suppressed" && job.first?["reason"] == "no_active_device")
            #expect((try await json(db, ["explain", "--user", "u"])["records"] as? [[String: String]])?.count == 1)
        }
    }
}
