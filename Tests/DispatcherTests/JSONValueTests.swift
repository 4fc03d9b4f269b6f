import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("JSONValue: the byte-level parser used for preferences and category rules")
struct JSONValueTests {
    @Test(
        "parses every JSON form",
        arguments: [
            (
                #"{"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}}"#,
                JSONValue.object([
                    "a": .array([.number(1), .number(-2500), .bool(true), .bool(false), .null]),
                    "b": .object(["c": .string("d")]),
                ])
            ),
            (#"  "esc\"a\\pe\n\t\/ \u00e9 \ud83d\ude00"  "#, JSONValue.string("esc\"a\\pe\n\t/ é 😀")),
            ("[]", JSONValue.array([])),
            ("{}", JSONValue.object([:])),
            ("0", JSONValue.number(0)),
        ]
    )
    func parses(text: String, expected: JSONValue) {
        #expect(JSONValue(parsing: text) == expected)
    }

    @Test(
        "refuses malformed input without crashing",
        arguments: [
            "", "{", "[1,]", #"{"a" 1}"#, "tru", #""unterminated"#, "{\"a\":1} x", "\"ctrl\u{01}\"",
            String(repeating: "[", count: 100) + String(repeating: "]", count: 100), "nan", #"{"a":}"#,
        ]
    )
    func refuses(text: String) {
        #expect(JSONValue(parsing: text) == nil)
    }
}
