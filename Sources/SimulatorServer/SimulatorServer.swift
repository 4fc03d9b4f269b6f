import ArgumentParser
import Foundation
import ProviderSimulator
import UnixSignals

/// `herald-simulator`: the local provider simulator (APNs, FCM + OAuth, Expo, Web Push) until
/// SIGINT or SIGTERM. See docs/simulator.md. Its own executable, so the `herald` a deployment
/// runs does not carry a TLS server, a certificate authority and fault injection.
@main
struct HeraldSimulator: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-simulator",
        abstract: "Run the local push-provider simulator (TLS, HTTP/2 + HTTP/1.1) until SIGTERM or SIGINT."
    )

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "TCP port (0 picks a free one).") var port = 8443
    @Option(help: "Directory for ca.pem and generated credentials (created if missing).")
    var stateDir = ".run/simulator"
    @Flag(
        help:
            "Write demo credentials (APNs .p8, FCM service account, VAPID keys, herald-providers.json) into the state directory and trust them."
    )
    var generateCredentials = false

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0...65535") }
    }

    func run() async throws {
        let simulator = ProviderSimulator(
            configuration: SimulatorConfiguration(host: host, port: port, stateDirectory: stateDir)
        )
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        try await simulator.start()
        var line = "herald simulator listening on \(simulator.baseURL) ca=\(simulator.caCertificatePath)"
        if generateCredentials {
            do {
                try SimulatorCredentials.generate(
                    into: stateDir,
                    context: simulator.context,
                    caFile: simulator.caCertificatePath
                )
            } catch {
                try? await simulator.shutdown()
                throw error
            }
            line +=
                " credentials=\(URL(fileURLWithPath: stateDir).appendingPathComponent("herald-providers.json").path)"
        }
        // One unbuffered line, so a supervising script sees it at once.
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
        for await _ in signals { break }
        try await simulator.shutdown()
    }
}
