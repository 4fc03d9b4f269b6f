import AsyncHTTPClient
import Foundation
import HeraldCore
import Logging

/// Reads the receipts of due Expo tickets and acts on them: one ``pollOnce(logger:)`` per tick of
/// the maintenance leader.
///
/// `DeviceNotRegistered` disables the device; `MessageRateExceeded` resends the stored message
/// (at most ``maxAttempts`` sends in all); other errors are recorded and logged; `ok` finishes
/// the ticket. A ticket without a receipt is looked at again after ``recheckInterval`` until
/// Expo's 24-hour retention has passed.
package struct ExpoReceiptPoller: Sendable {
    /// Sends per message, the original included, before `MessageRateExceeded` is given up on. Default 3.
    package var maxAttempts: Int = 3
    /// Wait before a ticket without a receipt (or whose receipt request failed) is checked again. Default 5 min.
    package var recheckInterval: Duration = .seconds(5 * 60)
    /// Age after which a ticket without a receipt is given up on (Expo keeps receipts 24 h). Default 24 h.
    package var receiptLifetime: Duration = .seconds(24 * 3600)
    /// Tickets read per pass (Expo takes 1,000 ids per receipts request). Default 1000.
    package var batchSize: Int = 1000

    private let client: ExpoPushClient
    private let store: any ExpoReceiptStore
    private let receiptDelay: Duration
    private let now: @Sendable () -> Date

    package init(
        configuration: ExpoConfiguration,
        client: HTTPClient,
        requestTimeout: Duration,
        store: any ExpoReceiptStore,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.client = ExpoPushClient(configuration: configuration, client: client, requestTimeout: requestTimeout)
        self.store = store
        self.receiptDelay = configuration.receiptDelay
        self.now = now
    }

    /// One pass over at most ``batchSize`` due tickets. Never throws: a store failure logs and
    /// returns zeros; a failed receipts request reschedules its tickets.
    ///
    /// - Returns: tickets checked, devices disabled, messages resent.
    package func pollOnce(logger: Logger) async -> (checked: Int, disabled: Int, resent: Int) {
        var logger = logger
        logger[metadataKey: "push.provider"] = "expo"
        let due: [ExpoTicket]
        do {
            due = try await store.due(at: now(), limit: max(1, batchSize))
        } catch {
            logger.warning("Expo tickets could not be read", metadata: ["error.type": "\(type(of: error))"])
            return (0, 0, 0)
        }
        guard !due.isEmpty else { return (0, 0, 0) }

        var updates: [ExpoTicketUpdate] = []
        var toResend: [ExpoTicket] = []
        var disabled = 0
        let byApp = Dictionary(grouping: due, by: \.appID)
        for appID in byApp.keys.sorted() {
            let tickets = byApp[appID] ?? []
            var start = 0
            while start < tickets.count {
                let batch = Array(tickets[start..<min(start + ExpoPushClient.maxReceiptIDsPerRequest, tickets.count)])
                start += batch.count
                let receipts: [String: ExpoPushClient.Receipt]
                do {
                    receipts = try await client.receipts(batch.map(\.ticketID), appID: appID, logger: logger)
                } catch {
                    let reason = (error as? ExpoRequestError)?.outcome.reason ?? .connectionError
                    logger.warning("Expo receipts request failed", metadata: ["push.reason": "\(reason)"])
                    let at = now().addingTimeInterval(recheckInterval.seconds)
                    updates += batch.map {
                        ExpoTicketUpdate(ticketID: $0.ticketID, deviceID: $0.deviceID, resolution: .recheck(at: at))
                    }
                    continue
                }
                for ticket in batch {
                    switch receipts[ticket.ticketID] {
                    case nil:
                        let resolution: ExpoTicketUpdate.Resolution =
                            now().timeIntervalSince(ticket.sentAt) >= receiptLifetime.seconds
                            ? .expired : .recheck(at: now().addingTimeInterval(recheckInterval.seconds))
                        updates.append(
                            ExpoTicketUpdate(
                                ticketID: ticket.ticketID,
                                deviceID: ticket.deviceID,
                                resolution: resolution
                            )
                        )
                    case .ok:
                        updates.append(
                            ExpoTicketUpdate(ticketID: ticket.ticketID, deviceID: ticket.deviceID, resolution: .ok)
                        )
                    case .error(let code):
                        let outcome = ExpoErrorCode.outcome(code)
                        logger.debug(
                            "Expo receipt error",
                            metadata: [
                                "outbox.id": "\(ticket.jobID)", "device.id": "\(ticket.deviceID)",
                                "push.reason": "\(outcome.reason)",
                            ]
                        )
                        if code == "DeviceNotRegistered" {
                            disabled += 1
                            updates.append(
                                ExpoTicketUpdate(
                                    ticketID: ticket.ticketID,
                                    deviceID: ticket.deviceID,
                                    resolution: .deviceNotRegistered
                                )
                            )
                        } else if code == "MessageRateExceeded", ticket.attempt < maxAttempts {
                            toResend.append(ticket)
                        } else {
                            if outcome.disposition == .credentialsBroken {
                                logger.warning(
                                    "Expo receipt reports broken push credentials",
                                    metadata: ["push.app": "\(appID)", "push.reason": "\(outcome.reason)"]
                                )
                            }
                            updates.append(
                                ExpoTicketUpdate(
                                    ticketID: ticket.ticketID,
                                    deviceID: ticket.deviceID,
                                    resolution: .failed(reason: outcome.reason)
                                )
                            )
                        }
                    }
                }
            }
        }

        let (resendUpdates, resent) = await resend(toResend, logger: logger)
        updates += resendUpdates
        disabled += resendUpdates.filter { $0.resolution == .deviceNotRegistered }.count
        do {
            try await store.settle(updates)
        } catch {
            logger.warning("Expo ticket results could not be saved", metadata: ["error.type": "\(type(of: error))"])
        }
        return (due.count, disabled, resent)
    }

    /// Resends `MessageRateExceeded` messages (their stored JSON), per app in ≤ 100-message requests.
    private func resend(_ tickets: [ExpoTicket], logger: Logger) async -> ([ExpoTicketUpdate], Int) {
        var updates: [ExpoTicketUpdate] = []
        var resent = 0
        let current = now()
        var live: [ExpoTicket] = []
        for ticket in tickets {
            // A message past its own expiration is not worth another try.
            let object = (try? JSONSerialization.jsonObject(with: Data(ticket.messageJSON.utf8))) as? [String: Any]
            if let expiration = JSONNumber.double(object?["expiration"]), expiration <= current.timeIntervalSince1970 {
                updates.append(
                    ExpoTicketUpdate(
                        ticketID: ticket.ticketID,
                        deviceID: ticket.deviceID,
                        resolution: .failed(reason: .expired)
                    )
                )
            } else {
                live.append(ticket)
            }
        }
        let byApp = Dictionary(grouping: live, by: \.appID)
        for appID in byApp.keys.sorted() {
            let group = byApp[appID] ?? []
            var start = 0
            while start < group.count {
                let batch = Array(group[start..<min(start + ExpoPushClient.maxMessagesPerRequest, group.count)])
                start += batch.count
                let sentAt = now()
                let result = await client.send(batch.map { Array($0.messageJSON.utf8) }, appID: appID, logger: logger)
                switch result {
                case .tickets(let tickets):
                    for (old, ticket) in zip(batch, tickets) {
                        switch ticket {
                        case .ok(let id):
                            resent += 1
                            var replacement = old
                            replacement.ticketID = id
                            replacement.attempt = old.attempt + 1
                            replacement.sentAt = sentAt
                            replacement.checkAt = sentAt.addingTimeInterval(receiptDelay.seconds)
                            updates.append(
                                ExpoTicketUpdate(
                                    ticketID: old.ticketID,
                                    deviceID: old.deviceID,
                                    resolution: .resent(replacement: replacement)
                                )
                            )
                        case .error(let code):
                            let resolution: ExpoTicketUpdate.Resolution =
                                code == "DeviceNotRegistered"
                                ? .deviceNotRegistered : .failed(reason: ExpoErrorCode.outcome(code).reason)
                            updates.append(
                                ExpoTicketUpdate(ticketID: old.ticketID, deviceID: old.deviceID, resolution: resolution)
                            )
                        }
                    }
                case .failed, .mixedProjects:
                    // Try again on a later pass; the attempt is not used up.
                    let at = now().addingTimeInterval(recheckInterval.seconds)
                    updates += batch.map {
                        ExpoTicketUpdate(ticketID: $0.ticketID, deviceID: $0.deviceID, resolution: .recheck(at: at))
                    }
                }
            }
        }
        return (updates, resent)
    }
}
