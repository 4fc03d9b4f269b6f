import Foundation
import HeraldCore

/// Reads the text forms PostgreSQL writes for composite values and one-dimensional arrays.
///
/// A composite value is `(a,"b c",,…)`: an empty field is NULL; a field is quoted when it is empty
/// text or holds a quote, backslash, parenthesis, comma or space, and inside quotes `""` and `\x`
/// stand for `"` and `x`. An array is `{a,"b c",NULL,…}`: an unquoted `NULL` is NULL and inside
/// quotes `\x` stands for `x`. A composite or array nested in another is itself a quoted field,
/// read again with these functions.
///
/// Works on UTF-8 bytes and copies a field that needs no unescaping in one go: the claim reads
/// every row through here.
package enum PostgresText {
    /// The fields of a composite value's text, in order; `[]` when `text` is not one.
    /// `expected`: how many fields the type has, to size the result once.
    package static func recordFields(_ text: String, expected: Int = 0) -> [String?] {
        items(text, open: UInt8(ascii: "("), close: UInt8(ascii: ")"), isRecord: true, expected: expected)
    }

    /// The elements of a one-dimensional array's text, in order; `[]` when `text` is not one.
    package static func arrayElements(_ text: String) -> [String?] {
        items(text, open: UInt8(ascii: "{"), close: UInt8(ascii: "}"), isRecord: false)
    }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")
    private static let comma = UInt8(ascii: ",")

    private static func items(
        _ text: String,
        open: UInt8,
        close: UInt8,
        isRecord: Bool,
        expected: Int = 0
    ) -> [String?] {
        var text = text
        return text.withUTF8 { bytes -> [String?] in
            let end = bytes.count - 1
            guard end >= 1, bytes[0] == open, bytes[end] == close else { return [] }
            if !isRecord && end == 1 { return [] }  // `{}`: no element (`()` is one NULL field)
            var items: [String?] = []
            items.reserveCapacity(expected)
            var scratch: [UInt8] = []
            var i = 1
            while true {
                if i < end && bytes[i] == quote {
                    // Quoted: up to the closing quote, unescaping as it goes.
                    i += 1
                    var start = i
                    var escaped = false
                    scratch.removeAll(keepingCapacity: true)
                    while i < end {
                        let byte = bytes[i]
                        let doubled = byte == quote && i + 1 < end && bytes[i + 1] == quote
                        if (byte == backslash && i + 1 < end) || doubled {
                            scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
                            scratch.append(bytes[i + 1])
                            i += 2
                            start = i
                            escaped = true
                        } else if byte == quote {
                            break
                        } else {
                            i += 1
                        }
                    }
                    if escaped {
                        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
                        items.append(String(decoding: scratch, as: UTF8.self))
                    } else {
                        items.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self))
                    }
                    i += 1  // the closing quote
                } else {
                    // Bare: up to the next comma (PostgreSQL quotes any field holding one).
                    let start = i
                    while i < end && bytes[i] != comma { i += 1 }
                    let item = UnsafeBufferPointer(rebasing: bytes[start..<i])
                    let isNull = isRecord ? item.isEmpty : item.elementsEqual("NULL".utf8)
                    items.append(isNull ? nil : String(decoding: item, as: UTF8.self))
                }
                guard i < end && bytes[i] == comma else { break }
                i += 1
            }
            return items
        }
    }
}
