import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldTestSupport
import Logging
import NIOCore
import ProviderSimulator
import Synchronization
import Testing

@testable import Providers

/// An ``ExpoReceiptStore`` in memory, for the poller tests.
final class InMemoryExpoReceiptStore: ExpoReceiptStore {
    struct State {
        var pending: [String: ExpoTicket] = [:]
        var failed: [String: String] = [:]  // ticket id -> reason
        var expired: Set<String> = []
        var finished: Set<String> = []
        var disabledDevices: Set<Int64> = []
    }

    let state = Mutex(State())

    func record(_ tickets: [ExpoTicket]) async throws {
        state.withLock { s in for t in tickets where s.pending[t.ticketID] == nil { s.pending[t.ticketID] = t } }
    }

    func due(at now: Date, limit: Int) async throws -> [ExpoTicket] {
        state.withLock { s in
            Array(
                s.pending.values.filter { $0.checkAt <= now }.sorted {
                    ($0.checkAt, $0.ticketID) < ($1.checkAt, $1.ticketID)
                }.prefix(limit)
            )
        }
    }

    func settle(_ updates: [ExpoTicketUpdate]) async throws {
        state.withLock { s in
            for u in updates {
                switch u.resolution {
                case .ok:
                    s.pending[u.ticketID] = nil
                    s.finished.insert(u.ticketID)
                case .failed(let reason):
                    s.pending[u.ticketID] = nil
                    s.failed[u.ticketID] = reason.rawValue
                case .deviceNotRegistered:
                    s.pending[u.ticketID] = nil
                    s.failed[u.ticketID] = "device_not_registered"
                    s.disabledDevices.insert(u.deviceID)
                case .recheck(let at):
                    s.pending[u.ticketID]?.checkAt = at
                case .resent(let replacement):
                    s.pending[u.ticketID] = nil
                    s.pending[replacement.ticketID] = replacement
                case .expired:
                    s.pending[u.ticketID] = nil
                    s.expired.insert(u.ticketID)
                }
            }
        }
    }
}

@Suite struct ExpoTests {
    static let logger: Logger = {
        var l = Logger(label: "expo-test")
        l.logLevel = .critical
        return l
    }()

    struct Fixture {
        var simulator: ProviderSimulator
        var service: ExpoService
        var client: HTTPClient
        var clock: ProviderTestClock
        var configuration: ExpoConfiguration
        var store: InMemoryExpoReceiptStore
        var provider: ExpoProvider
        var records: [SimulatorRecord] { simulator.context.recorder.records(provider: "expo") }
    }

    static func withExpo<T>(
        accessTokens: [String: Secret] = [:],
        requireToken: String? = nil,
        _ body: (Fixture) async throws -> T
    ) async throws -> T {
        let clock = ProviderTestClock()
        let context = SimulatorContext(now: clock.closure)
        if let requireToken { context.keyring.requireExpoAccessToken(requireToken) }
        let service = ExpoService()
        return try await withClockedSimulator(services: [service], context: context) { simulator, clients in
            let client = clients.http
            let configuration = ExpoConfiguration(baseURL: simulator.baseURL, accessTokens: accessTokens)
            let store = InMemoryExpoReceiptStore()
            let provider = ExpoProvider(
                configuration: configuration,
                client: client,
                requestTimeout: .seconds(10),
                receipts: store,
                now: clock.closure
            )
            return try await body(
                Fixture(
                    simulator: simulator,
                    service: service,
                    client: client,
                    clock: clock,
                    configuration: configuration,
                    store: store,
                    provider: provider
                )
            )
        }
    }

    static func token(_ i: Int) -> String { "ExponentPushToken[device-\(i)]" }

    static func message(
        _ token: String,
        clock: ProviderTestClock,
        id: Int64 = 1,
        app: String = "default",
        silent: Bool = false,
        body: String = "Practice moved to 6pm"
    ) -> PushMessage {
        PushMessage(
            jobID: 500 + id,
            device: Device(id: id, userID: "u\(id)", provider: .expo, token: token, appID: app),
            title: "Club news",
            body: body,
            subtitle: "U12",
            data: ["eventType": "club.news", "route": "/news/7"],
            priority: .high,
            collapseID: "news-7",
            silent: silent,
            sound: "default",
            imageURL: "https://img.example/7.png",
            actionCategory: "NEWS",
            androidChannel: "news",
            badge: 2,
            expiresAt: clock.now + 7200
        )
    }

    // MARK: - Sending

    @Test func sendsEveryFieldAndRecordsATicket() async throws {
        try await Self.withExpo { f in
            let outcomes = await f.provider.send([Self.message(Self.token(1), clock: f.clock)], logger: Self.logger)
            #expect(outcomes.map(\.disposition) == [.accepted])
            let record = try #require(f.records.first)
            #expect(record.token == Self.token(1))
            let m = try #require(try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])
            #expect(m["to"] as? String == Self.token(1))
            #expect(m["title"] as? String == "Club news")
            #expect(m["body"] as? String == "Practice moved to 6pm")
            #expect(m["subtitle"] as? String == "U12")
            #expect(m["data"] as? [String: String] == ["eventType": "club.news", "route": "/news/7"])
            #expect(m["sound"] as? String == "default")
            #expect(m["badge"] as? Int == 2)
            #expect(m["priority"] as? String == "high")
            #expect(m["channelId"] as? String == "news")
            #expect(m["categoryId"] as? String == "NEWS")
            #expect(m["mutableContent"] as? Bool == true)
            #expect(m["expiration"] as? Int == Int(f.clock.now.timeIntervalSince1970) + 7200)
            #expect(m["_contentAvailable"] == nil)
            let tickets = f.store.state.withLock { Array($0.pending.values) }
            #expect(tickets.count == 1)
            #expect(tickets.first?.deviceID == 1)
            #expect(tickets.first?.jobID == 501)
            #expect(tickets.first?.checkAt == f.clock.now.addingTimeInterval(900))
        }
    }

    @Test func silentMessageIsContentAvailableOnly() async throws {
        try await Self.withExpo { f in
            _ = await f.provider.send([Self.message(Self.token(1), clock: f.clock, silent: true)], logger: Self.logger)
            let record = try #require(f.records.first)
            let m = try #require(try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any])
            #expect(m["_contentAvailable"] as? Bool == true)
            #expect(m["title"] == nil)
            #expect(m["body"] == nil)
        }
    }

    @Test func chunksOf100GzippedAndInOrder() async throws {
        try await Self.withExpo { f in
            let messages = (0..<250).map { Self.message(Self.token($0), clock: f.clock, id: Int64($0)) }
            let outcomes = await f.provider.send(messages, logger: Self.logger)
            #expect(outcomes.count == 250)
            #expect(outcomes.allSatisfy { $0.disposition == .accepted })
            #expect(f.service.sendRequestCount == 3)
            #expect(f.service.lastSendHeaders["content-encoding"] == "gzip")
            #expect(Set(f.records.map(\.token)) == Set((0..<250).map(Self.token)))
            #expect(f.store.state.withLock { $0.pending.count } == 250)
        }
    }

    @Test func appsAreSentSeparatelyWithTheirOwnAccessToken() async throws {
        try await Self.withExpo(accessTokens: ["club": Secret("expo-secret-1")], requireToken: "expo-secret-1") { f in
            let outcomes = await f.provider.send(
                [
                    Self.message(Self.token(1), clock: f.clock, id: 1, app: "club"),
                    Self.message(Self.token(2), clock: f.clock, id: 2, app: "default"),
                ],
                logger: Self.logger
            )
            #expect(outcomes[0].disposition == .accepted)
            #expect(
                outcomes[1] == DeliveryOutcome(.credentialsBroken, reason: .unauthorized, latency: outcomes[1].latency)
            )
            #expect(f.service.sendRequestCount == 2)
            #expect(!"\(outcomes)".contains("expo-secret"))
        }
    }

    @Test func malformedTokensAndOversizedMessagesNeverReachExpo() async throws {
        try await Self.withExpo { f in
            let outcomes = await f.provider.send(
                [
                    Self.message("fcm-looking-token", clock: f.clock, id: 1),
                    Self.message("ExponentPushToken[]", clock: f.clock, id: 2),
                    Self.message("ExpoPushToken[abc", clock: f.clock, id: 3),
                    {
                        var hopeless = Self.message(Self.token(4), clock: f.clock, id: 4)
                        hopeless.title = String(repeating: "y", count: 4100)  // over even with an empty body
                        return hopeless
                    }(),
                ],
                logger: Self.logger
            )
            #expect(
                outcomes.prefix(3).allSatisfy { $0 == DeliveryOutcome(.tokenInvalid, reason: .invalidTokenFormat) }
            )
            #expect(outcomes[3] == DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge))
            #expect(f.service.sendRequestCount == 0)
            #expect(ExpoMessageEncoder.isExpoPushToken("ExpoPushToken[xyz]"))
        }
    }

    @Test func ticketErrorsAreClassifiedPerMessage() async throws {
        try await Self.withExpo { f in
            let scripted: [(Int, String)] = [
                (1, "DeviceNotRegistered"), (2, "MessageTooBig"), (3, "MessageRateExceeded"), (4, "InvalidCredentials"),
                (5, "MismatchSenderId"),
            ]
            for (i, error) in scripted { f.service.failTicket(token: Self.token(i), error: error) }
            // Injected through the fault plan: the request's first recipient gets a ticket error.
            try f.simulator.faults.add(
                FaultRule(provider: "expo", token: Self.token(0), status: 200, reason: "DeviceNotRegistered")
            )
            let messages = (0..<7).map { Self.message(Self.token($0), clock: f.clock, id: Int64($0)) }
            let outcomes = await f.provider.send(messages, logger: Self.logger)
            let expected: [(DeliveryOutcome.Disposition, DeliveryOutcome.Reason)] = [
                (.tokenInvalid, .deviceNotRegistered), (.tokenInvalid, .deviceNotRegistered),
                (.payloadRejected, .messageTooBig), (.retry, .messageRateExceeded),
                (.credentialsBroken, .invalidCredentials), (.credentialsBroken, .mismatchSenderID),
                (.accepted, .ok),
            ]
            #expect(outcomes.map(\.disposition) == expected.map(\.0))
            #expect(outcomes.map(\.reason) == expected.map(\.1))
            #expect(outcomes.allSatisfy { !"\($0)".contains("ExponentPushToken") })
            #expect(f.store.state.withLock { $0.pending.count } == 1)
        }
    }

    @Test func tooManyRequestsHonoursRetryAfter() async throws {
        try await Self.withExpo { f in
            try f.simulator.faults.add(FaultRule(provider: "expo", status: 429, retryAfter: 30))
            let outcomes = await f.provider.send(
                (0..<3).map { Self.message(Self.token($0), clock: f.clock, id: Int64($0)) },
                logger: Self.logger
            )
            #expect(
                outcomes.allSatisfy {
                    $0.disposition == .retry && $0.reason == .rateLimited && $0.retryAfter == .seconds(30)
                }
            )
        }
    }

    @Test func serverErrorsRetryTheWholeChunk() async throws {
        try await Self.withExpo { f in
            try f.simulator.faults.add(FaultRule(provider: "expo", status: 503, remaining: 1))
            let messages = (0..<150).map { Self.message(Self.token($0), clock: f.clock, id: Int64($0)) }
            let outcomes = await f.provider.send(messages, logger: Self.logger)
            // One of the two chunks failed as a whole; the other was accepted.
            let retried = outcomes.filter { $0.disposition == .retry && $0.reason == .serverError }.count
            #expect(retried == 100 || retried == 50)
            #expect(outcomes.filter { $0.disposition == .accepted }.count == 150 - retried)
        }
    }

    // MARK: - Receipts

    @Test func pollerDisablesDeadDevicesAndResendsRateLimitedMessages() async throws {
        try await Self.withExpo { f in
            f.service.failReceipt(token: Self.token(1), error: "DeviceNotRegistered")
            f.service.failReceipt(token: Self.token(2), error: "MessageRateExceeded", times: 1)
            f.service.failReceipt(token: Self.token(3), error: "InvalidCredentials")
            let messages = (1...4).map { Self.message(Self.token($0), clock: f.clock, id: Int64($0)) }
            #expect(await f.provider.send(messages, logger: Self.logger).allSatisfy { $0.disposition == .accepted })
            let poller = ExpoReceiptPoller(
                configuration: f.configuration,
                client: f.client,
                requestTimeout: .seconds(10),
                store: f.store,
                now: f.clock.closure
            )

            // Nothing is due before the receipt delay.
            #expect(await poller.pollOnce(logger: Self.logger) == (0, 0, 0))
            f.clock.advance(901)
            let first = await poller.pollOnce(logger: Self.logger)
            #expect(first == (4, 1, 1))
            #expect(f.service.receiptRequestCount == 1)
            f.store.state.withLock { s in
                #expect(s.disabledDevices == [1])
                #expect(s.failed.values.sorted() == ["device_not_registered", "invalid_credentials"])
                #expect(s.finished.count == 1)
                #expect(s.pending.count == 1)
                #expect(s.pending.values.first?.deviceID == 2)
                #expect(s.pending.values.first?.attempt == 2)
            }
            #expect(f.records.filter { $0.token == Self.token(2) }.count == 2)

            // The resent message's receipt is read one delay later and is fine this time.
            #expect(await poller.pollOnce(logger: Self.logger) == (0, 0, 0))
            f.clock.advance(901)
            #expect(await poller.pollOnce(logger: Self.logger) == (1, 0, 0))
            #expect(f.store.state.withLock { $0.pending.isEmpty && $0.finished.count == 2 })
        }
    }

    @Test func rateLimitedResendsAreBounded() async throws {
        try await Self.withExpo { f in
            f.service.failReceipt(token: Self.token(1), error: "MessageRateExceeded")
            _ = await f.provider.send([Self.message(Self.token(1), clock: f.clock)], logger: Self.logger)
            var poller = ExpoReceiptPoller(
                configuration: f.configuration,
                client: f.client,
                requestTimeout: .seconds(10),
                store: f.store,
                now: f.clock.closure
            )
            poller.maxAttempts = 2
            f.clock.advance(901)
            #expect(await poller.pollOnce(logger: Self.logger) == (1, 0, 1))
            f.clock.advance(901)
            #expect(await poller.pollOnce(logger: Self.logger) == (1, 0, 0))
            f.store.state.withLock { s in
                #expect(s.pending.isEmpty)
                #expect(Array(s.failed.values) == ["message_rate_exceeded"])
            }
        }
    }

    @Test func missingReceiptsAreRecheckedThenExpire() async throws {
        try await Self.withExpo { f in
            _ = await f.provider.send([Self.message(Self.token(1), clock: f.clock)], logger: Self.logger)
            // Receipts requests fail: the ticket is looked at again later.
            try f.simulator.faults.add(FaultRule(provider: "expo", status: 503, remaining: 1))
            let poller = ExpoReceiptPoller(
                configuration: f.configuration,
                client: f.client,
                requestTimeout: .seconds(10),
                store: f.store,
                now: f.clock.closure
            )
            f.clock.advance(901)
            #expect(await poller.pollOnce(logger: Self.logger) == (1, 0, 0))
            #expect(f.store.state.withLock { $0.pending.count } == 1)
            #expect(await poller.pollOnce(logger: Self.logger) == (0, 0, 0))  // rescheduled 5 min ahead
            // Past Expo's 24 h retention the receipt is gone for good.
            f.clock.advance(25 * 3600)
            #expect(await poller.pollOnce(logger: Self.logger) == (1, 0, 0))
            #expect(f.store.state.withLock { $0.expired.count } == 1)
        }
    }

    // MARK: - Gzip

    @Test(arguments: [0, 1, 1000, 65_535, 65_536, 200_000])
    func gzipRoundTrip(_ size: Int) throws {
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 / 7) }
        let compressed = Array(buffer: Gzip.compress(bytes))
        #expect(compressed.prefix(3) == [0x1f, 0x8b, 0x08])
        #expect(try Gzip.decompress(compressed) == bytes)
    }

    @Test func gzipReallyCompressesAPushChunk() throws {
        let chunk = Array(
            ("["
                + (0..<100).map {
                    #"{"to":"ExponentPushToken[\#($0)]","title":"New listing","body":"Bread, 3 km away"}"#
                }
                .joined(separator: ",") + "]").utf8
        )
        let compressed = Gzip.compress(chunk).readableBytes
        #expect(compressed * 5 < chunk.count, "\(compressed) of \(chunk.count) bytes")
    }

    @Test func gunzipReadsOtherEncodersAndRefusesBadInput() throws {
        // Made with Python's gzip.compress(…, mtime=0): a fixed-Huffman and a dynamic-Huffman block.
        let fixed: [UInt8] = [
            31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 203, 72, 205, 201, 201, 87, 200, 64, 39, 1, 227, 81, 61, 141, 23, 0, 0, 0,
        ]
        #expect(try Gzip.decompress(fixed) == Array("hello hello hello hello".utf8))
        let expected = (0..<500).map { "item \($0 * 7 % 13) value \($0 * $0 % 97);" }.joined()
        #expect(try Gzip.decompress(Self.hex(Self.dynamicVector)) == Array(expected.utf8))
        var corrupted = fixed
        corrupted[corrupted.count - 5] ^= 1
        #expect(throws: Gzip.Failure.malformed) { try Gzip.decompress(corrupted) }
        // A small body that inflates past the limit (a "zip bomb") stops at the limit.
        let bomb = Array(buffer: Gzip.compress([UInt8](repeating: 0, count: 2_000_000)))
        #expect(bomb.count < 10_000)
        #expect(throws: Gzip.Failure.tooLarge) { try Gzip.decompress(bomb, maxOutput: 1024 * 1024) }
    }

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    static let dynamicVector = """
        1f8b08000000000002038599416ee6360c46af922358a4448a98d374318b01a6bbb6e72f8a98fea1e78a5a0a49ec7c22f9f891fef5d7cf3fbf\
        aeaf7ffef8fdf7cfafebc7afff8e7e1fdbf7b1ddc7fe7d9cf731be8f92bf6cdfe7b8cf32becf7a9ff5fe79cb97f5fb01fd3edbfdfc96ef9bf7fb\
        473ee1fe79be51ee3fb07ca07f9ff3052eab1c59e5685bf598ac8262ac825457417e41509355d050080a5b05f50e45d1a0485745d15745e35a25\
        4d281aab22f155d19caba2d1a148a0680614194334a0a841d1b45591d9aaa84f044956496dae9290748118cd01458ea4f30145aeab2267d6e55f\
        189e78e1958e7fa9adfff14e500a0e5c88e2c21e4579a31d37fe28ca980cc4ec5194513544fd425a38d2a621ad766937574599b48aa4fe804157\
        45414559370375f528caca3354e685d275947643e9efd090e888952c0af07c14f9aa48883a24dd64888ca843d229ca28e1db00e70dbbfb2aa7ad\
        725e9c5bc5504bac5a1a832328200512529bb32fe072e67a77ec0a81bbdf06078c53665b067f20391e418a6ccbec625f70f605a4ef447ab32b04\
        ea635b4059617d2dc08f2210210bf84384b92a4a02b02f38fb0210338120768500c3b6904b0a7650f29194181d2b653f9d15314a4ab32f38fb02\
        dac0c4995d21f0bc6d230a40ce0e821ec5822b31dc19fb82b32f20261331635708c47c6b162662f464d52eed26a97dad8a02599779efec0ba89b\
        89ba625708d4e5d6d0291bd138a041c96d0119d087924dcebeb0a26d827cec0a01726e2d77a2b793cd1b76d39fc2cc9173b072a01c7c0f822374\
        db40426a7bb4a4f8ce9eb9e9a9423179f9bbe080718a6c3338d300e314d9e6b03d8d7d6830dbec647b986d5deb021ab03df07106226401b32b04\
        08a020c487089cf04ed6b4bdaca9d5904b083a29098ace95b2ec0a014a2b28fe191f5040aea7f18166c1a36e4401c8592d48e14c3b626428a349\
        2434b8391d8711efe9f582b0efccc2448c9ebeb0493b0c4499b481a45624fda7b3d29ff6c3183e38e235a90d9db2118d1a0d0a6e63c473f4a104\
        d307db409d1e1625f6425dd4965b30b3362bd90d7f0a3347ced1ca8172f43d088ebcdcb6d5a390715a6d654f1588e95e07878c53649bd1990618\
        a7af85c2550fab83d96607db836ceb5a17d0a0ed818f3312210b78701f2020c06ea13039e11dac69a335b51a72cf12e902253b28dab09419dcd9\
        0828bd5bfa380ac8f5303ec02c78d48d2808393b085238d3ce1899d58bb90637a7a31ef126560a22b559988c91f821ed30103d692bc8ebedf294\
        feb4d763f8c088d7a43674fa6a44e3800605b739e2b9d40b6e01eab45e94185117b5e516ceaccd6a76c39fd2cc9173b072a05cbdc012ba6dab47\
        217b4dabadeea90231dd0fc101e314d96652af18950b85ab1e56c72bdbec647b906d5d0f0534607be0e36cd46be04923d7eb85c27c4d78276bda\
        684ded00b9a420fb8213a3ffbfab0fc4681e963efefafaa0a7f10166c1e3d0880290b35a103fa7747e4eb17a31d7e8e6741c46bc899582c8c12c\
        4cc448bc4e3b0c4499b44ceaedf2f4e54ffb610c1f18f19a1c0c9db2118d1a0dfc308911cfa55e700b51a7874589117571b0dc8299b559c96ef8\
        5398b9abfcf6402d71586009ddb61d4621e3b4daca9e2a10d3bd0e8efcf817789e3e60611f0000
        """
}
