import Foundation

/// The fields of a query string or an `application/x-www-form-urlencoded` body, in order
/// (a checkbox list repeats its name).
struct FormFields: Sendable {
    private(set) var pairs: [(String, String)] = []

    init(_ encoded: String) {
        for part in encoded.split(separator: "&") where !part.isEmpty {
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            pairs.append((Self.decode(kv[0]), kv.count > 1 ? Self.decode(kv[1]) : ""))
        }
    }

    private static func decode(_ s: Substring) -> String {
        let spaced = s.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }

    /// The first value of `name`, trimmed; nil when absent or empty.
    subscript(_ name: String) -> String? {
        guard let v = pairs.first(where: { $0.0 == name })?.1.trimmingCharacters(in: .whitespacesAndNewlines),
            !v.isEmpty
        else { return nil }
        return v
    }

    /// Every value of `name`.
    func all(_ name: String) -> [String] { pairs.filter { $0.0 == name }.map(\.1) }
}

extension String {
    /// This text as one URL path segment (`/users/<id>`) or query value (`?user=<id>`).
    var pathSegment: String {
        addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? self
    }
}
