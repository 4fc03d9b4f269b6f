import ArgumentParser
import Delivery
import Foundation
import HeraldCore
import Queue
import Settings
import Wiring

/// Filters shared by `dlq list`, `dlq replay` and `dlq purge`.
struct DeadLetterFilterOptions: ParsableArguments {
    @Option(help: "Only this category.") var category: String?
    @Option(help: "Only dead letters whose last error contains this (e.g. payload_rejected, unregistered).")
    var reason: String?
    @Option(help: "Only jobs that were attempted on this provider (apns, fcm, expo, webpush, local).")
    var provider: String?
    @Option(help: "Failed at or after this time (ISO-8601, e.g. 2026-11-22T08:00:00Z).") var since: String?
    @Option(help: "Failed before this time (ISO-8601).") var until: String?

    func filter() throws -> DeadLetterFilter {
        func time(_ text: String?, _ flag: String) throws -> Date? {
            guard let text else { return nil }
            guard let date = ISO8601DateFormatter().date(from: text) else {
                throw ValidationError("\(flag) must be an ISO-8601 time such as 2026-11-22T08:00:00Z")
            }
            return date
        }
        return DeadLetterFilter(
            category: category,
            reason: reason,
            provider: provider,
            since: try time(since, "--since"),
            until: try time(until, "--until")
        )
    }
}

struct DLQCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dlq",
        abstract: "Inspect, replay and purge dead letters.",
        subcommands: [List.self, Show.self, Replay.self, Purge.self]
    )

    static func json(_ d: DeadLetter) -> [String: Any] {
        var object: [String: Any] = [
            "id": d.id, "job_id": d.jobID, "user_id": d.userID, "category": d.category, "attempts": d.attempts,
            "last_error": d.lastError, "failed_at": d.failedAt,
        ]
        if let r = d.replayJobID { object["replay_job_id"] = r }
        if let p = d.payloadJSON { object["payload"] = (try? JSONSerialization.jsonObject(with: Data(p.utf8))) ?? p }
        if let o = d.optionsJSON { object["options"] = (try? JSONSerialization.jsonObject(with: Data(o.utf8))) ?? o }
        if let e = d.enqueuedAt { object["enqueued_at"] = e }
        return object
    }

    /// Upper bound on how many dead letters one filtered replay or purge touches.
    static let maxBatch = 100_000

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List dead letters, newest first.")
        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @Option(help: "Rows to show.") var limit = 50
        @Flag(help: "Include dead letters that were already replayed.") var all = false
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            try await withRuntime(options) { runtime in
                let rows = try await runtime.outbox().deadLetters(
                    limit: limit,
                    includeReplayed: all,
                    filter: try filters.filter()
                )
                if json {
                    JSONOutput.print(["count": rows.count, "dead_letters": rows.map(DLQCommand.json)])
                    return
                }
                if rows.isEmpty {
                    print("herald: no dead letters")
                    return
                }
                print("id\tjob\tuser\tcategory\tattempts\tfailed_at\tlast_error")
                for d in rows {
                    var line =
                        "\(d.id)\t\(d.jobID)\t\(d.userID)\t\(d.category)\t\(d.attempts)\t\(d.failedAt)\t\(d.lastError)"
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
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            try await withRuntime(options) { runtime in
                guard let d = try await runtime.outbox().deadLetter(id: id) else {
                    throw ValidationError("no dead letter with id \(id)")
                }
                if json {
                    JSONOutput.print(DLQCommand.json(d))
                    return
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
            abstract: "Enqueue dead letters again as new jobs (fresh attempts and TTL, same collapse id).",
            discussion:
                "By id, or by filter (--category, --reason, --provider, --since, --until, or --all). A filtered replay first counts what matches; --dry-run stops there, --yes is needed to act."
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @Argument(help: "Dead letter ids.") var ids: [Int64] = []
        @Flag(help: "Every open dead letter matching the filters (no filter: all of them).") var all = false
        @Flag(help: "Only count and list what would be replayed.") var dryRun = false
        @Flag(help: "Act on a filtered selection without asking.") var yes = false
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            let filtered = (try? filters.filter().isEmpty == false) ?? false
            guard !ids.isEmpty || all || filtered else {
                throw ValidationError("give dead letter ids, filters, or --all")
            }
            guard ids.isEmpty || (!all && !filtered) else { throw ValidationError("give ids or filters, not both") }
        }

        func run() async throws {
            try await withRuntime(options) { runtime in
                let outbox = runtime.outbox()
                var targets = ids
                if targets.isEmpty {
                    targets = try await outbox.deadLetters(
                        limit: DLQCommand.maxBatch,
                        includeReplayed: false,
                        filter: try filters.filter()
                    ).map(\.id).sorted()
                    if !json { print("herald: \(targets.count) dead letters match") }
                    if dryRun || targets.isEmpty {
                        if json { JSONOutput.print(["matched": targets.count, "dry_run": dryRun, "ids": targets]) }
                        return
                    }
                    guard yes else {
                        throw ValidationError("\(targets.count) dead letters match: add --yes to replay them")
                    }
                } else if dryRun {
                    if json {
                        JSONOutput.print(["matched": targets.count, "dry_run": true, "ids": targets])
                    } else {
                        print("herald: would replay \(targets.count) dead letters")
                    }
                    return
                }
                let replayed = try await outbox.replayDeadLetters(ids: targets)
                let skipped = targets.count - replayed.count
                if json {
                    JSONOutput.print([
                        "matched": targets.count, "replayed": replayed.map { ["dead_letter": $0.0, "job": $0.1] },
                        "skipped": skipped,
                    ])
                    return
                }
                for (dl, job) in replayed { print("herald: dead letter \(dl) replayed as job \(job)") }
                print(
                    "herald: replayed \(replayed.count)"
                        + (skipped > 0 ? "; \(skipped) not found, already replayed, or their category is gone" : "")
                )
            }
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete dead letters, by id or by filter (counted first; --yes to act on a filter)."
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @Argument(help: "Dead letter ids.") var ids: [Int64] = []
        @Flag(help: "Every dead letter matching the filters, replayed ones included.") var all = false
        @Option(help: "Only purge dead letters older than this many days.") var olderThanDays: Double = 0
        @Flag(help: "Only count what would be purged.") var dryRun = false
        @Flag(help: "Act on a filtered selection without asking.") var yes = false
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            let filtered = (try? filters.filter().isEmpty == false) ?? false
            guard !ids.isEmpty || all || filtered else {
                throw ValidationError("give dead letter ids, filters, or --all")
            }
            guard olderThanDays >= 0 else { throw ValidationError("--older-than-days must be >= 0") }
        }

        func run() async throws {
            try await withRuntime(options) { runtime in
                let outbox = runtime.outbox()
                var targets = ids
                if targets.isEmpty {
                    var filter = try filters.filter()
                    if olderThanDays > 0 {
                        let cutoff = Date() - olderThanDays * 86_400
                        filter.until = min(filter.until ?? cutoff, cutoff)
                    }
                    targets = try await outbox.deadLetters(
                        limit: DLQCommand.maxBatch,
                        includeReplayed: true,
                        filter: filter
                    )
                    .map(\.id)
                    if !json { print("herald: \(targets.count) dead letters match") }
                    if dryRun || targets.isEmpty {
                        if json { JSONOutput.print(["matched": targets.count, "dry_run": dryRun, "purged": 0]) }
                        return
                    }
                    guard yes else {
                        throw ValidationError("\(targets.count) dead letters match: add --yes to purge them")
                    }
                } else if dryRun {
                    if json {
                        JSONOutput.print(["matched": targets.count, "dry_run": true, "purged": 0])
                    } else {
                        print("herald: would purge \(targets.count) dead letters")
                    }
                    return
                }
                let n = try await outbox.purgeDeadLetters(ids: targets, olderThan: .seconds(olderThanDays * 86_400))
                if json {
                    JSONOutput.print(["matched": targets.count, "dry_run": false, "purged": n])
                } else {
                    print("herald: purged \(n) dead letters")
                }
            }
        }
    }
}
