import Foundation
import HeraldCore

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
        // Works on UTF-8 bytes: most values need no escaping and are copied in one append.
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(values.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (i, v) in values.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            guard let v else {
                out.append(contentsOf: "NULL".utf8)
                continue
            }
            out.append(UInt8(ascii: "\""))
            let utf8 = v.utf8
            let plain = utf8.withContiguousStorageIfAvailable { bytes -> Bool in
                guard !bytes.contains(where: { $0 == 0x22 || $0 == 0x5C || $0 == 0 }) else { return false }
                out.append(contentsOf: bytes)
                return true
            }
            if plain != true {
                for byte in utf8 {
                    if byte == 0 { continue }  // PostgreSQL text cannot hold NUL
                    if byte == 0x22 || byte == 0x5C { out.append(0x5C) }
                    out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses a one-dimensional `bigint[]` in text form, e.g. `{1,2,3}`.
    package static func decodeInt64s(_ text: String?) -> [Int64] {
        guard let text, text.count > 2 else { return [] }
        return text.dropFirst().dropLast().split(separator: ",").compactMap { Int64($0) }
    }
}
