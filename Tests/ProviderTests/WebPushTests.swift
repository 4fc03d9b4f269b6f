import AsyncHTTPClient
import Crypto
import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import NIOCore
import NIOHTTP1
import ProviderSimulator
import Synchronization
import Testing

@testable import Providers

/// A clock tests move by hand.
private final class WebPushClock: Sendable {
    private let value: Mutex<Date>
    init(_ start: Date = Date()) { value = Mutex(start) }
    var now: Date { value.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var closure: @Sendable () -> Date { { self.now } }
}

private struct Subscription {
    var endpoint: String
    var p256dh: String
    var auth: String
    var id: String { WebPushService.subscriptionID(endpoint: endpoint) ?? "" }
}

private func makeVAPID(subject: String = "mailto:ops@herald.example") -> VAPIDCredentials {
    let key = P256.Signing.PrivateKey()
    return VAPIDCredentials(
        subject: subject,
        publicKey: Base64URL.encode(key.publicKey.x963Representation),
        privateKey: Secret(Base64URL.encode(key.rawRepresentation))
    )
}

private func subscribe(_ simulator: ProviderSimulator, restrictedTo key: String? = nil) -> Subscription {
    let s = WebPushService.createSubscription(context: simulator.context, applicationServerKey: key)
    return Subscription(endpoint: s.endpoint, p256dh: s.p256dh, auth: s.auth)
}

private func message(
    to subscription: Subscription,
    app: String = "default",
    jobID: Int64 = 1,
    title: String = "Order shipped",
    body: String = "Your parcel is on its way",
    priority: Priority = .high,
    collapseID: String = "order-7",
    expiresIn: TimeInterval = 3600
) -> PushMessage {
    PushMessage(
        jobID: jobID,
        device: Device(
            id: jobID,
            userID: "u1",
            provider: .webpush,
            token: subscription.endpoint,
            appID: app,
            p256dh: subscription.p256dh,
            auth: subscription.auth
        ),
        title: title,
        body: body,
        route: "/orders/7",
        data: ["eventType": "order.shipped"],
        priority: priority,
        collapseID: collapseID,
        badge: 2,
        expiresAt: Date() + expiresIn
    )
}

private let logger = Logger(label: "webpush-test")

extension Result {
    fileprivate var failureValue: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}

/// Asserts no outcome text carries an endpoint, a subscription key or VAPID key material.
private func expectRedacted(
    _ outcomes: [DeliveryOutcome],
    subscriptions: [Subscription],
    vapid: VAPIDCredentials,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    for outcome in outcomes {
        let text = "\(outcome) \(String(reflecting: outcome))"
        for s in subscriptions {
            for secret in [s.endpoint, s.id, s.p256dh, s.auth] where !secret.isEmpty {
                #expect(!text.contains(secret), sourceLocation: sourceLocation)
            }
        }
        #expect(!text.contains(vapid.publicKey), sourceLocation: sourceLocation)
        #expect(!text.contains(vapid.privateKey.reveal()), sourceLocation: sourceLocation)
    }
}

// MARK: - Pure rules

@Suite struct WebPushRulesTests {
    /// The subscription cache: a hit only while endpoint and keys are the ones parsed, invalid
    /// subscriptions never kept, and never more than its capacity.
    @Test func subscriptionCacheKeepsValidSubscriptionsWithinItsCapacity() throws {
        let cache = WebPushSubscriptionCache(capacity: 3)
        let key = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        func device(_ id: Int64, host: String = "push.example", p256dh: String? = nil, auth: String? = nil) -> Device {
            Device(
                id: id,
                userID: "u",
                provider: .webpush,
                token: "https://\(host)/wpush/\(id)?q=1",
                p256dh: p256dh ?? Base64URL.encode(key),
                auth: auth ?? Base64URL.encode(Data(count: 16))
            )
        }
        let parsed = try cache.subscription(of: device(1)).get()
        #expect(parsed.target.origin == "https://push.example")
        #expect(parsed.path == "/wpush/1?q=1")
        #expect(parsed.p256dh == key && parsed.auth == Data(count: 16))
        // A changed endpoint is parsed again, not taken from the entry.
        #expect(
            try cache.subscription(of: device(1, host: "other.example")).get().target.origin == "https://other.example"
        )
        #expect(cache.subscription(of: device(1, auth: Base64URL.encode(Data(count: 8)))).failureValue == .keys)
        #expect(cache.subscription(of: device(2, host: "")).failureValue == .endpoint)
        #expect(cache.count == 1)
        for id in 3...4 { _ = cache.subscription(of: device(Int64(id))) }
        #expect(cache.count == 3)
        _ = cache.subscription(of: device(5))
        #expect(cache.count == 1)
    }

    @Test(arguments: [
        (201, DeliveryOutcome.Disposition.accepted, "ok"),
        (202, .accepted, "ok"),
        (404, .tokenInvalid, "subscription_not_found"),
        (410, .tokenInvalid, "subscription_gone"),
        (400, .payloadRejected, "bad_request"),
        (413, .payloadRejected, "payload_too_large"),
        (401, .credentialsBroken, "vapid_unauthorized"),
        (403, .credentialsBroken, "vapid_forbidden"),
        (429, .retry, "rate_limited"),
        (500, .retry, "server_error"),
        (503, .retry, "server_error"),
        (418, .payloadRejected, "unexpected_status"),
        (302, .retry, "unexpected_status"),
    ])
    func statusClassification(status: Int, disposition: DeliveryOutcome.Disposition, reason: String) {
        let outcome = WebPushProvider.classify(status: status, headers: [:])
        #expect(outcome.disposition == disposition)
        #expect(outcome.reason.rawValue == reason)
    }

    @Test func retryAfterIsKeptOn429And503() {
        #expect(WebPushProvider.classify(status: 429, headers: ["Retry-After": "30"]).retryAfter == .seconds(30))
        #expect(WebPushProvider.classify(status: 503, headers: ["Retry-After": "5"]).retryAfter == .seconds(5))
    }

    @Test(arguments: [(Priority.critical, "high"), (.high, "high"), (.normal, "normal"), (.low, "low")])
    func urgency(priority: Priority, header: String) {
        #expect(WebPushProvider.urgency(priority) == header)
    }

    @Test(arguments: ["order-7", "", String(repeating: "é/+=", count: 40)])
    func topicIsShortURLSafeAndStable(collapseID: String) throws {
        guard let topic = WebPushProvider.topic(collapseID: collapseID) else {
            #expect(collapseID.isEmpty)
            return
        }
        #expect(topic.count == 32)
        #expect(topic.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        #expect(WebPushProvider.topic(collapseID: collapseID) == topic)
        #expect(WebPushProvider.topic(collapseID: collapseID + "x") != topic)
    }

    @Test func ttlComesFromExpiryClampedAtZeroAndMax() throws {
        let clock = WebPushClock(Date(timeIntervalSince1970: 1_800_000_000))
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { try? client.syncShutdown() }
        let provider = try WebPushProvider(
            configuration: WebPushConfiguration(apps: ["default": makeVAPID()], defaultTTL: 600, maxTTL: 86_400),
            client: client,
            http2: try HTTP2Client(configuration: ProviderHTTPConfiguration()),
            requestTimeout: .seconds(5),
            now: clock.closure
        )
        let sub = Subscription(endpoint: "https://push.example/x", p256dh: "", auth: "")
        var m = message(to: sub)
        m.expiresAt = Date(timeIntervalSince1970: 1_800_000_000 + 120.9)
        #expect(provider.ttl(for: m) == 120)
        m.expiresAt = Date(timeIntervalSince1970: 1_800_000_000 - 5)
        #expect(provider.ttl(for: m) == 0)
        m.expiresAt = Date(timeIntervalSince1970: 1_800_000_000 + 10 * 86_400)
        #expect(provider.ttl(for: m) == 86_400)
        m.expiresAt = Date(timeIntervalSince1970: 0)
        #expect(provider.ttl(for: m) == 600)
    }

    @Test func plaintextIsTheDocumentedJSON() throws {
        let sub = Subscription(endpoint: "https://push.example/x", p256dh: "", auth: "")
        var m = message(to: sub)
        m.subtitle = "Parcel"
        m.imageURL = "https://img.example/p.png"
        let object = try #require(
            try JSONSerialization.jsonObject(with: WebPushProvider.plaintext(for: m)) as? [String: Any]
        )
        #expect(object["title"] as? String == "Order shipped")
        #expect(object["body"] as? String == "Your parcel is on its way")
        #expect(object["subtitle"] as? String == "Parcel")
        #expect(object["route"] as? String == "/orders/7")
        #expect(object["data"] as? [String: String] == ["eventType": "order.shipped"])
        #expect(object["badge"] as? Int == 2)
        #expect(object["tag"] as? String == "order-7")
        #expect(object["silent"] as? Bool == false)
        #expect(object["image"] as? String == "https://img.example/p.png")
        #expect(object["jobID"] as? Int == 1)
    }

    @Test func vapidCredentialValidation() throws {
        let good = makeVAPID()
        try good.validate()

        let pem = P256.Signing.PrivateKey()
        try VAPIDCredentials(
            subject: "https://herald.example/contact",
            publicKey: Base64URL.encode(pem.publicKey.x963Representation),
            privateKey: Secret(pem.pemRepresentation)
        ).validate()

        var mismatched = good
        mismatched.publicKey = makeVAPID().publicKey
        var badSubject = good
        badSubject.subject = "ops@herald.example"
        var badKey = good
        badKey.privateKey = Secret("bm90LWEta2V5")
        for (credentials, expected) in [
            (mismatched, "does not match"), (badSubject, "mailto: or https:"), (badKey, "private key"),
        ] {
            do {
                try credentials.validate(app: "shop")
                Issue.record("expected a validation error")
            } catch {
                let text = "\(error)"
                #expect(text.contains(expected))
                #expect(text.contains("shop"))
                #expect(!text.contains(good.privateKey.reveal()))
                #expect(!text.contains(credentials.privateKey.reveal()))
            }
        }
    }

    @Test func providerInitRejectsBrokenCredentials() throws {
        var broken = makeVAPID()
        broken.publicKey = makeVAPID().publicKey
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { try? client.syncShutdown() }
        #expect(throws: ProviderConfigurationError.self) {
            try WebPushProvider(
                configuration: WebPushConfiguration(apps: ["default": broken]),
                client: client,
                http2: try HTTP2Client(configuration: ProviderHTTPConfiguration()),
                requestTimeout: .seconds(5)
            )
        }
    }

    @Test func authorizerCachesPerOriginAndRenewsBeforeExpiry() async throws {
        let clock = WebPushClock(Date(timeIntervalSince1970: 1_800_000_000))
        let credentials = makeVAPID()
        let authorizer = try VAPIDAuthorizer(credentials: credentials, now: clock.closure)

        let first = try await authorizer.authorization(origin: "https://push.example")
        #expect(first.fresh)
        #expect(first.value.hasPrefix("vapid t="))
        #expect(first.value.hasSuffix(", k=\(credentials.publicKey)"))
        let token = String(first.value.dropFirst("vapid t=".count).prefix { $0 != "," })
        let jwt = try #require(JWT.decode(token))
        let publicKey = try P256.Signing.PublicKey(
            x963Representation: try #require(Base64URL.decode(credentials.publicKey))
        )
        #expect(JWT.verifyES256(jwt, publicKey: publicKey))
        #expect(jwt.header["typ"] == "JWT")
        #expect(jwt.claims["aud"] as? String == "https://push.example")
        #expect(jwt.claims["sub"] as? String == "mailto:ops@herald.example")
        #expect((jwt.claims["exp"] as? NSNumber)?.intValue == 1_800_000_000 + 12 * 3600)

        let cached = try await authorizer.authorization(origin: "https://push.example")
        #expect(!cached.fresh && cached.value == first.value)
        let other = try await authorizer.authorization(origin: "https://other.example:8443")
        #expect(other.fresh && other.value != first.value)

        clock.advance(12 * 3600 - 5 * 60)  // inside the refresh margin
        let renewed = try await authorizer.authorization(origin: "https://push.example")
        #expect(renewed.fresh && renewed.value != first.value)

        await authorizer.invalidate(origin: "https://push.example")
        #expect(try await authorizer.authorization(origin: "https://push.example").fresh)
    }

    @Test(arguments: [
        ("https://fcm.googleapis.com/fcm/send/abc", "https://fcm.googleapis.com"),
        ("https://Push.Example:443/x", "https://push.example"),
        ("https://127.0.0.1:8443/wpush/abc", "https://127.0.0.1:8443"),
        ("http://localhost:80/x", "http://localhost"),
    ])
    func origin(url: String, origin: String) throws {
        #expect(VAPIDAuthorizer.origin(of: try #require(URL(string: url))) == origin)
    }

    /// Requests go to the endpoint's host and port with its path and query exactly as written
    /// (percent-escapes kept); the VAPID audience is the origin.
    @Test(arguments: [
        (
            "https://fcm.googleapis.com/fcm/send/a%3Ab:c", "fcm.googleapis.com", 443, "/fcm/send/a%3Ab:c",
            "https://fcm.googleapis.com"
        ),
        (
            "https://Push.Example:8443/w?x=1&y=%2F#frag", "Push.Example", 8443, "/w?x=1&y=%2F",
            "https://push.example:8443"
        ),
        ("https://push.example", "push.example", 443, "/", "https://push.example"),
        ("https://push.example?k=v", "push.example", 443, "/?k=v", "https://push.example"),
        ("https://[::1]:9443/wpush/abc", "::1", 9443, "/wpush/abc", "https://[::1]:9443"),
    ])
    func target(endpoint: String, host: String, port: Int, path: String, origin: String) throws {
        let (target, requestPath) = try #require(WebPushProvider.target(of: endpoint))
        #expect(target.endpoint.host.lowercased() == host.lowercased())
        #expect(target.endpoint.port == port)
        #expect(requestPath == path)
        #expect(target.origin == origin)
    }

    @Test(arguments: ["http://push.example/x", "https:///x", "push.example/x", "", "ftp://push.example/x"])
    func targetRefusesWhatIsNotAnHTTPSURL(endpoint: String) {
        #expect(WebPushProvider.target(of: endpoint) == nil)
    }
}

// MARK: - Over sockets, against the simulated push service

@Suite struct WebPushTests {
    private func provider(
        _ clients: SimulatorClients,
        apps: [String: VAPIDCredentials],
        requestTimeout: Duration = .seconds(20),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> WebPushProvider {
        try WebPushProvider(
            configuration: WebPushConfiguration(apps: apps),
            client: clients.http,
            http2: clients.http2,
            requestTimeout: requestTimeout,
            now: now
        )
    }

    @Test func deliversEncryptedMessageTheServiceCanRead() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let vapid = makeVAPID()
            let subs = (0..<3).map { _ in subscribe(simulator, restrictedTo: vapid.publicKey) }
            let webPush = try provider(clients, apps: ["default": vapid])
            let messages = subs.enumerated().map { i, s in message(to: s, jobID: Int64(i + 1), title: "Hello \(i)") }

            let outcomes = await webPush.send(messages, logger: logger)
            #expect(outcomes.map(\.disposition) == [.accepted, .accepted, .accepted])
            #expect(outcomes.allSatisfy { $0.latency != nil })
            expectRedacted(outcomes, subscriptions: subs, vapid: vapid)

            let records = simulator.context.recorder.records(provider: "webpush")
            #expect(records.count == 3)
            for (i, sub) in subs.enumerated() {
                let record = try #require(records.first { $0.token == sub.id })
                let payload = try #require(
                    try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any]
                )
                #expect(payload["title"] as? String == "Hello \(i)")
                #expect(payload["body"] as? String == "Your parcel is on its way")
                #expect(payload["route"] as? String == "/orders/7")
                #expect(payload["tag"] as? String == "order-7")
                #expect(payload["data"] as? [String: String] == ["eventType": "order.shipped"])
                #expect(payload["jobID"] as? Int == i + 1)
                #expect(record.headers["content-encoding"] == "aes128gcm")
                #expect(record.headers["content-type"] == "application/octet-stream")
                #expect(record.headers["urgency"] == "high")
                #expect(record.headers["topic"] == WebPushProvider.topic(collapseID: "order-7"))
                let ttl = try #require(record.headers["ttl"].flatMap { Int($0) })
                #expect((3590...3600).contains(ttl))
                #expect(record.headers["authorization"] == nil)
            }
        }
    }

    /// The provider keeps each device's parsed subscription: a device that subscribes again (new
    /// endpoint and keys, same device id) must be sent to the new subscription, encrypted for its
    /// keys, and one whose keys alone changed as well.
    @Test func aDeviceThatSubscribedAgainGetsItsNewSubscription() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let vapid = makeVAPID()
            let first = subscribe(simulator, restrictedTo: vapid.publicKey)
            let second = subscribe(simulator, restrictedTo: vapid.publicKey)
            let webPush = try provider(clients, apps: ["default": vapid])
            // Every message is job 7 to device 7 (`message` gives the device the job's id).
            func to(_ s: Subscription, title: String) -> PushMessage { message(to: s, jobID: 7, title: title) }
            #expect(await webPush.send([to(first, title: "one")], logger: logger).map(\.disposition) == [.accepted])
            #expect(await webPush.send([to(second, title: "two")], logger: logger).map(\.disposition) == [.accepted])
            // Same endpoint, the keys of another subscription: the service cannot decrypt it.
            var swapped = first
            (swapped.p256dh, swapped.auth) = (second.p256dh, second.auth)
            #expect(await webPush.send([to(swapped, title: "three")], logger: logger).map(\.disposition) != [.accepted])
            #expect(await webPush.send([to(first, title: "four")], logger: logger).map(\.disposition) == [.accepted])

            let records = simulator.context.recorder.records(provider: "webpush")
            func titles(_ s: Subscription) throws -> [String] {
                try records.filter { $0.token == s.id }.map {
                    let payload = try #require(
                        try JSONSerialization.jsonObject(with: Data($0.payload.utf8)) as? [String: Any]
                    )
                    return try #require(payload["title"] as? String)
                }
            }
            #expect(try titles(first) == ["one", "four"])
            #expect(try titles(second) == ["two"])
        }
    }

    @Test(arguments: [
        (404, DeliveryOutcome.Disposition.tokenInvalid, "subscription_not_found"),
        (410, .tokenInvalid, "subscription_gone"),
        (413, .payloadRejected, "payload_too_large"),
        (400, .payloadRejected, "bad_request"),
        (401, .credentialsBroken, "vapid_unauthorized"),
        (500, .retry, "server_error"),
        (502, .retry, "server_error"),
        (503, .retry, "server_error"),
    ])
    func injectedStatusIsClassified(
        status: Int,
        disposition: DeliveryOutcome.Disposition,
        reason: String
    )
        async throws
    {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let vapid = makeVAPID()
            let sub = subscribe(simulator)
            try simulator.faults.add(FaultRule(provider: "webpush", token: sub.id, status: status))
            let outcomes = try await provider(clients, apps: ["default": vapid]).send(
                [message(to: sub)],
                logger: logger
            )
            #expect(outcomes.count == 1)
            #expect(outcomes[0].disposition == disposition)
            #expect(outcomes[0].reason.rawValue == reason)
            #expect(outcomes[0].latency != nil)
            #expect(simulator.context.recorder.acceptedCount(provider: "webpush") == 0)
            expectRedacted(outcomes, subscriptions: [sub], vapid: vapid)
        }
    }

    @Test func rateLimitCarriesRetryAfter() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let sub = subscribe(simulator)
            try simulator.faults.add(FaultRule(provider: "webpush", status: 429, retryAfter: 7))
            let outcomes = try await provider(clients, apps: ["default": makeVAPID()]).send(
                [message(to: sub)],
                logger: logger
            )
            #expect(outcomes[0].disposition == .retry)
            #expect(outcomes[0].reason == .rateLimited)
            #expect(outcomes[0].retryAfter == .seconds(7))
        }
    }

    @Test func serverErrorIsRetryableAndTheRetrySucceeds() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let sub = subscribe(simulator)
            try simulator.faults.add(FaultRule(provider: "webpush", status: 503, retryAfter: 2, remaining: 1))
            let webPush = try provider(clients, apps: ["default": makeVAPID()])
            let first = await webPush.send([message(to: sub)], logger: logger)
            #expect(first[0].disposition == .retry)
            #expect(first[0].retryAfter == .seconds(2))
            let second = await webPush.send([message(to: sub)], logger: logger)
            #expect(second[0].disposition == .accepted)
            #expect(simulator.context.recorder.acceptedCount(provider: "webpush") == 1)
        }
    }

    @Test func unknownSubscriptionIsGoneAndOutcomesKeepInputOrder() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let vapid = makeVAPID()
            let live = subscribe(simulator)
            let dead = Subscription(endpoint: simulator.baseURL + "/wpush/nobody", p256dh: live.p256dh, auth: live.auth)
            let order = [live, dead, live, dead, live]
            let messages = order.enumerated().map { i, s in message(to: s, jobID: Int64(i)) }
            let outcomes = try await provider(clients, apps: ["default": vapid]).send(messages, logger: logger)
            #expect(outcomes.map(\.reason.rawValue) == ["ok", "subscription_gone", "ok", "subscription_gone", "ok"])
            #expect(outcomes[1].disposition == .tokenInvalid)
            expectRedacted(outcomes, subscriptions: [live, dead], vapid: vapid)
        }
    }

    @Test func vapidSignedWithTheWrongKeyIsRefused() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let subscribed = makeVAPID()
            let other = makeVAPID()
            let sub = subscribe(simulator, restrictedTo: subscribed.publicKey)
            let webPush = try provider(clients, apps: ["default": other])

            let first = await webPush.send([message(to: sub)], logger: logger)
            #expect(first[0].disposition == .credentialsBroken)
            #expect(first[0].reason == .vapidForbidden)
            #expect(simulator.context.recorder.rejectedCount(provider: "webpush") == 1)  // fresh token: no retry

            // A cached token that is refused is re-minted once, then given up on.
            let second = await webPush.send([message(to: sub)], logger: logger)
            #expect(second[0].disposition == .credentialsBroken)
            #expect(simulator.context.recorder.rejectedCount(provider: "webpush") == 3)
            #expect(simulator.context.recorder.acceptedCount(provider: "webpush") == 0)
            expectRedacted(first + second, subscriptions: [sub], vapid: other)
        }
    }

    @Test func expiredCachedTokenIsReMintedAndRetriedOnce() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-wp-\(UUID())").path
        let serviceClock = WebPushClock()
        let workerClock = WebPushClock()
        let context = SimulatorContext(now: serviceClock.closure)
        let simulator = ProviderSimulator(
            configuration: SimulatorConfiguration(stateDirectory: directory),
            services: [WebPushService()],
            context: context
        )
        try await simulator.start()
        let http = ProviderHTTPConfiguration(extraCAFiles: [simulator.caCertificatePath])
        let clients = SimulatorClients(http: try http.makeClient(), http2: try HTTP2Client(configuration: http))
        do {
            let sub = subscribe(simulator)
            let webPush = try provider(clients, apps: ["default": makeVAPID()], now: workerClock.closure)
            #expect(await webPush.send([message(to: sub)], logger: logger)[0].disposition == .accepted)

            // The worker still holds its token (1 h left by its clock); the push service's clock
            // says it expired a minute ago.
            workerClock.advance(11 * 3600)
            serviceClock.advance(12 * 3600 + 60)
            let outcome = await webPush.send([message(to: sub, expiresIn: 86_400)], logger: logger)[0]
            #expect(outcome.disposition == .accepted)
            #expect(context.recorder.rejectedCount(provider: "webpush") == 1)
            #expect(context.recorder.acceptedCount(provider: "webpush") == 2)
        } catch {
            Issue.record(error)
        }
        await clients.shutdown()
        try? await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test func oversizeBodyIsShortenedAndHopelessPayloadRejectedBeforeSending() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let sub = subscribe(simulator)
            let webPush = try provider(clients, apps: ["default": makeVAPID()])
            let base = WebPushProvider.plaintext(for: message(to: sub, body: "")).count
            let fits = String(repeating: "a", count: WebPushCrypto.maxPlaintextLength - base)
            #expect(WebPushProvider.plaintext(for: message(to: sub, body: fits)).count == 3993)

            let outcomes = await webPush.send(
                [
                    message(to: sub, body: fits), message(to: sub, body: fits + "a"),
                    message(to: sub, title: String(repeating: "t", count: 4000), body: ""),
                ],
                logger: logger
            )
            #expect(outcomes[0].disposition == .accepted)
            // One byte over: sent as the longest preview that fits.
            #expect(outcomes[1].disposition == .accepted)
            #expect(outcomes[2].disposition == .payloadRejected)
            #expect(outcomes[2].reason == .payloadTooLarge)
            #expect(outcomes[2].latency == nil)  // never sent
            let previews = simulator.context.recorder.records(provider: "webpush").map(\.payload)
            #expect(previews.allSatisfy { $0.utf8.count <= 3993 })
            #expect(previews.contains { $0.contains("a…") })
            #expect(simulator.context.recorder.acceptedCount(provider: "webpush") == 2)
            #expect(simulator.context.recorder.rejectedCount(provider: "webpush") == 0)
        }
    }

    @Test func badSubscriptionsAndUnknownAppsFailWithoutARequest() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let vapid = makeVAPID()
            let sub = subscribe(simulator)
            var plainHTTP = sub
            plainHTTP.endpoint = sub.endpoint.replacingOccurrences(of: "https://", with: "http://")
            var noKeys = sub
            noKeys.p256dh = ""
            var shortAuth = sub
            shortAuth.auth = Base64URL.encode(Data(count: 8))
            var notAPoint = sub
            notAPoint.p256dh = Base64URL.encode(Data([4] + [UInt8](repeating: 1, count: 64)))
            let messages = [
                message(to: plainHTTP), message(to: noKeys), message(to: shortAuth), message(to: notAPoint),
                message(to: sub, app: "unknown-app"),
            ]
            let outcomes = try await provider(clients, apps: ["default": vapid]).send(messages, logger: logger)
            #expect(
                outcomes.map(\.disposition) == [
                    .tokenInvalid, .tokenInvalid, .tokenInvalid, .tokenInvalid, .credentialsBroken,
                ]
            )
            #expect(
                outcomes.map(\.reason.rawValue) == [
                    "invalid_endpoint", "invalid_subscription", "invalid_subscription", "invalid_subscription",
                    "app_not_configured",
                ]
            )
            #expect(simulator.context.recorder.rejectedCount(provider: "webpush") == 0)
            expectRedacted(outcomes, subscriptions: [sub, plainHTTP, noKeys, shortAuth, notAPoint], vapid: vapid)
        }
    }

    /// GOAWAY names the last stream the push service processed: the streams after it were never
    /// seen, so they go once more, at once, on a new connection, and nothing arrives twice.
    @Test func streamsRefusedByGoawayAreResentOnce() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let vapid = makeVAPID()
            let subs = (0..<12).map { _ in subscribe(simulator) }
            let webPush = try provider(clients, apps: ["default": vapid])
            let messages = subs.enumerated().map { i, s in message(to: s, jobID: Int64(i + 1)) }
            #expect(await webPush.send([messages[0]], logger: logger)[0].disposition == .accepted)
            try simulator.faults.add(FaultRule(provider: "webpush", token: subs[5].id, remaining: 1, goaway: true))
            let outcomes = await webPush.send(Array(messages[1...]), logger: logger)
            #expect(simulator.faults.entries.isEmpty, "the GOAWAY was sent")
            #expect(outcomes[4].disposition == .accepted, "\(outcomes[4])")
            #expect(
                outcomes.allSatisfy { $0.disposition == .accepted || $0.reason == .connectionClosed },
                "\(outcomes)"
            )
            let recorded = simulator.context.recorder.records(provider: "webpush").map(\.token)
            #expect(recorded.count == Set(recorded).count, "a message arrived twice")
            for (sub, outcome) in zip(subs.dropFirst(), outcomes) where outcome.disposition == .accepted {
                #expect(recorded.contains(sub.id))
            }
            expectRedacted(outcomes, subscriptions: subs, vapid: vapid)
        }
    }

    /// One send to three push services: two speak HTTP/2, one only HTTP/1.1 (ALPN without `h2`).
    /// Each gets exactly its subscriptions' messages, once; the HTTP/1.1 one through the fallback,
    /// which is remembered for the next send.
    @Test func severalPushServicesAndOneWithoutHTTP2EachGetTheirMessagesOnce() async throws {
        var simulators: [ProviderSimulator] = []
        var directories: [String] = []
        for protocols in [["h2", "http/1.1"], ["h2"], ["http/1.1"]] {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-wp-\(UUID())").path
            var configuration = SimulatorConfiguration(stateDirectory: directory)
            configuration.applicationProtocols = protocols
            let simulator = ProviderSimulator(configuration: configuration, services: [WebPushService()])
            try await simulator.start()
            simulators.append(simulator)
            directories.append(directory)
        }
        // Generous timeouts: the HTTP/1.1 service takes a TLS handshake per connection, and the
        // test suite runs in parallel on two cores (5 s was not always enough there).
        let http = ProviderHTTPConfiguration(
            extraCAFiles: simulators.map(\.caCertificatePath),
            requestTimeout: .seconds(60),
            connectTimeout: .seconds(60)
        )
        let clients = SimulatorClients(http: try http.makeClient(), http2: try HTTP2Client(configuration: http))
        do {
            let vapid = makeVAPID()
            let webPush = try provider(clients, apps: ["default": vapid], requestTimeout: .seconds(60))
            // Interleaved: 3 services × 15 subscriptions, 45 messages, more than one chunk each way.
            let subs = (0..<45).map { subscribe(simulators[$0 % 3]) }
            let messages = subs.enumerated().map { i, s in message(to: s, jobID: Int64(i + 1), title: "n\(i)") }
            let outcomes = await webPush.send(messages, logger: logger)
            #expect(outcomes.allSatisfy { $0.disposition == .accepted }, "\(Set(outcomes.map(\.reason.rawValue)))")
            for (n, simulator) in simulators.enumerated() {
                let recorded = simulator.context.recorder.records(provider: "webpush").map(\.token)
                let expected = subs.enumerated().filter { $0.offset % 3 == n }.map(\.element.id)
                #expect(recorded.count == expected.count, "service \(n) recorded \(recorded.count)")
                #expect(Set(recorded) == Set(expected))
            }
            // The HTTP/1.1-only service is remembered: the next send goes straight there.
            let again = await webPush.send([message(to: subs[2], jobID: 99)], logger: logger)
            #expect(again[0].disposition == .accepted)
            #expect(simulators[2].context.recorder.acceptedCount(provider: "webpush") == 16)
            expectRedacted(outcomes + again, subscriptions: subs, vapid: vapid)
        } catch {
            Issue.record(error)
        }
        await clients.shutdown()
        for (simulator, directory) in zip(simulators, directories) {
            try? await simulator.shutdown()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test func droppedConnectionIsATransportRetry() async throws {
        try await SimulatorHarness.withClients(services: [WebPushService()]) { simulator, clients in
            let sub = subscribe(simulator)
            try simulator.faults.add(FaultRule(provider: "webpush", dropConnection: true))
            let outcome = try await provider(clients, apps: ["default": makeVAPID()]).send(
                [message(to: sub)],
                logger: logger
            )[0]
            #expect(outcome.disposition == .retry)
            #expect([.connectionClosed, .connectionError].contains(outcome.reason))
        }
    }

    @Test func subscriptionRouteAnswersWhatABrowserWouldHandOver() async throws {
        let context = SimulatorContext()
        context.baseURL = "https://127.0.0.1:9443"
        let service = WebPushService()
        let request = SimulatorRequest(
            method: "POST",
            path: WebPushService.subscriptionsPath,
            headers: [],
            body: [],
            httpVersion: "h2"
        )
        #expect(service.matches(request))
        let response = await service.handle(request, fault: nil, context: context)
        #expect(response.status == 201)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        let endpoint = try #require(object["endpoint"] as? String)
        let id = try #require(object["id"] as? String)
        #expect(endpoint == "https://127.0.0.1:9443/wpush/" + id)
        let p256dh = try #require(object["p256dh"] as? String)
        let auth = try #require(object["auth"] as? String)
        #expect(Base64URL.decode(p256dh)?.count == 65)
        #expect(Base64URL.decode(auth)?.count == 16)
        #expect(context.keyring.webPushSubscription(id: id) != nil)
    }

    @Test func serviceRejectsPushesWithoutVAPIDOrTTL() async throws {
        try await SimulatorHarness.with(services: [WebPushService()]) { simulator, client in
            let sub = subscribe(simulator)
            let body = try WebPushCrypto.encrypt(
                plaintext: Data("{}".utf8),
                userAgentPublicKey: try #require(Base64URL.decode(sub.p256dh)),
                authSecret: try #require(Base64URL.decode(sub.auth))
            )
            func post(_ headers: [(String, String)]) async throws -> Int {
                var request = HTTPClientRequest(url: sub.endpoint)
                request.method = .POST
                for (name, value) in headers { request.headers.add(name: name, value: value) }
                request.body = .bytes(ByteBuffer(bytes: body))
                let response = try await client.execute(request, timeout: .seconds(5))
                _ = try await response.body.collect(upTo: 1 << 16)
                return Int(response.status.code)
            }
            #expect(try await post([("TTL", "60"), ("Content-Encoding", "aes128gcm")]) == 401)

            let authorizer = try VAPIDAuthorizer(credentials: makeVAPID(), now: { Date() })
            let auth = try await authorizer.authorization(origin: simulator.baseURL).value
            #expect(try await post([("Authorization", auth), ("Content-Encoding", "aes128gcm")]) == 400)
            #expect(try await post([("Authorization", auth), ("TTL", "60"), ("Content-Encoding", "aesgcm")]) == 400)
            #expect(try await post([("Authorization", auth), ("TTL", "60"), ("Content-Encoding", "aes128gcm")]) == 201)

            let wrongAudience = try await authorizer.authorization(origin: "https://elsewhere.example").value
            #expect(
                try await post([("Authorization", wrongAudience), ("TTL", "60"), ("Content-Encoding", "aes128gcm")])
                    == 403
            )
        }
    }
}
