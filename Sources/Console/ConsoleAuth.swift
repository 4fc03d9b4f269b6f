import Crypto
import Foundation
import HeraldCore
import Synchronization

/// Who may use the console and what they may do.
package enum ConsoleRole: String, Sendable, Hashable, CaseIterable {
    /// Reads every page; changes nothing.
    case viewer
    /// Also pauses, resumes, cancels and replays or purges dead letters.
    case `operator`
}

/// The console's accounts, read from a secret (`console.credentials` or `console.credentials_file`).
///
/// One account per line, `name:role:password`, role `viewer` or `operator`; blank lines and lines
/// starting with `#` are skipped. A password may contain `:`. Passwords are kept only as SHA-256
/// digests and compared in constant time (swift-crypto compares digests that way).
package struct ConsoleCredentials: Sendable {
    struct Account: Sendable {
        var role: ConsoleRole
        var digest: SHA256Digest
    }

    private let accounts: [String: Account]
    /// Key of the CSRF tokens: derived from the whole secret, so every replica given the same
    /// secret issues and accepts the same tokens, and changing the secret revokes them.
    private let csrfKey: SymmetricKey

    /// Parses the secret's text; throws a ``ConfigurationError`` naming the line (never its password).
    package init(parsing text: String, key: String = "console.credentials") throws {
        var accounts: [String: Account] = [:]
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[0].isEmpty else {
                throw ConfigurationError(key: key, reason: "line \(number + 1): expected name:role:password")
            }
            guard let role = ConsoleRole(rawValue: String(parts[1])) else {
                throw ConfigurationError(key: key, reason: "line \(number + 1): role must be viewer or operator")
            }
            guard parts[2].count >= 12 else {
                throw ConfigurationError(
                    key: key,
                    reason: "line \(number + 1): the password must have at least 12 characters"
                )
            }
            let name = String(parts[0])
            guard accounts[name] == nil else {
                throw ConfigurationError(key: key, reason: "line \(number + 1): \(name) is listed twice")
            }
            accounts[name] = Account(role: role, digest: SHA256.hash(data: Data(parts[2].utf8)))
        }
        guard !accounts.isEmpty else { throw ConfigurationError(key: key, reason: "lists no account") }
        self.accounts = accounts
        self.csrfKey = SymmetricKey(data: SHA256.hash(data: Data(("herald-console-csrf\n" + text).utf8)))
    }

    /// The names of the accounts, sorted (for `check-config`; never the passwords).
    package var names: [String] { accounts.keys.sorted() }

    /// The role of `name` when `password` is its password. An unknown name costs the same work
    /// (a digest compared against a stand-in).
    package func authenticate(name: String, password: String) -> ConsoleRole? {
        let given = SHA256.hash(data: Data(password.utf8))
        let account = accounts[name]
        let matches = given == (account?.digest ?? Self.unknownAccount)
        return matches ? account?.role : nil
    }

    /// What an unknown name's password is compared against.
    private static let unknownAccount = SHA256.hash(data: Data("herald-console-unknown-account".utf8))

    /// The token every form of `name`'s pages carries; a POST without it is refused.
    package func csrfToken(for name: String) -> String {
        Hex.encode(HMAC<SHA256>.authenticationCode(for: Data(name.utf8), using: csrfKey))
    }

    /// Whether `token` is `name`'s CSRF token. Both are hashed first, so the comparison is
    /// swift-crypto's constant-time digest equality whatever the token's length.
    package func checkCSRF(_ token: String, for name: String) -> Bool {
        SHA256.hash(data: Data(token.utf8)) == SHA256.hash(data: Data(csrfToken(for: name).utf8))
    }
}

/// Limits failed logins per client address: after `maxFailures` failures within `window`, the
/// address gets 429 without its credentials being checked until the window has passed.
package final class LoginLimiter: Sendable {
    private struct Entry {
        var failures: Int
        var windowStart: Double
    }
    private let entries = Mutex<[String: Entry]>([:])
    let maxFailures: Int
    let window: Double

    package init(maxFailures: Int = 10, window: Double = 60) {
        self.maxFailures = maxFailures
        self.window = window
    }

    /// Seconds the address must wait, or nil when it may try.
    package func retryAfter(_ address: String, now: Double) -> Double? {
        entries.withLock { entries in
            guard let e = entries[address], now - e.windowStart < window, e.failures >= maxFailures else { return nil }
            return window - (now - e.windowStart)
        }
    }

    package func recordFailure(_ address: String, now: Double) {
        entries.withLock { entries in
            if entries.count > 10_000 { entries = entries.filter { now - $0.value.windowStart < window } }
            if var e = entries[address], now - e.windowStart < window {
                e.failures += 1
                entries[address] = e
            } else {
                entries[address] = Entry(failures: 1, windowStart: now)
            }
        }
    }
}
