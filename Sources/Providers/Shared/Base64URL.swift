import Foundation
import HeraldCore

/// Base64url without padding (RFC 4648 §5), as JWTs, VAPID and Web Push keys use it.
package enum Base64URL {
    package static func encode<D: DataProtocol>(_ bytes: D) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Accepts base64url or standard base64, with or without padding; nil if malformed.
    package static func decode(_ text: String) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        s = s.trimmingCharacters(in: .whitespacesAndNewlines)
        while s.count % 4 != 0 { s.append("=") }
        return Data(base64Encoded: s)
    }
}
