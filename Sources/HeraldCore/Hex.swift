/// Lowercase hexadecimal, without Foundation's `String(format:)` (slow on Linux).
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    package static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
