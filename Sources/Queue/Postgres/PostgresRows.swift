import CLibPQ
import HeraldCore

/// The rows of one result, copied out of libpq as text so they can cross threads.
package struct PostgresRows: Sendable {
    package let columns: [String]
    package let rows: [[String?]]
    /// Rows affected, for commands without a result set (from `PQcmdTuples`).
    package let affected: Int

    init(result: OpaquePointer) {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var columns: [String] = []
        columns.reserveCapacity(columnCount)
        for c in 0..<columnCount { columns.append(String(cString: PQfname(result, Int32(c)))) }
        var rows: [[String?]] = []
        rows.reserveCapacity(rowCount)
        for r in 0..<rowCount {
            var row: [String?] = []
            row.reserveCapacity(columnCount)
            for c in 0..<columnCount {
                if PQgetisnull(result, Int32(r), Int32(c)) == 1 {
                    row.append(nil)
                } else {
                    row.append(String(cString: PQgetvalue(result, Int32(r), Int32(c))))
                }
            }
            rows.append(row)
        }
        self.columns = columns
        self.rows = rows
        self.affected = Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    package var count: Int { rows.count }
    package var isEmpty: Bool { rows.isEmpty }
    package var first: [String?]? { rows.first }

    /// The first column of the first row, for single-value queries.
    package var scalar: String? { rows.first?.first ?? nil }
}

/// Typed reads over one text row.
package struct RowReader {
    package let row: [String?]
    package init(_ row: [String?]) { self.row = row }
    package func string(_ i: Int) -> String? { i < row.count ? row[i] : nil }
    package func int(_ i: Int) -> Int? { string(i).flatMap { Int($0) } }
    package func int64(_ i: Int) -> Int64? { string(i).flatMap { Int64($0) } }
    package func double(_ i: Int) -> Double? { string(i).flatMap { Double($0) } }
    package func bool(_ i: Int) -> Bool? {
        guard let s = string(i) else { return nil }
        return s == "t" || s == "true"
    }
}
