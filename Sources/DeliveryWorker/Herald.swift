import ArgumentParser
import Delivery
import HeraldCore

@main
struct Herald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "Durable push-notification delivery worker on PostgreSQL.",
        subcommands: [
            RunCommand.self, MigrateCommand.self, EnqueueCommand.self, StatusCommand.self, DLQCommand.self,
            CheckConfigCommand.self, ExplainCommand.self, BenchCommand.self, SQLCommand.self,
            BenchProvidersCommand.self,
        ])
}

struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "JSON configuration file (HERALD_* environment variables override it).")
    var config: String?
}
