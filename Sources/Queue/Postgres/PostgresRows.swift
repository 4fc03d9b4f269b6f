import CLibPQ
import Foundation
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

/// Typed reads over one text row, by column name (the statement's output names: give every
/// computed column an `AS` name).
package struct RowReader {
    package let row: [String?]
    let columns: [String]

    package init(_ row: [String?], columns: [String]) {
        self.row = row
        self.columns = columns
    }

    package func string(_ column: String) -> String? {
        guard let i = columns.firstIndex(of: column) else {
            assertionFailure("no column \(column) in \(columns)")
            return nil
        }
        return i < row.count ? row[i] : nil
    }
    /// A column only some of the statements read with the same code return; nil when absent.
    package func optional(_ column: String) -> String? {
        columns.firstIndex(of: column).flatMap { $0 < row.count ? row[$0] : nil }
    }
    package func int(_ column: String) -> Int? { string(column).flatMap { Int($0) } }
    package func int64(_ column: String) -> Int64? { string(column).flatMap { Int64($0) } }
    package func bool(_ column: String) -> Bool? {
        guard let s = string(column) else { return nil }
        return s == "t" || s == "true"
    }
}

extension PostgresRows {
    /// Every row, read by column name.
    package var readers: [RowReader] { rows.map { RowReader($0, columns: columns) } }
    /// The first row read by column name; every read is nil when there is none.
    package var firstReader: RowReader {
        RowReader(rows.first ?? Array(repeating: nil, count: columns.count), columns: columns)
    }
}
