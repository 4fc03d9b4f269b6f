import CLibPQ
import Foundation
import HeraldCore

/// A failure reported by libpq or the server, with the SQLSTATE when the server sent one.
///
/// - Important: `message` is the server's primary message only. DETAIL and the statement's
///   parameters are never kept, because they can carry device tokens or payloads.
package struct PostgresError: Error, Hashable, Sendable {
    package struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: Hashable, Sendable { case connection, query, closed }
        private let code: Code
        /// The connection could not be opened or broke; the operation can be retried on a new one.
        package static let connection = Self(code: .connection)
        /// The server refused the statement (see `sqlState`).
        package static let query = Self(code: .query)
        /// The connection was closed by this process.
        package static let closed = Self(code: .closed)
        package var description: String {
            switch code {
            case .connection: "connection"
            case .query: "query"
            case .closed: "closed"
            }
        }
    }

    package var kind: Kind
    /// The five-character SQLSTATE, e.g. `23503`, when the server sent one.
    package var sqlState: String?
    package var message: String
    /// The statement's name (never its parameters).
    package var statement: String?

    package init(kind: Kind, sqlState: String? = nil, message: String, statement: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.statement = statement
    }

    /// True when retrying on a fresh connection can help (network, restart, admin shutdown).
    package var isTransient: Bool {
        if kind == .connection { return true }
        guard let state = sqlState else { return false }
        // 08: connection exception, 57P01-03: admin/crash shutdown, cannot connect now,
        // 40001/40P01: serialization failure / deadlock, 53: insufficient resources.
        return state.hasPrefix("08") || state.hasPrefix("57P") || state == "40001" || state == "40P01"
            || state.hasPrefix("53")
    }
}

extension PostgresError: CustomStringConvertible {
    package var description: String {
        var text = "PostgreSQL \(kind) error"
        if let sqlState { text += " [\(sqlState)]" }
        if let statement { text += " in \(statement)" }
        return text + ": " + message
    }
}

extension PostgresError {
    /// Builds an error from a failed result, keeping only SQLSTATE and the primary message.
    static func from(result: OpaquePointer?, connection: OpaquePointer?, statement: String?) -> PostgresError {
        var state: String?
        var message = ""
        if let result {
            if let s = PQresultErrorField(result, Int32(UInt8(ascii: "C"))) { state = String(cString: s) }
            if let m = PQresultErrorField(result, Int32(UInt8(ascii: "M"))) { message = String(cString: m) }
        }
        if message.isEmpty, let connection, let m = PQerrorMessage(connection) {
            message = String(cString: m).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let broken = connection.map { PQstatus($0) != CONNECTION_OK } ?? true
        return PostgresError(
            kind: (state == nil && broken) ? .connection : .query,
            sqlState: state,
            message: message,
            statement: statement
        )
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: Set<Character>) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}

extension Set where Element == Character {
    fileprivate static var whitespacesAndNewlines: Set<Character> { [" ", "\n", "\t", "\r"] }
}
