import ArgumentParser
import Queue

struct DLQCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dlq", abstract: "Inspect, replay and purge dead letters.",
        subcommands: [List.self, Show.self, Replay.self, Purge.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List dead letters, newest first.")
        @OptionGroup var options: GlobalOptions
        @Option(help: "Rows to show.") var limit = 50
        @Flag(help: "Include dead letters that were already replayed.") var all = false

        func run() async throws {
            try await withRuntime(options) { runtime in
                let rows = try await runtime.outbox().deadLetters(limit: limit, includeReplayed: all)
                if rows.isEmpty {
                    print("herald: no dead letters")
                    return
                }
                print("id\tjob\tuser\tcategory\tattempts\tfailed_at\tlast_error")
                for d in rows {
                    var line = "\(d.id)\t\(d.jobID)\t\(d.userID)\t\(d.category)\t\(d.attempts)\t\(d.failedAt)\t\(d.lastError)"
                    if let r = d.replayJobID { line += "\t(replayed as job \(r))" }
                    print(line)
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one dead letter with its payload.")
        @OptionGroup var options: GlobalOptions
        @Argument(help: "Dead letter id.") var id: Int64

        func run() async throws {
            try await withRuntime(options) { runtime in
                guard let d = try await runtime.outbox().deadLetter(id: id) else {
                    throw ValidationError("no dead letter with id \(id)")
                }
                print("id           \(d.id)")
                print("job          \(d.jobID)")
                print("user         \(d.userID)")
                print("category     \(d.category)")
                print("attempts     \(d.attempts)")
                print("last error   \(d.lastError)")
                print("enqueued at  \(d.enqueuedAt ?? "")")
                print("failed at    \(d.failedAt)")
                print("replayed as  \(d.replayJobID.map(String.init) ?? "-")")
                print("payload      \(d.payloadJSON ?? "")")
                print("options      \(d.optionsJSON ?? "")")
            }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enqueue dead letters again as new jobs (fresh attempts and TTL, same collapse id).")
        @OptionGroup var options: GlobalOptions
        @Argument(help: "Dead letter ids.") var ids: [Int64] = []
        @Flag(help: "Replay every open dead letter.") var all = false

        func validate() throws {
            guard all || !ids.isEmpty else { throw ValidationError("give dead letter ids, or --all") }
        }

        func run() async throws {
            try await withRuntime(options) { runtime in
                let replayed = try await runtime.outbox().replayDeadLetters(ids: ids, all: all)
                for (dl, job) in replayed { print("herald: dead letter \(dl) replayed as job \(job)") }
                let missing = all ? 0 : ids.count - replayed.count
                print("herald: replayed \(replayed.count)" + (missing > 0 ? "; \(missing) not found, already replayed, or their category is gone" : ""))
            }
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete dead letters.")
        @OptionGroup var options: GlobalOptions
        @Argument(help: "Dead letter ids.") var ids: [Int64] = []
        @Flag(help: "Purge every dead letter (with --older-than-days, only older ones).") var all = false
        @Option(help: "Only purge dead letters older than this many days.") var olderThanDays: Double = 0

        func validate() throws {
            guard all || !ids.isEmpty else { throw ValidationError("give dead letter ids, or --all") }
            guard olderThanDays >= 0 else { throw ValidationError("--older-than-days must be >= 0") }
        }

        func run() async throws {
            try await withRuntime(options) { runtime in
                let n = try await runtime.outbox().purgeDeadLetters(ids: ids, all: all, olderThan: olderThanDays * 86_400)
                print("herald: purged \(n) dead letters")
            }
        }
    }
}
