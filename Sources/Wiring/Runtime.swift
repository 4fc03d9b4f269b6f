import ArgumentParser
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Logging
import Providers
import Queue
import Settings

/// The wiring shared by `herald` and `herald-bench`: pool, outbox, providers, migrations.
package struct Runtime {
    package let configuration: HeraldConfiguration
    package let pool: PostgresPool
    package let logger: Logger

    package init(configuration: HeraldConfiguration, logger: Logger) {
        self.configuration = configuration
        self.pool = PostgresPool(configuration: configuration.pool)
        self.logger = logger
    }

    package func outbox(suffix: String = "") -> Outbox {
        Outbox(pool: pool, workerID: configuration.workerID + suffix)
    }

    /// The schema compiled into the binary, or that of `database.migrations_dir` when set.
    package func migrator() throws -> Migrator {
        let schema =
            if let directory = configuration.migrationsDirectory, !directory.isEmpty {
                try Migrator.load(directory: directory)
            } else {
                Migrator.embedded
            }
        return Migrator(pool: pool, schema: schema, buckets: configuration.buckets)
    }

    package func shutdown() async {
        await pool.shutdown()
    }

    package static func makeLogger(level: String) -> Logger {
        var logger = Logger(label: "herald")
        logger.logLevel = Logger.Level(rawValue: level) ?? .info
        return logger
    }
}

/// Runs `body` with a runtime and always closes the pool. `statementTimeout` replaces the
/// configured one for commands whose one statement may touch a whole backlog (`herald cancel`).
package func withRuntime<T>(
    _ options: GlobalOptions,
    statementTimeout: Duration? = nil,
    _ body: (Runtime) async throws -> T
) async throws -> T {
    var configuration = try await HeraldConfiguration.load(file: options.config)
    if let statementTimeout { configuration.pool.connection.statementTimeout = statementTimeout }
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
        return handler
    }
    let runtime = Runtime(configuration: configuration, logger: Runtime.makeLogger(level: configuration.logLevel))
    do {
        let value = try await body(runtime)
        await runtime.shutdown()
        return value
    } catch {
        await runtime.shutdown()
        throw error
    }
}

/// `--config FILE`, shared by every command.
package struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "JSON configuration file (HERALD_* environment variables override it).")
    package var config: String?

    package init() {}
}
