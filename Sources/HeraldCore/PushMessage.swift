import Foundation

/// A notification rendered for one device, ready for its provider adapter.
///
/// The dispatcher fills every field from the job, its category and the device; adapters only
/// translate it into their wire format.
package struct PushMessage: Sendable {
    package var jobID: Int64
    package var device: Device
    package var title: String
    package var body: String
    package var subtitle: String?
    /// Deep link opened on tap (seed 001 `route`).
    package var route: String?
    /// The data payload every provider carries: `eventType`, `route`, `sentAtIso` (and `actions`,
    /// `summaryCount`, `distanceKm` when they apply).
    package var data: [String: String]
    /// The job's `metadata` (seed 001: a string map). Sent as an object where the platform allows
    /// (APNs custom key, Web Push JSON, Expo `data`), as one FCM `data` entry per key.
    package var metadata: [String: String]
    package var priority: Priority
    /// Replaces rather than repeats on the device; derived from the job when not given (≤ 64 bytes).
    package var collapseID: String
    /// The job asked for collapsing (its own `collapseId`, coalescing, a summary): only then does
    /// a provider that throttles collapsible messages (FCM `collapse_key`, Expo `collapseId`)
    /// get one. Replacement on screen (`tag`, `apns-collapse-id`) uses ``collapseID`` always.
    package var collapsible: Bool
    /// Background / data-only message.
    package var silent: Bool
    package var sound: String?
    package var threadID: String?
    package var imageURL: String?
    /// APNs category identifier (actions such as Reply).
    package var actionCategory: String?
    /// APNs interruption level: passive, active, time-sensitive, critical.
    package var interruptionLevel: String?
    package var androidChannel: String?
    package var badge: Int?
    /// When the provider should drop the message.
    package var expiresAt: Date
    /// For a summary: the folded jobs' ids, newest first (`summarizedIds`: a JSON array on APNs,
    /// Web Push and Expo, a comma-separated string in FCM `data`). Empty otherwise.
    package var summarizedIDs: [Int64] = []

    package init(
        jobID: Int64,
        device: Device,
        title: String,
        body: String,
        subtitle: String? = nil,
        route: String? = nil,
        data: [String: String] = [:],
        metadata: [String: String] = [:],
        priority: Priority = .normal,
        collapseID: String,
        collapsible: Bool = false,
        silent: Bool = false,
        sound: String? = nil,
        threadID: String? = nil,
        imageURL: String? = nil,
        actionCategory: String? = nil,
        interruptionLevel: String? = nil,
        androidChannel: String? = nil,
        badge: Int? = nil,
        expiresAt: Date
    ) {
        self.jobID = jobID
        self.device = device
        self.title = title
        self.body = body
        self.subtitle = subtitle
        self.route = route
        self.data = data
        self.metadata = metadata
        self.priority = priority
        self.collapseID = collapseID
        self.collapsible = collapsible
        self.silent = silent
        self.sound = sound
        self.threadID = threadID
        self.imageURL = imageURL
        self.actionCategory = actionCategory
        self.interruptionLevel = interruptionLevel
        self.androidChannel = androidChannel
        self.badge = badge
        self.expiresAt = expiresAt
    }
}
