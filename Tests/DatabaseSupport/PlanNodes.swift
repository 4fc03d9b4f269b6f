import Foundation
import HeraldCore
import Queue
import Testing

extension TestDatabase {
    /// `EXPLAIN (options) EXECUTE` of `statement` with `binds` (as text), on one connection: the
    /// statement prepared under a name of its own (the pool's connections keep their own prepared
    /// statements) and deallocated after. `around` runs its first command before and its second
    /// after (`SET …`/`RESET …`, `BEGIN`/`ROLLBACK` for `ANALYZE` of a statement that writes).
    package func explain(
        _ statement: PostgresStatement,
        binds: [String],
        options: String,
        around: (String, String)? = nil
    ) async throws -> JSONValue {
        let plan = try await pool.withConnection { connection in
            let probe = "probe_" + UUID().uuidString.prefix(8).lowercased()
            if let around { try await connection.execute(around.0, name: "before") }
            try await connection.execute("PREPARE \(probe) AS \(statement.sql)", name: "prepare")
            let args = binds.map { "'\($0.replacingOccurrences(of: "'", with: "''"))'" }.joined(separator: ", ")
            let rows = try await connection.simpleQuery(
                "EXPLAIN (\(options)) EXECUTE \(probe)" + (binds.isEmpty ? "" : "(\(args))"),
                name: "explain"
            )
            try await connection.execute("DEALLOCATE \(probe)", name: "deallocate")
            if let around { try await connection.execute(around.1, name: "after") }
            return rows.rows.first?.first ?? nil
        }
        return try #require(plan.flatMap { JSONValue(parsing: $0) })
    }
}

extension JSONValue {
    /// Every scan node of an `EXPLAIN (FORMAT JSON)` plan (this value), its InitPlans, SubPlans and
    /// CTEs included, as the node objects PostgreSQL wrote: `Relation Name`, `Alias`, `Index Cond`,
    /// `Actual Loops`, ….
    package var planScans: [[String: JSONValue]] {
        var scans: [[String: JSONValue]] = []
        func walk(_ value: JSONValue) {
            if case .array(let list) = value {
                list.forEach(walk)
                return
            }
            guard case .object(let node) = value else { return }
            if node["Relation Name"] != nil, node["Node Type"]?.string?.contains("Scan") == true { scans.append(node) }
            node.values.forEach(walk)
        }
        walk(self)
        return scans
    }
}

extension [String: JSONValue] {
    /// Rows this scan node of an `EXPLAIN (ANALYZE, FORMAT JSON)` plan read over all its loops,
    /// those it kept and those its filter removed.
    package var rowsRead: Int {
        let loops = self["Actual Loops"]?.number ?? 0
        return Int(((self["Actual Rows"]?.number ?? 0) + (self["Rows Removed by Filter"]?.number ?? 0)) * loops)
    }
}
