import AsyncHTTPClient
import Crypto
import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import ProviderSimulator
import Synchronization
import Testing

@testable import Providers

/// A wall clock (dates) tests can move, for token lifetimes.
final class WallTestClock: Sendable {
    private let value: Mutex<Date>
    init(_ date: Date = Date()) { value = Mutex(date) }
    var now: Date { value.withLock { $0 } }
    func advance(by seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

@Suite struct APNsTests {
    static let logger = Logger(label: "apns-tests")
    static let token = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"

    static func provider(
        _ simulator: ProviderSimulator,
        _ client: HTTP2Client,
        key: SimulatorCredentials.APNsKeyMaterial,
        timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> APNsProvider {
        let credentials = APNsCredentials(
            teamID: key.teamID,
            keyID: key.keyID,
            privateKeyPEM: Secret(key.privateKeyPEM),
            topic: key.topic
        )
        return try APNsProvider(
            configuration: APNsConfiguration(
                apps: ["app": credentials],
                productionURL: simulator.baseURL,
                sandboxURL: simulator.baseURL
            ),
            client: client,
            requestTimeout: timeout,
            now: now
        )
    }

    static func message(
        token: String = token,
        jobID: Int64 = 1,
        registeredAt: Double = 0,
        silent: Bool = false,
        environment: String = "production",
        appID: String = "app"
    ) -> PushMessage {
        PushMessage(
            jobID: jobID,
            device: Device(
                id: jobID,
                userID: "u1",
                provider: .apns,
                token: token,
                appID: appID,
                environment: environment,
                registeredAt: Date(timeIntervalSince1970: registeredAt)
            ),
            title: "Title",
            body: "Body",
            collapseID: "job-\(jobID)",
            silent: silent,
            expiresAt: Date(timeIntervalSince1970: 1_900_000_000)
        )
    }

    /// One message through a fresh simulator and provider, with `rule` injected first.
    static func sendOne(
        _ message: PushMessage = message(),
        rule: FaultRule? = nil
    ) async throws -> (DeliveryOutcome, [SimulatorRecord]) {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(topic: "com.example.app", trustIn: simulator.context.keyring)
            if let rule { try simulator.faults.add(rule) }
            let outcome = try await provider(simulator, client, key: key).send([message], logger: logger)[0]
            return (outcome, simulator.context.recorder.records(provider: "apns"))
        }
    }

    @Test func acceptedWithEveryHeaderAndField() async throws {
        var message = Self.message(jobID: 42)
        message.subtitle = "Sub"
        message.priority = .high
        message.badge = 3
        message.sound = "ping.caf"
        message.actionCategory = "REPLY"
        message.threadID = "chat-7"
        message.interruptionLevel = "time-sensitive"
        message.imageURL = "https://example.com/a.png"
        message.data = ["eventType": "chat.message", "route": "/chat/7"]
        message.metadata = ["k": "v"]
        message.collapseID = String(repeating: "é", count: 40)  // 80 bytes: truncated to 64 at a character
        let (outcome, records) = try await Self.sendOne(message)
        #expect(outcome.disposition == .accepted)
        #expect(outcome.reason == .ok)
        #expect(outcome.latency != nil)
        let record = try #require(records.first)
        #expect(records.count == 1)
        #expect(record.token == Self.token)
        #expect(record.headers["x-simulator-http-version"] == "h2")
        #expect(record.headers["apns-push-type"] == "alert")
        #expect(record.headers["apns-priority"] == "10")
        #expect(record.headers["apns-expiration"] == "1900000000")
        #expect(record.headers["apns-topic"] == "com.example.app")
        #expect(record.headers["apns-collapse-id"] == String(repeating: "é", count: 32))
        #expect(record.headers["apns-id"] == APNsRequest.apnsID(for: message))
        #expect(UUID(uuidString: record.headers["apns-id"] ?? "") != nil)
        #expect(record.headers["authorization"] == nil)
        #expect(record.headers["x-simulator-jwt-iat"] != nil)

        let payload = try #require(try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect(aps["alert"] as? [String: String] == ["title": "Title", "subtitle": "Sub", "body": "Body"])
        #expect(aps["badge"] as? Int == 3)
        #expect(aps["sound"] as? String == "ping.caf")
        #expect(aps["category"] as? String == "REPLY")
        #expect(aps["thread-id"] as? String == "chat-7")
        #expect(aps["interruption-level"] as? String == "time-sensitive")
        #expect(aps["relevance-score"] as? Double == 0.75)
        #expect(aps["mutable-content"] as? Int == 1)
        #expect(aps["content-available"] == nil)
        #expect(payload["eventType"] as? String == "chat.message")
        #expect(payload["route"] as? String == "/chat/7")
        #expect(payload["metadata"] as? [String: String] == ["k": "v"])  // an object, as the app declared it
        #expect(payload["imageURL"] as? String == "https://example.com/a.png")
    }

    @Test func silentIsBackgroundPriority5() async throws {
        var message = Self.message(silent: true)
        message.priority = .critical
        message.data = ["eventType": "sync"]
        let (outcome, records) = try await Self.sendOne(message)
        #expect(outcome.disposition == .accepted)
        let record = try #require(records.first)
        #expect(record.headers["apns-push-type"] == "background")
        #expect(record.headers["apns-priority"] == "5")
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])
        #expect(payload["aps"] as? [String: Int] == ["content-available": 1])
        #expect(payload["eventType"] as? String == "sync")
    }

    @Test func criticalUsesTheSoundDictionaryAndNormalIsPriority5() async throws {
        var message = Self.message()
        message.interruptionLevel = "critical"
        message.sound = "alarm.caf"
        message.priority = .normal
        let (outcome, records) = try await Self.sendOne(message)
        #expect(outcome.disposition == .accepted)
        let record = try #require(records.first)
        #expect(record.headers["apns-priority"] == "5")
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        let sound = try #require(aps["sound"] as? [String: Any])
        #expect(sound["critical"] as? Int == 1)
        #expect(sound["name"] as? String == "alarm.caf")
        #expect(sound["volume"] as? Double == 1.0)
        #expect(aps["interruption-level"] as? String == "critical")
        #expect(aps["relevance-score"] as? Double == 0.5)
    }

    @Test func sandboxDevicesUseTheSandboxURL() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let credentials = APNsCredentials(
                teamID: key.teamID,
                keyID: key.keyID,
                privateKeyPEM: Secret(key.privateKeyPEM),
                topic: key.topic
            )
            let provider = try APNsProvider(
                configuration: APNsConfiguration(
                    apps: ["app": credentials],
                    productionURL: simulator.baseURL + "/production",
                    sandboxURL: simulator.baseURL
                ),
                client: client,
                requestTimeout: .seconds(10)
            )
            let outcomes = await provider.send(
                [Self.message(environment: "sandbox"), Self.message(jobID: 2, environment: "production")],
                logger: Self.logger
            )
            #expect(outcomes[0].disposition == .accepted)
            // Nothing serves /production/3/device/…: the simulator answers 404 without an APNs reason.
            #expect(outcomes[1].disposition == .payloadRejected)
            #expect(outcomes[1].reason == .badRequest)
            #expect(simulator.context.recorder.records(provider: "apns").count == 1)
        }
    }

    struct ErrorCase: Sendable, CustomTestStringConvertible {
        var status: Int
        var reason: String
        var retryAfter: Int?
        var disposition: DeliveryOutcome.Disposition
        var herald: String
        var testDescription: String { "\(status) \(reason)" }
    }

    @Test(arguments: [
        ErrorCase(status: 400, reason: "BadDeviceToken", disposition: .tokenInvalid, herald: "bad_device_token"),
        ErrorCase(
            status: 400,
            reason: "DeviceTokenNotForTopic",
            disposition: .tokenInvalid,
            herald: "device_token_not_for_topic"
        ),
        ErrorCase(status: 400, reason: "BadCollapseId", disposition: .payloadRejected, herald: "bad_collapse_id"),
        ErrorCase(status: 400, reason: "TopicDisallowed", disposition: .credentialsBroken, herald: "topic_disallowed"),
        ErrorCase(status: 400, reason: "IdleTimeout", disposition: .retry, herald: "idle_timeout"),
        ErrorCase(
            status: 403,
            reason: "InvalidProviderToken",
            disposition: .credentialsBroken,
            herald: "invalid_provider_token"
        ),
        ErrorCase(status: 403, reason: "Forbidden", disposition: .credentialsBroken, herald: "forbidden"),
        ErrorCase(status: 410, reason: "ExpiredToken", disposition: .tokenInvalid, herald: "expired_token"),
        ErrorCase(status: 413, reason: "PayloadTooLarge", disposition: .payloadRejected, herald: "payload_too_large"),
        ErrorCase(status: 429, reason: "TooManyRequests", retryAfter: 2, disposition: .retry, herald: "rate_limited"),
        ErrorCase(status: 500, reason: "InternalServerError", disposition: .retry, herald: "internal_error"),
        ErrorCase(
            status: 503,
            reason: "ServiceUnavailable",
            retryAfter: 30,
            disposition: .retry,
            herald: "unavailable"
        ),
        ErrorCase(status: 503, reason: "Shutdown", disposition: .retry, herald: "shutdown"),
        ErrorCase(status: 400, reason: "SomethingNew", disposition: .payloadRejected, herald: "bad_request"),
    ])
    func errorClasses(_ test: ErrorCase) async throws {
        let (outcome, records) = try await Self.sendOne(
            rule: FaultRule(
                provider: "apns",
                token: Self.token,
                status: test.status,
                reason: test.reason,
                retryAfter: test.retryAfter
            )
        )
        #expect(outcome.disposition == test.disposition)
        #expect(outcome.reason.rawValue == test.herald)
        #expect(outcome.retryAfter == test.retryAfter.map { .seconds($0) })
        #expect(records.isEmpty)
        #expect(!outcome.description.contains(Self.token))
    }

    @Test func unregisteredDisablesOnlyWhenNewerThanTheRegistration() async throws {
        let rule = FaultRule(provider: "apns", status: 410, reason: "Unregistered")
        let now = Date().timeIntervalSince1970
        let (newer, _) = try await Self.sendOne(Self.message(registeredAt: now - 3600), rule: rule)
        #expect(newer == DeliveryOutcome(.tokenInvalid, reason: .unregistered, latency: newer.latency))
        // The device registered after APNs saw the token die: a stale 410, the device stays.
        let (older, _) = try await Self.sendOne(Self.message(registeredAt: now + 3600), rule: rule)
        #expect(older.disposition == .payloadRejected)
        #expect(older.reason == .unregisteredStale)
    }

    @Test func expiredProviderTokenIsReMintedOnceThenAccepted() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let provider = try Self.provider(simulator, client, key: key)
            #expect(await provider.send([Self.message(jobID: 1)], logger: Self.logger)[0].disposition == .accepted)
            try simulator.faults.add(
                FaultRule(provider: "apns", status: 403, reason: "ExpiredProviderToken", remaining: 1)
            )
            #expect(await provider.send([Self.message(jobID: 2)], logger: Self.logger)[0].disposition == .accepted)
            #expect(await provider.send([Self.message(jobID: 3)], logger: Self.logger)[0].disposition == .accepted)
            let hashes = simulator.context.recorder.records(provider: "apns").map { $0.headers["x-simulator-jwt-hash"] }
            #expect(hashes.count == 3)
            #expect(hashes[0] != hashes[1])  // re-minted after the 403
            #expect(hashes[1] == hashes[2])  // and the new token is cached
            #expect(simulator.context.recorder.rejectedCount(provider: "apns") == 1)
        }
    }

    @Test func stillExpiredAfterReMintIsCredentialsBroken() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            // Our clock is two hours behind: every minted token is already stale for APNs.
            let provider = try Self.provider(simulator, client, key: key, now: { Date().addingTimeInterval(-7200) })
            let outcome = await provider.send([Self.message()], logger: Self.logger)[0]
            #expect(outcome.disposition == .credentialsBroken)
            #expect(outcome.reason == .expiredProviderToken)
            #expect(simulator.context.recorder.rejectedCount(provider: "apns") == 2)  // tried twice
        }
    }

    @Test func tooManyProviderTokenUpdatesDoesNotReMint() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let provider = try Self.provider(simulator, client, key: key)
            #expect(await provider.send([Self.message(jobID: 1)], logger: Self.logger)[0].disposition == .accepted)
            try simulator.faults.add(
                FaultRule(provider: "apns", status: 429, reason: "TooManyProviderTokenUpdates", remaining: 1)
            )
            let limited = await provider.send([Self.message(jobID: 2)], logger: Self.logger)[0]
            #expect(limited.disposition == .retry)
            #expect(limited.reason == .tooManyProviderTokenUpdates)
            #expect(await provider.send([Self.message(jobID: 3)], logger: Self.logger)[0].disposition == .accepted)
            let hashes = simulator.context.recorder.records(provider: "apns").map { $0.headers["x-simulator-jwt-hash"] }
            #expect(hashes.count == 2)
            #expect(hashes[0] == hashes[1])
        }
    }

    @Test func providerTokenIsReMintedAfterItsLifetime() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let clock = WallTestClock(Date().addingTimeInterval(-50 * 60))
            let provider = try Self.provider(simulator, client, key: key, now: { clock.now })
            let start = Int(clock.now.timeIntervalSince1970)
            #expect(await provider.send([Self.message(jobID: 1)], logger: Self.logger)[0].disposition == .accepted)
            clock.advance(by: 39 * 60)  // still inside the 40-minute lifetime
            #expect(await provider.send([Self.message(jobID: 2)], logger: Self.logger)[0].disposition == .accepted)
            clock.advance(by: 2 * 60)  // 41 minutes: re-minted
            #expect(await provider.send([Self.message(jobID: 3)], logger: Self.logger)[0].disposition == .accepted)
            let iats = simulator.context.recorder.records(provider: "apns").map { $0.headers["x-simulator-jwt-iat"] }
            #expect(iats == ["\(start)", "\(start)", "\(start + 41 * 60)"])
        }
    }

    @Test func oversizeBodyGoesOutAsThePreviewThatFits() async throws {
        var long = Self.message()
        long.body = String(repeating: "x", count: 5000)
        var hopeless = Self.message(jobID: 2)  // over the limit even with an empty body
        hopeless.title = String(repeating: "t", count: 5000)
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let outcomes = try await Self.provider(simulator, client, key: key).send(
                [long, hopeless],
                logger: Self.logger
            )
            #expect(outcomes[0].disposition == .accepted)
            #expect(outcomes[1] == DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge))
            let record = try #require(simulator.context.recorder.records(provider: "apns").first)
            #expect(record.payload.utf8.count <= 4096)
            let aps = try #require(
                (try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])?["aps"]
                    as? [String: Any]
            )
            let body = try #require((aps["alert"] as? [String: Any])?["body"] as? String)
            #expect(body.hasSuffix("…") && body.count > 3000)
            #expect(simulator.context.recorder.records(provider: "apns").count == 1)  // the hopeless one never left
        }
    }

    @Test func slowAnswerIsATimeout() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            try simulator.faults.add(FaultRule(provider: "apns", latencyMs: 6000))
            let provider = try Self.provider(simulator, client, key: key, timeout: .milliseconds(300))
            let outcome = await provider.send([Self.message()], logger: Self.logger)[0]
            #expect(outcome.disposition == .retry)
            #expect(outcome.reason == .timeout)
        }
    }

    /// A batch that times out without a single frame heard since it went out is on a connection
    /// that no longer answers (a half-open TCP connection looks the same): the client retires it,
    /// and the next batch goes out on a new connection instead of waiting on the dead one.
    @Test func aConnectionSilentForAWholeBatchIsReplaced() async throws {
        try await SimulatorHarness.withClients { simulator, _ in
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            var http = ProviderHTTPConfiguration(extraCAFiles: [simulator.caCertificatePath])
            http.maxConnectionsPerHost = 1
            let client = try HTTP2Client(configuration: http)
            // The same client and connection; only the silent batch has a short deadline (the
            // others have time to connect on a loaded machine).
            let provider = try Self.provider(simulator, client, key: key)
            let impatient = try Self.provider(simulator, client, key: key, timeout: .milliseconds(400))
            let tokens = (0..<3).map { String(format: "%064x", $0 + 1) }
            let messages = tokens.enumerated().map { Self.message(token: $1, jobID: Int64($0 + 1)) }
            #expect(await provider.send([messages[0]], logger: Self.logger)[0].disposition == .accepted)
            let before = simulator.connectionsAccepted
            try simulator.faults.add(FaultRule(provider: "apns", token: tokens[1], remaining: 1, latencyMs: 3_000))
            let late = await impatient.send([messages[1]], logger: Self.logger)
            #expect(late[0].reason == .timeout)
            #expect(await provider.send([messages[2]], logger: Self.logger)[0].disposition == .accepted)
            #expect(simulator.connectionsAccepted == before + 1)
            await client.shutdown()
        }
    }

    @Test func droppedConnectionMidBatchRetriesOnlyTheAffected() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let provider = try Self.provider(simulator, client, key: key)
            let tokens = (0..<20).map { String(format: "%064x", $0 + 1) }
            let messages = tokens.enumerated().map { Self.message(token: $1, jobID: Int64($0 + 1)) }
            // Warm the connection so the batch shares one HTTP/2 connection.
            #expect(await provider.send([messages[0]], logger: Self.logger)[0].disposition == .accepted)
            // The drop comes 2 s in: time for the other 19 answers even on a loaded machine (at
            // 400 ms, fewer than 15 came back in time while every suite ran at once).
            try simulator.faults.add(
                FaultRule(provider: "apns", token: tokens[7], remaining: 1, latencyMs: 2_000, dropConnection: true)
            )
            let outcomes = await provider.send(messages, logger: Self.logger)
            #expect(outcomes[7].disposition == .retry)
            #expect([.connectionClosed, .connectionError].contains(outcomes[7].reason))
            let accepted = Set(zip(tokens, outcomes).filter { $0.1.disposition == .accepted }.map(\.0))
            #expect(accepted.count >= 15)
            #expect(outcomes.allSatisfy { $0.disposition == .accepted || $0.disposition == .retry })
            // Everything reported accepted really reached the provider.
            #expect(accepted.isSubset(of: Set(simulator.context.recorder.records(provider: "apns").map(\.token))))
            // A new connection serves the retries (after a backoff, as the dispatcher would).
            try await Task.sleep(for: .milliseconds(300))
            let retried = await provider.send(
                messages.filter { !accepted.contains($0.device.token) },
                logger: Self.logger
            )
            #expect(retried.allSatisfy { $0.disposition == .accepted }, "\(retried) after \(outcomes)")
        }
    }

    /// A batch leaves in chunks written together; the circuit breaker lets only 20 requests be in
    /// flight until the provider has answered some, so a chunk must go with the permits it holds
    /// instead of waiting for more (which would wait for itself).
    @Test func aBatchLargerThanTheCircuitsFirstAllowanceGoesOutWhole() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let provider = ResilientProvider(try Self.provider(simulator, clients.http2, key: key))
            let messages = (0..<200).map { Self.message(token: String(format: "%064x", $0 + 1), jobID: Int64($0 + 1)) }
            let outcomes = await provider.send(messages, logger: Self.logger)
            #expect(outcomes.allSatisfy { $0.disposition == .accepted }, "\(Set(outcomes.map(\.reason.rawValue)))")
            #expect(
                Set(simulator.context.recorder.records(provider: "apns").map(\.token))
                    == Set(messages.map(\.device.token))
            )
        }
    }

    /// GOAWAY names the last stream the server processed: the streams after it were never seen,
    /// so they go once more, at once, on a new connection, and nothing reaches the device twice.
    @Test func streamsRefusedByGoawayAreResentOnceOnANewConnection() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let key = SimulatorCredentials.makeAPNsKey(trustIn: simulator.context.keyring)
            let provider = try Self.provider(simulator, clients.http2, key: key)
            let tokens = (0..<12).map { String(format: "%064x", $0 + 1) }
            let messages = tokens.enumerated().map { Self.message(token: $1, jobID: Int64($0 + 1)) }
            #expect(await provider.send([messages[0]], logger: Self.logger)[0].disposition == .accepted)
            try simulator.faults.add(FaultRule(provider: "apns", token: tokens[5], remaining: 1, goaway: true))
            let outcomes = await provider.send(Array(messages[1...]), logger: Self.logger)
            // Refused by GOAWAY, resent on a fresh connection and accepted there.
            #expect(outcomes[4].disposition == .accepted, "\(outcomes[4])")
            #expect(
                outcomes.allSatisfy { $0.disposition == .accepted || $0.reason == .connectionClosed },
                "\(outcomes)"
            )
            let recorded = simulator.context.recorder.records(provider: "apns").map(\.token)
            #expect(recorded.count == Set(recorded).count, "a message reached the provider twice")
            for (token, outcome) in zip(tokens.dropFirst(), outcomes) where outcome.disposition == .accepted {
                #expect(recorded.contains(token))
            }
        }
    }

    /// The apns-id is the first 16 bytes of SHA-256("herald:<job>:<device>") as a version-5-style
    /// UUID, so a retried delivery carries the same id.
    @Test func apnsIDIsTheNameBasedUUIDOfJobAndDevice() {
        let message = Self.message(jobID: 4242)
        var bytes = Array(SHA256.hash(data: Data("herald:4242:\(message.device.id)".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Hex.encode(bytes)
        let expected = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { r in
            String(hex.dropFirst(r.lowerBound).prefix(r.count))
        }.joined(separator: "-")
        #expect(APNsRequest.apnsID(for: message) == expected)
        #expect(APNsRequest.pathSegment("00fcAB") == "00fcAB")
        #expect(APNsRequest.pathSegment("a/b c") == "a%2Fb%20c")
    }

    @Test func invalidTokenFormatIsBadDeviceToken() async throws {
        let (outcome, _) = try await Self.sendOne(Self.message(token: "not-hex"))
        #expect(outcome.disposition == .tokenInvalid)
        #expect(outcome.reason == .badDeviceToken)
    }

    @Test func unknownKeyIsInvalidProviderToken() async throws {
        try await SimulatorHarness.withClients { simulator, clients in
            let client = clients.http2
            // A key the simulator does not trust.
            let key = SimulatorCredentials.makeAPNsKey(trustIn: SimulatorKeyring())
            let outcome = try await Self.provider(simulator, client, key: key).send(
                [Self.message()],
                logger: Self.logger
            )[0]
            #expect(outcome.disposition == .credentialsBroken)
            #expect(outcome.reason == .invalidProviderToken)
        }
    }

    @Test func unknownAppIsNotConfigured() async throws {
        let (outcome, records) = try await Self.sendOne(Self.message(appID: "other"))
        #expect(outcome == DeliveryOutcome(.credentialsBroken, reason: .appNotConfigured))
        #expect(records.isEmpty)
    }

    @Test func badKeyNamesAppAndKeyButNoBytes() throws {
        let client = try HTTP2Client(configuration: ProviderHTTPConfiguration())
        let garbage = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----"
        let credentials = APNsCredentials(
            teamID: "TEAM123456",
            keyID: "KEY1234567",
            privateKeyPEM: Secret(garbage),
            topic: "com.example.app"
        )
        do {
            _ = try APNsProvider(
                configuration: APNsConfiguration(apps: ["shop": credentials]),
                client: client,
                requestTimeout: .seconds(1)
            )
            Issue.record("a bad key must be refused")
        } catch {
            let text = "\(error)"
            #expect(text.contains("shop"))
            #expect(text.contains("KEY1234567"))
            #expect(!text.contains("c2VjcmV0LWJ5dGVz"))
            #expect(!text.contains("BEGIN"))
        }
    }

    @Test func classificationTable() {
        func check(
            _ status: Int,
            _ reason: String?,
            _ timestamp: Double?,
            _ registeredAt: Double,
            _ disposition: DeliveryOutcome.Disposition,
            _ herald: String
        ) {
            let (d, r) = APNsResponse.classify(
                status: status,
                reason: reason,
                timestamp: timestamp,
                registeredAt: registeredAt
            )
            #expect(d == disposition)
            #expect(r.rawValue == herald)
        }
        check(410, "Unregistered", 2_000_000, 1_000, .tokenInvalid, "unregistered")
        check(410, "Unregistered", 1_000_000, 1_000, .payloadRejected, "unregistered_stale")
        check(410, "Unregistered", nil, 1_000, .tokenInvalid, "unregistered")
        check(502, nil, nil, 0, .retry, "unavailable")
        check(403, "Whatever", nil, 0, .credentialsBroken, "forbidden")
        #expect(APNsRequest.truncatedCollapseID(String(repeating: "a", count: 70)).utf8.count == 64)
        #expect(APNsRequest.truncatedCollapseID("short") == "short")
        #expect(APNsRequest.truncatedCollapseID("a\r\nb\u{7F}c\td") == "abcd")
    }
}
