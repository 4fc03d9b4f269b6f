import Crypto
import Foundation
import HeraldCore
import NIOConcurrencyHelpers
import _CryptoExtras

/// One message a simulated provider accepted, kept for assertions.
package struct SimulatorRecord: Sendable {
    package var provider: String
    /// The device token / subscription id / Expo token the message was for.
    package var token: String
    /// Request headers that matter for assertions (lowercased names; `authorization` removed).
    package var headers: [String: String]
    /// The payload as the provider understood it: APNs/FCM/Expo JSON text, Web Push plaintext
    /// after decryption.
    package var payload: String
    package var receivedAt: Date

    package init(provider: String, token: String, headers: [String: String], payload: String, receivedAt: Date) {
        self.provider = provider
        self.token = token
        self.headers = headers
        self.payload = payload
        self.receivedAt = receivedAt
    }
}

/// What the simulated providers trust and have issued, shared by all services.
package final class SimulatorKeyring: Sendable {
    package struct APNsKey: Sendable {
        package var teamID: String
        package var keyID: String
        package var publicKey: P256.Signing.PublicKey
        /// Bundle ids (apns-topic) this key may push to; empty = any.
        package var topics: Set<String>
    }

    package struct ServiceAccount: Sendable {
        package var clientEmail: String
        package var projectID: String
        package var publicKey: _RSA.Signing.PublicKey
    }

    package struct WebPushSubscription: Sendable {
        package var id: String
        /// User-agent side ECDH key; its public half is the subscription's `p256dh`.
        package var privateKey: P256.KeyAgreement.PrivateKey
        package var authSecret: Data
    }

    private struct State {
        var apnsKeys: [String: APNsKey] = [:]  // by keyID
        var serviceAccounts: [String: ServiceAccount] = [:]  // by client email
        var accessTokens: [String: (projectID: String, expires: Date)] = [:]
        var expoAccessTokens: Set<String> = []
        var webPushSubscriptions: [String: WebPushSubscription] = [:]
    }

    private let state = NIOLockedValueBox(State())

    package init() {}

    package func trustAPNsKey(_ key: APNsKey) { state.withLockedValue { $0.apnsKeys[key.keyID] = key } }
    package func apnsKey(keyID: String) -> APNsKey? { state.withLockedValue { $0.apnsKeys[keyID] } }

    package func trustServiceAccount(_ account: ServiceAccount) {
        state.withLockedValue { $0.serviceAccounts[account.clientEmail] = account }
    }
    package func serviceAccount(email: String) -> ServiceAccount? {
        state.withLockedValue { $0.serviceAccounts[email] }
    }

    package func issueAccessToken(_ token: String, projectID: String, expires: Date) {
        state.withLockedValue { $0.accessTokens[token] = (projectID, expires) }
    }
    package func accessToken(_ token: String) -> (projectID: String, expires: Date)? {
        state.withLockedValue { $0.accessTokens[token] }
    }

    /// When set is non-empty, Expo requires `Authorization: Bearer <one of them>`.
    package func requireExpoAccessToken(_ token: String) {
        state.withLockedValue { _ = $0.expoAccessTokens.insert(token) }
    }
    package var expoAccessTokens: Set<String> { state.withLockedValue { $0.expoAccessTokens } }

    package func addWebPushSubscription(_ subscription: WebPushSubscription) {
        state.withLockedValue { $0.webPushSubscriptions[subscription.id] = subscription }
    }
    package func webPushSubscription(id: String) -> WebPushSubscription? {
        state.withLockedValue { $0.webPushSubscriptions[id] }
    }
}

/// Accepted messages, newest last, bounded so a benchmark run cannot grow the simulator
/// without limit; counters are never trimmed.
package final class SimulatorRecorder: Sendable {
    private struct State {
        var records: [SimulatorRecord] = []
        var accepted: [String: Int] = [:]
        var rejected: [String: Int] = [:]
    }

    private let state = NIOLockedValueBox(State())
    package let capacity: Int

    package init(capacity: Int = 100_000) { self.capacity = capacity }

    package func record(_ record: SimulatorRecord) {
        state.withLockedValue {
            $0.accepted[record.provider, default: 0] += 1
            $0.records.append(record)
            if $0.records.count > capacity { $0.records.removeFirst($0.records.count - capacity) }
        }
    }

    /// Counts an error answer (injected or real) per provider.
    package func countRejected(provider: String) { state.withLockedValue { $0.rejected[provider, default: 0] += 1 } }

    package func records(provider: String? = nil) -> [SimulatorRecord] {
        state.withLockedValue { s in provider.map { p in s.records.filter { $0.provider == p } } ?? s.records }
    }
    package func acceptedCount(provider: String) -> Int { state.withLockedValue { $0.accepted[provider] ?? 0 } }
    package func rejectedCount(provider: String) -> Int { state.withLockedValue { $0.rejected[provider] ?? 0 } }

    package func reset() { state.withLockedValue { $0 = State() } }
}

/// Shared state handed to every service.
package final class SimulatorContext: Sendable {
    package let keyring: SimulatorKeyring
    package let recorder: SimulatorRecorder
    private let clock: @Sendable () -> Date
    /// This server's base URL, e.g. `https://127.0.0.1:8443` (set once the port is bound).
    private let base = NIOLockedValueBox("")

    package init(
        keyring: SimulatorKeyring = SimulatorKeyring(),
        recorder: SimulatorRecorder = SimulatorRecorder(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.keyring = keyring
        self.recorder = recorder
        self.clock = now
    }

    package func now() -> Date { clock() }
    package var baseURL: String {
        get { base.withLockedValue { $0 } }
        set { base.withLockedValue { $0 = newValue } }
    }
}
