import Foundation
import HeraldCore

/// Base64url without padding (RFC 4648 §5), as JWTs, VAPID and Web Push keys use it.
///
/// Foundation does the coding; the alphabet's two differing characters are swapped on bytes
/// (Web Push decodes two subscription keys per message).
package enum Base64URL {
    package static func encode<D: DataProtocol>(_ bytes: D) -> String {
        var encoded = Data(bytes).base64EncodedData()
        while encoded.last == UInt8(ascii: "=") { encoded.removeLast() }
        for i in encoded.indices {
            switch encoded[i] {
            case UInt8(ascii: "+"): encoded[i] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): encoded[i] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// Accepts base64url or standard base64, with or without padding, with surrounding
    /// whitespace; nil if malformed.
    package static func decode(_ text: String) -> Data? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): bytes.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: "/"))
            default: bytes.append(byte)
            }
        }
        while let first = bytes.first, Self.isWhitespace(first) { bytes.removeFirst() }
        while let last = bytes.last, Self.isWhitespace(last) { bytes.removeLast() }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(bytes))
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
