import Foundation

/// A parsed JSON value, compared by exact type (`true` never equals `1`).
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses JSON text; returns nil for malformed input instead of throwing.
    ///
    /// A small byte-level parser: it runs for every recipient's preferences in every batch,
    /// where `JSONDecoder` (which throws on every type probe) cost more than the rest of the
    /// policy engine together.
    package init?(parsing text: String) {
        var text = text
        let parsed = text.withUTF8 { bytes -> JSONValue? in
            var parser = JSONBytesParser(bytes: bytes)
            guard let value = parser.value(depth: 0) else { return nil }
            parser.skipSpace()
            return parser.index == bytes.count ? value : nil
        }
        guard let parsed else { return nil }
        self = parsed
    }

    /// The members of an object, or an empty dictionary for any other value.
    package var members: [String: JSONValue] {
        if case .object(let members) = self { return members }
        return [:]
    }

    package var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    package var number: Double? {
        if case .number(let value) = self, value.isFinite { return value }
        return nil
    }

    /// A number that is a whole value in `Int` range.
    package var int: Int? {
        guard let value = number, value == value.rounded(), abs(value) < 1e15 else { return nil }
        return Int(value)
    }

    package var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// An instant from an ISO-8601 string (any offset, optional fraction) or an epoch number in seconds.
    package var timestamp: Date? {
        if let number { return Date(timeIntervalSince1970: number) }
        return string.flatMap { try? Date($0, strategy: Date.ISO8601FormatStyle()) }
    }
}

extension [String: JSONValue] {
    /// The object members of JSON text; empty when the text is malformed or not an object.
    package static func parsing(_ text: String) -> Self { JSONValue(parsing: text)?.members ?? [:] }
}

/// Recursive-descent JSON over UTF-8 bytes (RFC 8259), nesting limited to 64 levels.
private struct JSONBytesParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    mutating func value(depth: Int) -> JSONValue? {
        guard depth < 64 else { return nil }
        skipSpace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            var members: [String: JSONValue] = [:]
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard let key = string() else { return nil }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                guard let member = value(depth: depth + 1) else { return nil }
                members[key] = member
                skipSpace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                return nil
            }
        case UInt8(ascii: "["):
            index += 1
            var elements: [JSONValue] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                guard let element = value(depth: depth + 1) else { return nil }
                elements.append(element)
                skipSpace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(elements)
                }
                return nil
            }
        case UInt8(ascii: "\""):
            return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        default: return number()
        }
    }

    private mutating func literal(_ word: StaticString, _ result: JSONValue) -> JSONValue? {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return nil }
        for i in 0..<count where bytes[index + i] != word.utf8Start[i] { return nil }
        index += count
        return result
    }

    private mutating func number() -> JSONValue? {
        let start = index
        while index < bytes.count, "+-0123456789.eE".utf8.contains(bytes[index]) { index += 1 }
        guard index > start, let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else {
            return nil
        }
        return .number(value)
    }

    private mutating func string() -> String? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"):
                    guard var scalar = hex4() else { return nil }
                    if (0xD800..<0xDC00).contains(scalar), index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    {
                        index += 2
                        guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    out.append(contentsOf: String(Character(Unicode.Scalar(scalar) ?? "\u{FFFD}")).utf8)
                default: out.append(escape)  // \" \\ \/
                }
            default:
                guard byte >= 0x20 else { return nil }
                out.append(byte)
            }
        }
        return nil
    }

    private mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count,
            let value = UInt32(String(decoding: bytes[index..<(index + 4)], as: UTF8.self), radix: 16)
        else { return nil }
        index += 4
        return value
    }
}
