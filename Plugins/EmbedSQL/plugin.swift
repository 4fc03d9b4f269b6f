import Foundation
import PackagePlugin

/// Compiles every `sql/migrations/*.sql` and `sql/functions/*.sql` file of the package into the target as Swift string literals
/// (`EmbeddedSQL.files`), so an installed `herald` carries its schema and migrates anywhere.
///
/// SwiftPM's own `.embedInCode` resources write each byte as an integer literal, which took
/// minutes to type-check for our 80 KB of SQL; a raw string literal compiles at once.
@main
struct EmbedSQL: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        // sql/migrations/ and sql/functions/, named "migrations/0001_outbox.sql" and so on.
        let root = context.package.directoryURL.appending(path: "sql")
        var inputs: [URL] = []
        for folder in ["migrations", "functions"] {
            let directory = root.appending(path: folder)
            inputs += try FileManager.default.contentsOfDirectory(atPath: directory.path)
                .filter { $0.hasSuffix(".sql") }
                .sorted()
                .map { directory.appending(path: $0) }
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedSQL.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(inputs.count) files of sql/",
                executable: try context.tool(named: "SQLEmbedder").url,
                arguments: [output.path] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
