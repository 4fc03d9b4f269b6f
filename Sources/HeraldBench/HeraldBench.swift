import ArgumentParser

/// `herald-bench`: throughput and latency figures on a dedicated database, one JSON line per
/// run. Its own executable, so the `herald` worker carries no benchmark code.
@main
struct HeraldBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-bench",
        abstract: "Herald's benchmarks (one JSON line each); `herald-bench` alone runs `sink`.",
        subcommands: [BenchCommand.self, BenchProvidersCommand.self, BenchWebPushCryptoCommand.self],
        defaultSubcommand: BenchCommand.self
    )
}
