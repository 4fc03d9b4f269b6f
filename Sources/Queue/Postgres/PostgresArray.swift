/// Encodes Swift values as PostgreSQL array literals for text-format binds.
///
/// Statements take batches as arrays (`unnest($1::bigint[], $2::text[])`), so one round trip
/// carries a whole batch; values are always bound, never spliced into SQL.
package enum PostgresArray {
    package static func encode(_ values: [Int64]) -> String {
        var out = "{"
        for (i, v) in values.enumerated() {
            if i > 0 { out += "," }
            out += String(v)
        }
        return out + "}"
    }

    package static func encode(_ values: [Int64?]) -> String {
        var out = "{"
        for (i, v) in values.enumerated() {
            if i > 0 { out += "," }
            if let v { out += String(v) } else { out += "NULL" }
        }
        return out + "}"
    }

    package static func encode(_ values: [Double?]) -> String {
        var out = "{"
        for (i, v) in values.enumerated() {
            if i > 0 { out += "," }
            if let v { out += String(v) } else { out += "NULL" }
        }
        return out + "}"
    }

    package static func encode(_ values: [Bool]) -> String {
        "{" + values.map { $0 ? "t" : "f" }.joined(separator: ",") + "}"
    }

    package static func encode(_ values: [String?]) -> String {
        var out = "{"
        for (i, v) in values.enumerated() {
            if i > 0 { out += "," }
            guard let v else {
                out += "NULL"
                continue
            }
            out.append("\"")
            for ch in v.unicodeScalars {
                if ch == "\"" || ch == "\\" { out.append("\\") }
                if ch == "\0" { continue }  // PostgreSQL text cannot hold NUL
                out.unicodeScalars.append(ch)
            }
            out.append("\"")
        }
        return out + "}"
    }

    /// Parses a one-dimensional `bigint[]` in text form, e.g. `{1,2,3}`.
    package static func decodeInt64s(_ text: String?) -> [Int64] {
        guard let text, text.count > 2 else { return [] }
        return text.dropFirst().dropLast().split(separator: ",").compactMap { Int64($0) }
    }
}
