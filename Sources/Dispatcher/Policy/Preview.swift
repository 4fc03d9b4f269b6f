import Foundation
import HeraldCore

/// The first `limit` characters of `body`, cut on a grapheme boundary, with "…" when cut (seed 000 req 2.2).
///
/// Whitespace before the cut is trimmed so the ellipsis follows a word; emoji and combined characters stay whole.
package func previewBody(_ body: String, limit: Int = 100) -> String {
    guard body.count > limit else { return body }
    var cut = body.prefix(max(0, limit))
    while cut.last?.isWhitespace == true { cut = cut.dropLast() }
    return String(cut) + "…"
}
