import HeraldCore

/// A credential (private key, service account, access token, VAPID key) that must never be printed.
///
/// `description`, `debugDescription` and string interpolation all show `<redacted>`; only
/// ``reveal()`` gives the bytes, at the one place that signs or sends them.
package struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private let value: String

    package init(_ value: String) { self.value = value }

    package func reveal() -> String { value }

    package var isEmpty: Bool { value.isEmpty }
    package var description: String { "<redacted>" }
    package var debugDescription: String { "<redacted>" }
}
