import Foundation
import HeraldCore

/// An Expo push ticket waiting for its receipt.
package struct ExpoTicket: Sendable, Hashable {
    /// Expo's ticket (receipt) id.
    package var ticketID: String
    package var deviceID: Int64
    package var jobID: Int64
    /// The Herald app the message went out for (selects the access token).
    package var appID: String
    /// The message as sent (JSON object text, `to` included), for a resend after
    /// `MessageRateExceeded`. Holds a device token: store it like the devices table, never log it.
    package var messageJSON: String
    /// 1 for the original send, +1 per resend.
    package var attempt: Int
    package var sentAt: Date
    /// When the receipt is (next) due to be checked.
    package var checkAt: Date

    package init(
        ticketID: String,
        deviceID: Int64,
        jobID: Int64,
        appID: String,
        messageJSON: String,
        attempt: Int = 1,
        sentAt: Date,
        checkAt: Date
    ) {
        self.ticketID = ticketID
        self.deviceID = deviceID
        self.jobID = jobID
        self.appID = appID
        self.messageJSON = messageJSON
        self.attempt = attempt
        self.sentAt = sentAt
        self.checkAt = checkAt
    }
}

extension ExpoTicket: CustomStringConvertible {
    /// Never includes the message (it holds the device token).
    package var description: String { "ExpoTicket(\(ticketID), device \(deviceID), job \(jobID), attempt \(attempt))" }
}

/// What the receipt poller decided for one ticket.
package struct ExpoTicketUpdate: Sendable, Hashable {
    package enum Resolution: Sendable, Hashable {
        /// Receipt `ok`: the ticket is done (and forgotten).
        case ok
        /// Receipt error other than a dead device; `reason` is lowercase snake_case. Kept for operators.
        case failed(reason: DeliveryOutcome.Reason)
        /// Receipt `DeviceNotRegistered`: the ticket fails and its device is disabled
        /// (`disabled_reason = device_not_registered`).
        case deviceNotRegistered
        /// No receipt yet (or the receipt request failed): look again at `at`.
        case recheck(at: Date)
        /// Resent after `MessageRateExceeded`: this ticket is done, `replacement` takes its place.
        case resent(replacement: ExpoTicket)
        /// No receipt within Expo's 24 h retention: given up on.
        case expired
    }

    package var ticketID: String
    package var deviceID: Int64
    package var resolution: Resolution

    package init(ticketID: String, deviceID: Int64, resolution: Resolution) {
        self.ticketID = ticketID
        self.deviceID = deviceID
        self.resolution = resolution
    }
}

/// Where Expo push tickets wait for their receipts (Postgres: `herald.expo_tickets`).
///
/// - Important: only one poller (the maintenance leader) reads due tickets at a time, so
///   ``due(at:limit:)`` does not lock rows; a second concurrent poller could check a ticket twice,
///   which is harmless except for a duplicate `MessageRateExceeded` resend.
package protocol ExpoReceiptStore: Sendable {
    /// Records the tickets of accepted messages, in one round trip. Ticket ids already known,
    /// and tickets whose device no longer exists, are ignored.
    func record(_ tickets: [ExpoTicket]) async throws
    /// Pending tickets whose `checkAt` is at or before `now`, oldest first, at most `limit`.
    func due(at now: Date, limit: Int) async throws -> [ExpoTicket]
    /// Applies the poller's decisions in one round trip: deletes finished tickets, records
    /// errors, reschedules, inserts replacements and disables dead devices.
    func settle(_ updates: [ExpoTicketUpdate]) async throws
}
