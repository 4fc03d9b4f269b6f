import Foundation
import PackagePlugin

/// Compiles every `sql/*.sql` file of the package into the target as Swift string literals
/// (`EmbeddedSQL.files`), so an installed `herald` carries its schema and migrates anywhere.
///
/// SwiftPM's own `.embedInCode` resources write each byte as an integer literal, which took
/// minutes to type-check for our 80 KB of SQL; a raw string literal compiles at once.
@main
struct EmbedSQL: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let directory = context.package.directoryURL.appending(path: "sql")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        let inputs = names.map { directory.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedSQL.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) files of sql/",
                executable: try context.tool(named: "SQLEmbedder").url,
                arguments: [output.path] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output])
        ]
    }
}
