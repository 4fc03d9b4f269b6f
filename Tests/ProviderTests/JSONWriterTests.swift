import Foundation
import Testing

@testable import Providers

/// Every adapter writes its JSON with ``JSONWriter``: what it writes must read back as what went in.
@Suite struct JSONWriterTests {
    /// Strings with every character that needs escaping, at the start, in the middle and at the
    /// end, next to each other, and none at all; decoded by Foundation's parser.
    @Test func quotedStringsReadBackExactly() throws {
        let special = ["\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1F}", "/", "\u{7F}", "é", "🚆", "\u{2028}"]
        var cases = ["", "plain text of a typical push title", String(repeating: "x", count: 4_000)]
        for s in special {
            cases += [s, s + "tail", "head" + s, "a" + s + "b" + s + s + "c", String(repeating: s, count: 3)]
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let length = Int.random(in: 0...40, using: &generator)
            cases.append(
                String(
                    (0..<length).map { _ in
                        Bool.random(using: &generator)
                            ? Character(special.randomElement(using: &generator)!)
                            : Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &generator)))
                    }
                )
            )
        }
        for text in cases {
            var bytes: [UInt8] = []
            JSONWriter.quote(text, into: &bytes)
            let decoded = try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed) as? String
            #expect(decoded == text, "quoted \(text.debugDescription) as \(String(decoding: bytes, as: UTF8.self))")
            #expect(
                !bytes.dropFirst().dropLast().contains { $0 < 0x20 },
                "a raw control character in \(text.debugDescription)"
            )
        }
    }
}
