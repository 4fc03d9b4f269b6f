import ArgumentParser
import Foundation
import Queue
import Wiring

/// What a kill-switch command acts on: a category, an app's categories, or everything.
struct ControlTarget: ParsableArguments {
    @Option(help: "A category (a row in herald.categories).") var category: String?
    @Option(help: "An app: every category whose app_id it is.") var app: String?
    @Option(help: "Who does it, for the audit log (default: the database login).") var actor: String?

    /// "category chat", "app foodshare", or "everything".
    var label: String {
        if let category { return "category \(category)" }
        if let app { return "app \(app)" }
        return "everything"
    }
}

struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract:
            "Stop sending a category, an app, or everything (no --category/--app): pending jobs are held, none is lost."
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var target: ControlTarget
    @Option(help: "Lift the pause by itself after this many seconds (default: until `herald resume`).") var seconds:
        Double?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if target.category != nil && target.app != nil { throw ValidationError("give --category or --app, not both") }
        if let seconds, seconds <= 0 { throw ValidationError("--seconds must be positive") }
    }

    func run() async throws {
        try await withRuntime(options) { runtime in
            let until = seconds.map { Date() + $0 }
            let outbox = runtime.outbox()
            let covered = try await outbox.pause(
                category: target.category,
                appID: target.app,
                until: until,
                actor: target.actor
            )
            // Claims skip the target from here on; park its backlog now rather than at the leader's next pass.
            let held = try await outbox.holdPaused()
            if json {
                JSONOutput.print(["paused": target.label, "pending_jobs": covered, "held_jobs": held])
            } else {
                print(
                    "herald: paused \(target.label)\(seconds.map { " for \(Int($0)) s" } ?? " until resumed"); \(held) pending jobs held"
                )
            }
        }
    }
}

struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Lift the pause of a category, an app, or everything (no --category/--app)."
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var target: ControlTarget
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        try await withRuntime(options) { runtime in
            let outbox = runtime.outbox()
            _ = try await outbox.resume(category: target.category, appID: target.app, actor: target.actor)
            let released = try await outbox.releaseUnpaused()
            if json {
                JSONOutput.print(["resumed": target.label, "released_jobs": released])
            } else {
                print("herald: resumed \(target.label); \(released) jobs released")
            }
        }
    }
}

struct CancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract:
            "Cancel the pending jobs of a category, a scope or an app (jobs being sent are not touched: pause first)."
    )

    @OptionGroup var options: GlobalOptions
    @Option(help: "A category.") var category: String?
    @Option(help: "A scope (the scope option the jobs were enqueued with).") var scope: String?
    @Option(help: "An app: every category whose app_id it is.") var app: String?
    @Option(help: "Who does it, for the audit log (default: the database login).") var actor: String?
    @Flag(help: "Only count what would be cancelled.") var dryRun = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if category == nil && scope == nil && app == nil {
            throw ValidationError("give --category, --scope or --app (to stop everything, `herald pause` first)")
        }
    }

    func run() async throws {
        // One statement cancels the whole backlog (and logs every job): no 5 s worker timeout.
        try await withRuntime(options, statementTimeout: .seconds(600)) { runtime in
            let outbox = runtime.outbox()
            if dryRun {
                let n = try await outbox.countPending(category: category, scope: scope, appID: app)
                if json {
                    JSONOutput.print(["would_cancel": n, "dry_run": true])
                } else {
                    print("herald: would cancel \(n) pending jobs (dry run)")
                }
                return
            }
            let n = try await outbox.cancelPending(category: category, scope: scope, appID: app, actor: actor)
            if json { JSONOutput.print(["cancelled": n]) } else { print("herald: cancelled \(n) pending jobs") }
        }
    }
}
