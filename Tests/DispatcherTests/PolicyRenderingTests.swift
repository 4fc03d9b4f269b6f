import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("Policy: rendering helpers")
struct PolicyRenderingTests {
    static let family = "👨‍👩‍👧‍👦"
    static let accented = "e\u{301}"

    @Test(
        "seed 000 req 2.2: previews keep the first 100 characters, cut on a grapheme boundary",
        arguments: [
            (String(repeating: "a", count: 100), String(repeating: "a", count: 100)),
            (String(repeating: "a", count: 101), String(repeating: "a", count: 100) + "…"),
            (String(repeating: family, count: 150), String(repeating: family, count: 100) + "…"),
            (String(repeating: accented, count: 120), String(repeating: accented, count: 100) + "…"),
            (String(repeating: "a", count: 99) + " b" + "c", String(repeating: "a", count: 99) + "…"),
            ("", ""),
        ]
    )
    func preview(body: String, expected: String) {
        #expect(previewBody(body) == expected)
    }

    @Test(
        "previews honour a custom limit",
        arguments: [("Hello world", 5, "Hello…"), ("Hi", 5, "Hi"), ("Hello", 0, "…")]
    )
    func previewLimit(body: String, limit: Int, expected: String) {
        #expect(previewBody(body, limit: limit) == expected)
    }

    @Test(
        "seed 000 req 6.2-6.4, seed 003 req 11: the APNs interruption level a priority implies",
        arguments: [
            (Priority.critical, false, "critical"), (.high, false, "time-sensitive"), (.normal, false, "active"),
            (.low, false, "passive"), (.normal, true, nil), (.high, true, nil), (.low, true, nil),
        ] as [(Priority, Bool, String?)]
    )
    func interruptionLevel(_ priority: Priority, _ silent: Bool, _ level: String?) {
        #expect(InterruptionLevel.default(for: priority, silent: silent) == level)
    }
}
