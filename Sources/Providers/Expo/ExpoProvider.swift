import AsyncHTTPClient
import Foundation
import HeraldCore
import Logging

/// Sends through the Expo push service: ≤ 100 messages per request, per app.
///
/// Tokens are checked for Expo's shape and messages for the 4096-byte limit before anything is
/// sent. Accepted messages get a ticket; when a ``ExpoReceiptStore`` is given, each ticket is
/// recorded there for ``ExpoReceiptPoller`` to read its receipt after `receiptDelay`.
package final class ExpoProvider: PushProvider {
    package let name = "expo"

    private let client: ExpoPushClient
    private let receipts: (any ExpoReceiptStore)?
    private let receiptDelay: Duration
    private let concurrency: Int
    private let now: @Sendable () -> Date

    package init(
        configuration: ExpoConfiguration,
        client: HTTPClient,
        requestTimeout: Duration,
        receipts: (any ExpoReceiptStore)?,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.client = ExpoPushClient(configuration: configuration, client: client, requestTimeout: requestTimeout)
        self.receipts = receipts
        self.receiptDelay = configuration.receiptDelay
        self.concurrency = max(1, configuration.maxConcurrentRequests)
        self.now = now
    }

    /// One request's worth of messages: indexes into the `send` input and their JSON.
    private struct Chunk: Sendable {
        var appID: String
        var indexes: [Int]
        var bodies: [[UInt8]]
    }

    package func send(_ messages: [PushMessage], gate: (any RequestGate)?, logger: Logger) async -> [DeliveryOutcome] {
        guard !messages.isEmpty else { return [] }
        let logger = {
            var logger = logger
            logger[metadataKey: "push.provider"] = "expo"
            return logger
        }()
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)

        // Refuse what Expo would refuse without a request; group the rest by app, in order.
        var chunks: [Chunk] = []
        var filling: [String: Int] = [:]  // app id -> index of its chunk being filled
        for (i, message) in messages.enumerated() {
            guard ExpoMessageEncoder.isExpoPushToken(message.device.token) else {
                outcomes[i] = DeliveryOutcome(.tokenInvalid, reason: .invalidTokenFormat)
                continue
            }
            guard let body = BodyFit.encode(message, ExpoMessageEncoder.encode) else {
                outcomes[i] = DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge)
                continue
            }
            let app = message.device.appID
            if let c = filling[app], chunks[c].indexes.count < ExpoPushClient.maxMessagesPerRequest {
                chunks[c].indexes.append(i)
                chunks[c].bodies.append(body)
            } else {
                filling[app] = chunks.count
                chunks.append(Chunk(appID: app, indexes: [i], bodies: [body]))
            }
        }

        // Chunks run concurrently (bounded), each one provider request.
        let requests = chunks
        let sent = await RequestDriver.send(
            messages,
            requests: requests.map(\.indexes),
            concurrency: concurrency,
            gate: gate
        ) { r in
            let answered = Dictionary(await self.sendChunk(requests[r], messages: messages, logger: logger)) { a, _ in a
            }
            return requests[r].indexes.map { answered[$0] ?? DeliveryOutcome(.retry, reason: .noOutcome) }
        }
        for (i, outcome) in sent.enumerated() where outcome != nil { outcomes[i] = outcome }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }

    private func sendChunk(_ chunk: Chunk, messages: [PushMessage], logger: Logger) async -> [(Int, DeliveryOutcome)] {
        let start = ContinuousClock.now
        let sentAt = now()
        let result = await client.send(chunk.bodies, appID: chunk.appID, logger: logger)
        let latency = ContinuousClock.now - start
        switch result {
        case .failed(var outcome):
            outcome.latency = latency
            if outcome.disposition == .credentialsBroken {
                logger.warning("Expo refused our access token", metadata: ["push.app": "\(chunk.appID)"])
            }
            return chunk.indexes.map { ($0, outcome) }
        case .mixedProjects:
            // Tokens of several Expo projects in one request: send each message on its own.
            logger.debug("Expo tokens span several projects; sending singly", metadata: ["push.app": "\(chunk.appID)"])
            var out: [(Int, DeliveryOutcome)] = []
            for (i, body) in zip(chunk.indexes, chunk.bodies) {
                out += await sendChunk(
                    Chunk(appID: chunk.appID, indexes: [i], bodies: [body]),
                    messages: messages,
                    logger: logger
                )
            }
            return out
        case .tickets(let tickets):
            var out: [(Int, DeliveryOutcome)] = []
            var records: [ExpoTicket] = []
            for (k, ticket) in tickets.enumerated() {
                let i = chunk.indexes[k]
                switch ticket {
                case .ok(let id):
                    out.append((i, DeliveryOutcome(.accepted, reason: .ok, latency: latency)))
                    records.append(
                        ExpoTicket(
                            ticketID: id,
                            deviceID: messages[i].device.id,
                            jobID: messages[i].jobID,
                            appID: chunk.appID,
                            messageJSON: String(decoding: chunk.bodies[k], as: UTF8.self),
                            attempt: 1,
                            sentAt: sentAt,
                            checkAt: sentAt.addingTimeInterval(receiptDelay.seconds)
                        )
                    )
                case .error(let code):
                    var outcome = ExpoErrorCode.outcome(code)
                    outcome.latency = latency
                    logger.debug(
                        "Expo ticket error",
                        metadata: [
                            "outbox.id": "\(messages[i].jobID)", "device.token_hash": "\(messages[i].device.tokenHash)",
                            "push.reason": "\(outcome.reason)",
                        ]
                    )
                    out.append((i, outcome))
                }
            }
            if let receipts, !records.isEmpty {
                do {
                    try await receipts.record(records)
                } catch {
                    // The messages are sent; only their receipts go unchecked.
                    logger.warning(
                        "Expo tickets could not be recorded",
                        metadata: ["error.type": "\(type(of: error))", "push.tickets": "\(records.count)"]
                    )
                }
            }
            return out
        }
    }
}
