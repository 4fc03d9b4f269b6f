import Foundation
import HeraldCore

/// A PostgreSQL composite type a statement takes arrays of: its name and its fields in order.
package struct PostgresCompositeType: Sendable, Hashable {
    package let name: String
    package let fields: [String]

    package init(_ name: String, fields: [String]) {
        self.name = name
        self.fields = fields
    }
}

/// Encodes a batch of rows as one text-format bind: an array of composite values
/// (`{"(…)","(…)"}`) that the statement expands with `unnest($n::type[])` and reads by field name.
///
/// Each field is written with its name, checked against the type's field list in debug builds
/// (`SchemaTests` checks the lists against the database), so a field cannot land in another's place.
///
/// ```swift
/// var jobs = PostgresRecords(OutboxStatements.settledJob)
/// jobs.row { $0.field("id", 42); $0.field("state", "done") }
/// ```
package struct PostgresRecords {
    package let type: PostgresCompositeType
    private var out: [UInt8] = [UInt8(ascii: "{")]
    private(set) var count = 0

    /// - Parameter bytes: room to reserve for the literal, when its size can be estimated (a
    ///   buffer grown by doubling copies itself each time).
    package init(_ type: PostgresCompositeType, reserving bytes: Int = 0) {
        self.type = type
        out.reserveCapacity(bytes)
    }

    /// Appends one row; `fill` writes its fields in the type's order.
    package mutating func row(_ fill: (inout Row) -> Void) {
        if count > 0 { out.append(UInt8(ascii: ",")) }
        var row = Row(type: type, out: out)
        out = []  // the row owns the buffer while it writes (no copy)
        row.begin()
        fill(&row)
        assert(row.index == type.fields.count, "\(type.name): \(row.index) of \(type.fields.count) fields written")
        out = row.end()
        count += 1
    }

    /// The array literal.
    package func encoded() -> String {
        var out = out
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// One composite value being written: `"(` fields `)"` inside the array literal.
    ///
    /// Two layers of quoting: a field is quoted inside the record (`"` and `\` escaped by a
    /// backslash), and the record is quoted inside the array, which escapes those again. A NULL
    /// field is written as nothing between its commas.
    package struct Row {
        let type: PostgresCompositeType
        var out: [UInt8]
        fileprivate(set) var index = 0

        fileprivate init(type: PostgresCompositeType, out: [UInt8]) {
            self.type = type
            self.out = out
        }

        fileprivate mutating func begin() { out.append(contentsOf: "\"(".utf8) }
        fileprivate mutating func end() -> [UInt8] {
            out.append(contentsOf: ")\"".utf8)
            return out
        }

        private mutating func next(_ name: String) {
            assert(
                index < type.fields.count && type.fields[index] == name,
                "\(type.name): field \(index) is \(index < type.fields.count ? type.fields[index] : "past the end"), not \(name)"
            )
            if index > 0 { out.append(UInt8(ascii: ",")) }
            index += 1
        }

        /// A text field; nil is NULL. NUL bytes are dropped (PostgreSQL text cannot hold them).
        package mutating func field(_ name: String, _ value: String?) {
            next(name)
            guard let value else { return }
            out.append(contentsOf: "\\\"".utf8)  // the record's quote, escaped for the array
            // Most values need no escape: copied whole (a native string's bytes are contiguous).
            let copied = value.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
                guard !bytes.contains(where: { $0 == 0 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                    return false
                }
                out.append(contentsOf: bytes)
                return true
            }
            if copied == true {
                out.append(contentsOf: "\\\"".utf8)
                return
            }
            for byte in value.utf8 {
                switch byte {
                case 0: continue
                // `"` or `\` in a value: escaped for the record (\" or \\), then both bytes for the array.
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C, 0x5C, byte])
                default: out.append(byte)
                }
            }
            out.append(contentsOf: "\\\"".utf8)
        }

        /// A number or boolean field, written bare (no byte of it needs quoting); nil is NULL.
        private mutating func bare(_ name: String, _ text: String?) {
            next(name)
            if let text { out.append(contentsOf: text.utf8) }
        }

        package mutating func field(_ name: String, _ value: Int64?) { bare(name, value.map { String($0) }) }
        package mutating func field(_ name: String, _ value: Int?) { bare(name, value.map { String($0) }) }
        package mutating func field(_ name: String, _ value: Double?) { bare(name, value.map { String($0) }) }
        package mutating func field(_ name: String, _ value: Bool?) { bare(name, value.map { $0 ? "t" : "f" }) }
    }
}
