/// A configuration value that cannot work, named by its key.
package struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    package var key: String
    package var reason: String
    package init(key: String, reason: String) {
        self.key = key
        self.reason = reason
    }
    package var description: String { "invalid configuration \(key): \(reason)" }
}
