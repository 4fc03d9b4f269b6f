import Foundation

/// A parsed JSON value, compared by exact type (`true` never equals `1`).
package enum JSONValue: Sendable, Hashable, Decodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses JSON text; returns nil for malformed input instead of throwing.
    package init?(parsing text: String) {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else { return nil }
        self = value
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// The members of an object, or an empty dictionary for any other value.
    package var members: [String: JSONValue] {
        if case .object(let members) = self { return members }
        return [:]
    }

    package var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    package var number: Double? {
        if case .number(let value) = self, value.isFinite { return value }
        return nil
    }

    /// A number that is a whole value in `Int` range.
    package var int: Int? {
        guard let value = number, value == value.rounded(), abs(value) < 1e15 else { return nil }
        return Int(value)
    }

    package var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// Seconds since 1970 from an ISO-8601 string (any offset, optional fraction) or an epoch number in seconds.
    package var timestamp: Double? {
        if let number { return number }
        guard let text = string, let date = try? Date(text, strategy: Date.ISO8601FormatStyle()) else { return nil }
        return date.timeIntervalSince1970
    }
}

extension [String: JSONValue] {
    /// The object members of JSON text; empty when the text is malformed or not an object.
    package static func parsing(_ text: String) -> Self { JSONValue(parsing: text)?.members ?? [:] }
}
