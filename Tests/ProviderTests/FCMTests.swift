import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import ProviderSimulator
import Synchronization
import Testing

@testable import Providers

/// A settable wall clock shared by the adapter and the simulator.
final class ProviderTestClock: Sendable {
    private let value: Mutex<Date>
    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { value = Mutex(start) }
    var now: Date { value.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var closure: @Sendable () -> Date { { [self] in self.now } }
}

/// Like `SimulatorHarness.with`, but with a simulator context of our own (its clock).
/// The simulator harness with a context whose clock the test controls.
func withClockedSimulator<T>(
    services: [any SimulatedService],
    context: SimulatorContext,
    _ body: (ProviderSimulator, SimulatorClients) async throws -> T
) async throws -> T {
    try await SimulatorHarness.withClients(services: services, context: context, body)
}

@Suite struct FCMTests {
    static let logger: Logger = {
        var l = Logger(label: "fcm-test")
        l.logLevel = .critical
        return l
    }()

    /// A running simulator trusting one service account, and an FCM provider pointed at it.
    struct Fixture {
        var simulator: ProviderSimulator
        var provider: FCMProvider
        var clock: ProviderTestClock
        var account: FCMServiceAccount
        var recorder: SimulatorRecorder { simulator.context.recorder }
        var tokenRequests: Int { recorder.acceptedCount(provider: "oauth") }
        var records: [SimulatorRecord] { recorder.records(provider: "fcm") }
    }

    static func withFCM<T>(
        tokenLifetime: Int = 3600,
        _ body: (Fixture) async throws -> T
    ) async throws -> T {
        let clock = ProviderTestClock()
        let context = SimulatorContext(now: clock.closure)
        let material = try SimulatorCredentials.makeServiceAccount(projectID: "herald-test", trustIn: context.keyring)
        return try await withClockedSimulator(
            services: [OAuthService(tokenLifetime: tokenLifetime), FCMService()],
            context: context
        ) { simulator, clients in
            let json = try JSONSerialization.data(withJSONObject: material.json(tokenURI: simulator.baseURL + "/token"))
            let account = try FCMServiceAccount.parse(json: Secret(String(decoding: json, as: UTF8.self)))
            let provider = try FCMProvider(
                configuration: FCMConfiguration(baseURL: simulator.baseURL, apps: ["default": account]),
                // 30 s: these tests classify answers; a CI machine running every suite at once
                // once took longer than 10 s to fetch the OAuth token (`token_timeout`).
                client: clients.http,
                http2: clients.http2,
                requestTimeout: .seconds(30),
                now: clock.closure
            )
            return try await body(Fixture(simulator: simulator, provider: provider, clock: clock, account: account))
        }
    }

    static func message(
        _ token: String = "fcm-token-1",
        clock: ProviderTestClock,
        app: String = "default",
        silent: Bool = false,
        priority: Priority = .high,
        body: String = "Your order is on its way",
        id: Int64 = 1
    ) -> PushMessage {
        PushMessage(
            jobID: 100 + id,
            device: Device(id: id, userID: "u1", provider: .fcm, token: token, appID: app),
            title: "Order update",
            body: body,
            subtitle: "Order 42",
            route: "/orders/42",
            data: ["eventType": "order.shipped", "route": "/orders/42"],
            priority: priority,
            collapseID: "order-42",
            collapsible: true,
            silent: silent,
            sound: "chime.caf",
            threadID: "orders",
            imageURL: "https://img.example/42.png",
            actionCategory: "ORDER",
            interruptionLevel: "time-sensitive",
            androidChannel: "orders",
            badge: 3,
            expiresAt: clock.now + 3600
        )
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    // MARK: - Success

    @Test func sendsEveryFieldAndRecordsIt() async throws {
        try await Self.withFCM { f in
            let outcomes = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(outcomes.map(\.disposition) == [.accepted])
            #expect(outcomes[0].reason == .ok)
            #expect(outcomes[0].latency != nil)
            let record = try #require(f.records.first)
            #expect(record.token == "fcm-token-1")
            #expect(record.headers["authorization"] == nil)
            let m = try Self.json(record.payload)
            #expect(m["token"] as? String == "fcm-token-1")
            let notification = try #require(m["notification"] as? [String: String])
            #expect(
                notification == [
                    "title": "Order update", "body": "Your order is on its way", "image": "https://img.example/42.png",
                ]
            )
            #expect(m["data"] as? [String: String] == ["eventType": "order.shipped", "route": "/orders/42"])
            let android = try #require(m["android"] as? [String: Any])
            #expect(android["priority"] as? String == "HIGH")
            #expect(android["ttl"] as? String == "3600s")
            #expect(android["collapse_key"] as? String == "order-42")
            #expect(
                android["notification"] as? [String: String] == [
                    "channel_id": "orders", "sound": "chime.caf", "tag": "order-42",
                ]
            )
            let apns = try #require(m["apns"] as? [String: Any])
            let expiration = String(Int(f.clock.now.timeIntervalSince1970) + 3600)
            #expect(
                apns["headers"] as? [String: String] == [
                    "apns-priority": "10", "apns-collapse-id": "order-42", "apns-expiration": expiration,
                    "apns-push-type": "alert",
                ]
            )
            let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
            #expect(
                aps["alert"] as? [String: String] == [
                    "title": "Order update", "body": "Your order is on its way", "subtitle": "Order 42",
                ]
            )
            #expect(aps["sound"] as? String == "chime.caf")
            #expect(aps["badge"] as? Int == 3)
            #expect(aps["thread-id"] as? String == "orders")
            #expect(aps["category"] as? String == "ORDER")
            #expect(aps["interruption-level"] as? String == "time-sensitive")
            #expect(aps["mutable-content"] as? Int == 1)
            let webpush = try #require(m["webpush"] as? [String: Any])
            #expect(webpush["headers"] as? [String: String] == ["TTL": "3600", "Urgency": "high"])
            #expect(f.tokenRequests == 1)
        }
    }

    @Test func silentMessageIsDataOnlyWithBackgroundPriority() async throws {
        try await Self.withFCM { f in
            let outcomes = await f.provider.send(
                [Self.message(clock: f.clock, silent: true, priority: .normal)],
                logger: Self.logger
            )
            #expect(outcomes.map(\.disposition) == [.accepted])
            let m = try Self.json(try #require(f.records.first).payload)
            #expect(m["notification"] == nil)
            let android = try #require(m["android"] as? [String: Any])
            #expect(android["priority"] as? String == "NORMAL")
            #expect(android["notification"] == nil)
            let apns = try #require(m["apns"] as? [String: Any])
            #expect((apns["headers"] as? [String: String])?["apns-priority"] == "5")
            #expect((apns["headers"] as? [String: String])?["apns-push-type"] == "background")
            let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
            #expect(aps["content-available"] as? Int == 1)
            #expect(aps["alert"] == nil)
        }
    }

    @Test func manyMessagesShareOneTokenAndKeepOrder() async throws {
        try await Self.withFCM { f in
            try f.simulator.faults.add(FaultRule(provider: "fcm", token: "dead-7", status: 404, reason: "UNREGISTERED"))
            let messages = (0..<40).map { i in
                Self.message(i == 7 ? "dead-7" : "tok-\(i)", clock: f.clock, id: Int64(i))
            }
            let outcomes = await f.provider.send(messages, logger: Self.logger)
            #expect(outcomes.count == 40)
            for (i, outcome) in outcomes.enumerated() {
                #expect(outcome.disposition == (i == 7 ? .tokenInvalid : .accepted), "message \(i)")
            }
            #expect(f.records.count == 39)
            #expect(f.tokenRequests == 1)
            // A second batch reuses the cached token.
            _ = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(f.tokenRequests == 1)
        }
    }

    // MARK: - OAuth

    @Test func accessTokenIsRefreshedBeforeItExpires() async throws {
        try await Self.withFCM { f in
            _ = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(f.tokenRequests == 1)
            f.clock.advance(3000)  // still more than 5 minutes left
            _ = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(f.tokenRequests == 1)
            f.clock.advance(400)  // within 5 minutes of expiry: refreshed proactively
            let outcomes = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(outcomes.map(\.disposition) == [.accepted])
            #expect(f.tokenRequests == 2)
            f.clock.advance(7200)  // long expired
            let later = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(later.map(\.disposition) == [.accepted])
            #expect(f.tokenRequests == 3)
        }
    }

    @Test func unauthenticatedMintsOneNewTokenAndRetriesOnce() async throws {
        try await Self.withFCM { f in
            try f.simulator.faults.add(FaultRule(provider: "fcm", status: 401, reason: "UNAUTHENTICATED", remaining: 1))
            let outcomes = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(outcomes.map(\.disposition) == [.accepted])
            #expect(f.tokenRequests == 2)
            #expect(f.records.count == 1)
        }
    }

    @Test func persistentUnauthenticatedIsBrokenCredentialsAfterOneRemint() async throws {
        try await Self.withFCM { f in
            try f.simulator.faults.add(FaultRule(provider: "fcm", status: 401))
            let outcomes = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(outcomes[0].disposition == .credentialsBroken)
            #expect(outcomes[0].reason == .unauthenticated)
            #expect(f.tokenRequests == 2)
        }
    }

    @Test func untrustedServiceAccountIsInvalidGrant() async throws {
        let clock = ProviderTestClock()
        let context = SimulatorContext(now: clock.closure)
        // Trusted by a different keyring: the simulator's token endpoint does not know it.
        let stranger = try SimulatorCredentials.makeServiceAccount(
            projectID: "herald-test",
            trustIn: SimulatorKeyring()
        )
        try await withClockedSimulator(services: [OAuthService(), FCMService()], context: context) {
            simulator,
            clients in
            let account = FCMServiceAccount(
                projectID: stranger.projectID,
                clientEmail: stranger.clientEmail,
                privateKeyPEM: Secret(stranger.privateKeyPEM),
                tokenURI: simulator.baseURL + "/token"
            )
            let provider = try FCMProvider(
                configuration: FCMConfiguration(baseURL: simulator.baseURL, apps: ["default": account]),
                client: clients.http,
                http2: clients.http2,
                requestTimeout: .seconds(10),
                now: clock.closure
            )
            let outcomes = await provider.send([Self.message(clock: clock)], logger: Self.logger)
            #expect(
                outcomes[0]
                    == DeliveryOutcome(.credentialsBroken, reason: .invalidGrant, latency: outcomes[0].latency)
            )
            #expect(context.recorder.records(provider: "fcm").isEmpty)
        }
    }

    @Test func tokenEndpointOutageIsRetryable() async throws {
        try await Self.withFCM { f in
            try f.simulator.faults.add(FaultRule(provider: "oauth", status: 503, retryAfter: 5, remaining: 1))
            let first = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(first[0].disposition == .retry)
            #expect(first[0].reason == .tokenUnavailable)
            #expect(first[0].retryAfter == .seconds(5))
            // Failures are not cached: the next send gets a token.
            let second = await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger)
            #expect(second.map(\.disposition) == [.accepted])
        }
    }

    // MARK: - Errors

    struct ErrorCase: Sendable, CustomTestStringConvertible {
        var status: Int
        var reason: String?
        var retryAfter: Int?
        var disposition: DeliveryOutcome.Disposition
        var outcomeReason: String
        var outcomeRetryAfter: Duration?
        var testDescription: String { "\(status) \(reason ?? "-") → \(disposition.rawValue)(\(outcomeReason))" }
    }

    static let errorCases: [ErrorCase] = [
        .init(status: 404, reason: "UNREGISTERED", disposition: .tokenInvalid, outcomeReason: "unregistered"),
        .init(
            status: 400,
            reason: "INVALID_REGISTRATION",
            disposition: .tokenInvalid,
            outcomeReason: "invalid_registration"
        ),
        .init(
            status: 400,
            reason: "INVALID_ARGUMENT",
            disposition: .payloadRejected,
            outcomeReason: "invalid_argument"
        ),
        .init(
            status: 403,
            reason: "SENDER_ID_MISMATCH",
            disposition: .tokenInvalid,
            outcomeReason: "sender_id_mismatch"
        ),
        .init(
            status: 401,
            reason: "THIRD_PARTY_AUTH_ERROR",
            disposition: .credentialsBroken,
            outcomeReason: "third_party_auth_error"
        ),
        .init(
            status: 403,
            reason: "PERMISSION_DENIED",
            disposition: .credentialsBroken,
            outcomeReason: "permission_denied"
        ),
        .init(
            status: 429,
            reason: "QUOTA_EXCEEDED",
            disposition: .retry,
            outcomeReason: "quota_exceeded",
            outcomeRetryAfter: .seconds(60)
        ),
        .init(
            status: 429,
            reason: "QUOTA_EXCEEDED",
            retryAfter: 10,
            disposition: .retry,
            outcomeReason: "quota_exceeded",
            outcomeRetryAfter: .seconds(60)
        ),
        .init(
            status: 429,
            retryAfter: 90,
            disposition: .retry,
            outcomeReason: "quota_exceeded",
            outcomeRetryAfter: .seconds(90)
        ),
        .init(
            status: 503,
            reason: "UNAVAILABLE",
            retryAfter: 7,
            disposition: .retry,
            outcomeReason: "unavailable",
            outcomeRetryAfter: .seconds(7)
        ),
        .init(status: 503, disposition: .retry, outcomeReason: "unavailable"),
        .init(status: 500, reason: "INTERNAL", disposition: .retry, outcomeReason: "internal"),
        .init(status: 502, reason: "UNSPECIFIED_ERROR", disposition: .retry, outcomeReason: "unspecified_error"),
    ]

    @Test(arguments: errorCases)
    func errorsAreClassified(_ c: ErrorCase) async throws {
        try await Self.withFCM { f in
            try f.simulator.faults.add(
                FaultRule(provider: "fcm", status: c.status, reason: c.reason, retryAfter: c.retryAfter)
            )
            let outcome = try #require(await f.provider.send([Self.message(clock: f.clock)], logger: Self.logger).first)
            #expect(outcome.disposition == c.disposition)
            #expect(outcome.reason.rawValue == c.outcomeReason)
            #expect(outcome.retryAfter == c.outcomeRetryAfter)
            #expect(!"\(outcome)".contains("fcm-token-1"))
            #expect(!"\(outcome)".contains("ya29"))
        }
    }

    @Test func oversizedBodyGoesOutAsThePreviewThatFitsTheWholeMessage() async throws {
        try await Self.withFCM { f in
            let big = Self.message(clock: f.clock, body: String(repeating: "x", count: 4097))
            var hopeless = Self.message(clock: f.clock, id: 2)
            hopeless.title = String(repeating: "t", count: 4097)
            let outcomes = await f.provider.send([big, hopeless], logger: Self.logger)
            #expect(outcomes[0].disposition == .accepted)
            #expect(outcomes[1] == DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge))
            let record = try #require(f.recorder.records(provider: "fcm").first)
            // The whole message as sent — notification, data and every platform override — fits.
            let message = try #require(
                (try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])?["message"]
                    as? [String: Any]
                    ?? (try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])
            )
            #expect(FCMMessageEncoder.payloadSize(message: message) <= FCMMessageEncoder.maxPayloadBytes)
            #expect(f.recorder.records(provider: "fcm").count == 1)
            #expect(f.recorder.rejectedCount(provider: "fcm") == 0)
        }
    }

    @Test func unknownAppIsNotConfigured() async throws {
        try await Self.withFCM { f in
            let outcomes = await f.provider.send([Self.message(clock: f.clock, app: "other")], logger: Self.logger)
            #expect(outcomes == [DeliveryOutcome(.credentialsBroken, reason: .appNotConfigured)])
        }
    }

    // MARK: - Units without sockets

    @Test func serviceAccountParseNamesTheMissingFieldNeverTheKey() throws {
        let pem = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"
        let json =
            #"{"type":"service_account","project_id":"p","private_key":"\#(pem.replacingOccurrences(of: "\n", with: "\\n"))"}"#
        do {
            _ = try FCMServiceAccount.parse(json: Secret(json))
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("client_email"))
            #expect(!"\(error)".contains("c2VjcmV0"))
        }
        #expect(throws: ProviderConfigurationError.self) { try FCMServiceAccount.parse(json: Secret("not json")) }
        let full = #"{"project_id":"p","client_email":"a@p.iam.gserviceaccount.com","private_key":"k"}"#
        let account = try FCMServiceAccount.parse(json: Secret(full))
        #expect(account.tokenURI == "https://oauth2.googleapis.com/token")
        #expect(!"\(account)".contains("k\""))
    }

    @Test func badPrivateKeyFailsAtInitNamingTheApp() throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { try? client.syncShutdown() }
        let http2 = try HTTP2Client(configuration: ProviderHTTPConfiguration())
        let account = FCMServiceAccount(projectID: "p", clientEmail: "a@p", privateKeyPEM: Secret("garbage-key-bytes"))
        do {
            _ = try FCMProvider(
                configuration: FCMConfiguration(apps: ["shop": account]),
                client: client,
                http2: http2,
                requestTimeout: .seconds(1)
            )
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("shop"))
            #expect(!"\(error)".contains("garbage"))
        }
    }

    @Test func simulatorValidatesMessageShape() {
        let cases: [([String: Any], String)] = [
            (["token": "a", "topic": "b"], "message"),
            (["token": "a", "data": ["n": 1]], "message.data[0].value"),
            (["token": "a", "data": ["google.x": "1"]], "message.data"),
            (["token": "a", "android": ["priority": "urgent"]], "message.android.priority"),
            (["token": "a", "android": ["ttl": "10"]], "message.android.ttl"),
            (["token": "a", "android": ["ttl": "2419201s"]], "message.android.ttl"),
            (["token": "a", "notification": ["body": String(repeating: "x", count: 4100)]], "message"),
        ]
        for (message, field) in cases {
            #expect(FCMService.validate(message)?.field == field, "\(field)")
        }
        #expect(
            FCMService.validate(["token": "a", "android": ["priority": "high", "ttl": "3.5s"], "data": ["k": "v"]])
                == nil
        )
    }

    @Test func simulatorRefusesTokensOfAnotherProjectOrExpired() async throws {
        let clock = ProviderTestClock()
        let context = SimulatorContext(now: clock.closure)
        context.keyring.issueAccessToken("good", projectID: "p1", expires: clock.now.addingTimeInterval(60))
        let service = FCMService()
        func post(_ project: String, bearer: String) async -> Int {
            let request = SimulatorRequest(
                method: "POST",
                path: "/v1/projects/\(project)/messages:send",
                headers: [("authorization", "Bearer \(bearer)")],
                body: Array(#"{"message":{"token":"t"}}"#.utf8),
                httpVersion: "h2"
            )
            return await service.handle(request, fault: nil, context: context).status
        }
        #expect(await post("p1", bearer: "good") == 200)
        #expect(await post("p2", bearer: "good") == 403)
        #expect(await post("p1", bearer: "unknown") == 401)
        clock.advance(61)
        #expect(await post("p1", bearer: "good") == 401)
    }
}
