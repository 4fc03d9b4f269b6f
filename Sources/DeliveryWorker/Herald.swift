import ArgumentParser
import Delivery
import HeraldCore
import Wiring

@main
struct Herald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "Durable push-notification delivery worker on PostgreSQL.",
        subcommands: [
            RunCommand.self, MigrateCommand.self, EnqueueCommand.self, StatusCommand.self, DLQCommand.self,
            CheckConfigCommand.self, ExplainCommand.self, SQLCommand.self,
            PauseCommand.self, ResumeCommand.self, CancelCommand.self,
        ]
    )
}
