import ArgumentParser
import Delivery
import Foundation
import HeraldCore
import Queue
import Settings
import Wiring

struct ExplainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Why a job was (or was not) delivered, or what happened to a user's notifications.",
        discussion:
            "herald explain 42        every record of job 42\nherald explain --user X  the user's latest decisions"
    )

    @OptionGroup var options: GlobalOptions
    @Argument(help: "Job id.") var job: Int64?
    @Option(help: "Recipient user id.") var user: String?
    @Option(help: "Rows to show for --user.") var limit = 50
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard (job == nil) != (user == nil) else { throw ValidationError("give a job id or --user, not both") }
    }

    func run() async throws {
        try await withRuntime(options) { runtime in
            let outbox = runtime.outbox()
            if let job {
                let rows = try await outbox.explain(job: job)
                guard !rows.isEmpty else { throw ValidationError("no record of job \(job)") }
                let header = [
                    "time", "user", "category", "event", "provider", "outcome", "status", "reason", "attempt", "ms",
                    "worker",
                ]
                if json { return JSONOutput.print(["job": job, "records": records(header, rows)]) }
                print(
                    table(
                        [
                            "time", "user", "category", "event", "provider", "outcome", "status", "reason", "attempt",
                            "ms", "worker",
                        ],
                        rows
                    )
                )
            } else if let user {
                let rows = try await outbox.explain(user: user, limit: limit)
                guard !rows.isEmpty else { throw ValidationError("no record for user \(user)") }
                let header = ["time", "job", "category", "event", "provider", "outcome", "status", "reason", "attempt"]
                if json { return JSONOutput.print(["user": user, "records": records(header, rows)]) }
                print(
                    table(
                        ["time", "job", "category", "event", "provider", "outcome", "status", "reason", "attempt"],
                        rows
                    )
                )
            }
        }
    }

    private func records(_ header: [String], _ rows: [[String]]) -> [[String: String]] {
        rows.map { row in Dictionary(uniqueKeysWithValues: zip(header, row)) }
    }

    private func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { i in all.map { i < $0.count ? $0[i].count : 0 }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { i, cell in cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingTrailingSpaces()
        }.joined(separator: "\n")
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var s = self
        while s.hasSuffix(" ") { s.removeLast() }
        return s
    }
}

/// `herald sql`: prints the hot-path statements, so a DBA can `PREPARE` and `EXPLAIN` them.
struct SQLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Print the worker's hot-path SQL statements (for EXPLAIN).",
        shouldDisplay: false
    )

    @Argument(help: "Statement name prefix, e.g. herald_claim.") var name: String?

    func run() throws {
        for statement in OutboxStatements.hotPath where name.map({ statement.name.hasPrefix($0) }) ?? true {
            print("-- \(statement.name)\n\(statement.sql);\n")
        }
    }
}
