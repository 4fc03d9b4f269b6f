import HeraldCore

/// Writes JSON objects straight into bytes, keys in the order given.
///
/// The adapters' payloads are small trees of strings, integers, doubles and objects; building
/// them through `JSONSerialization` (boxing into `[String: Any]`, dynamic casts, Foundation's
/// writer) was a quarter of the APNs adapter's CPU. Output is standard JSON: `"` `\\` and
/// control characters escaped, everything else as UTF-8.
package struct JSONWriter {
    package private(set) var bytes: [UInt8] = []
    private var needsComma = [false]

    package init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    package mutating func beginObject(_ key: String? = nil) {
        if let key { writeKey(key) } else { separate() }
        bytes.append(UInt8(ascii: "{"))
        needsComma.append(false)
    }

    package mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma.removeLast()
    }

    package mutating func string(_ key: String, _ value: String) {
        writeKey(key)
        Self.quote(value, into: &bytes)
    }

    package mutating func int(_ key: String, _ value: Int) {
        writeKey(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    package mutating func bool(_ key: String, _ value: Bool) {
        writeKey(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// `"key": {…}` of string values, keys sorted (a reproducible encoding).
    package mutating func strings(_ key: String, _ map: [String: String]) {
        beginObject(key)
        for name in map.keys.sorted() { string(name, map[name]!) }
        endObject()
    }

    package mutating func integers(_ key: String, _ values: [Int64]) {
        writeKey(key)
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: String(value).utf8)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    package mutating func double(_ key: String, _ value: Double) {
        writeKey(key)
        bytes.append(
            contentsOf: (value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)).utf8
        )
    }

    private mutating func separate() {
        if needsComma[needsComma.count - 1] { bytes.append(UInt8(ascii: ",")) }
        needsComma[needsComma.count - 1] = true
    }

    private mutating func writeKey(_ key: String) {
        separate()
        Self.quote(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Appends `text` as a JSON string literal: the runs between characters that need escaping
    /// are copied whole (most strings have none, and go in one copy).
    package static func quote(_ text: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var run = 0
            for i in utf8.indices {
                let byte = utf8[i]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i]))
                run = i + 1
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                default:
                    bytes.append(contentsOf: [
                        UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    ])
                    bytes.append(contentsOf: Hex.encode([byte]).utf8)
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
