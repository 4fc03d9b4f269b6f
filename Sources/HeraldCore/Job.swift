import Foundation

/// One claimed outbox row: what to tell which user, and where it stands.
package struct Job: Sendable {
    package var id: Int64
    package var userID: String
    package var category: String
    package var priority: Priority
    package var payload: Payload
    package var options: Options
    /// The attempt now running (1 for the first).
    package var attempt: Int
    package var maxAttempts: Int
    /// Devices that already accepted this job on an earlier attempt: never sent again.
    package var acceptedDevices: Set<Int64>
    package var createdAt: Date
    package var expiresAt: Date
    /// The options the policy engine reads (schedule, geo, required attributes, scope, coalescing).
    package var inputs: PolicyInputs
    /// For a summary job: how many folded notifications it stands for (0 for an ordinary job).
    package var summaryCount: Int
    /// For a summary job: the folded jobs' ids and titles, newest first (the latest 50).
    package var summarized: [SummarizedItem]
    /// When its in-app alert was written because its category's deadline passed; nil while none was.
    package var alertedAt: Date?

    package init(
        id: Int64,
        userID: String,
        category: String,
        priority: Priority,
        payload: Payload,
        options: Options = Options(),
        attempt: Int = 1,
        maxAttempts: Int = 5,
        acceptedDevices: Set<Int64> = [],
        createdAt: Date,
        expiresAt: Date,
        inputs: PolicyInputs = PolicyInputs(),
        summaryCount: Int = 0,
        alertedAt: Date? = nil,
        summarized: [SummarizedItem] = []
    ) {
        self.id = id
        self.userID = userID
        self.category = category
        self.priority = priority
        self.payload = payload
        self.options = options
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.acceptedDevices = acceptedDevices
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.inputs = inputs
        self.summaryCount = summaryCount
        self.alertedAt = alertedAt
        self.summarized = summarized
    }

    /// One job folded into a summary.
    package struct SummarizedItem: Sendable, Hashable {
        package var id: Int64
        package var title: String

        package init(id: Int64, title: String) {
            self.id = id
            self.title = title
        }
    }

    /// The seed 001 payload.
    package struct Payload: Sendable, Hashable {
        package var title: String
        package var body: String
        package var subtitle: String?
        package var route: String?
        /// `metadata` as JSON text (a string map), when present.
        package var metadataJSON: String?
        package var eventType: String?
        package var imageURL: String?
        package var sound: String?
        package var threadID: String?
        /// The backend's own `sentAtIso`, when it gave one (else the send time is used).
        package var sentAtIso: String?
        /// `actions` as JSON text (an array), carried to the client in the data payload.
        package var actionsJSON: String?
        /// Per-locale title, body and subtitle (`localized`), keyed by BCP 47 tag as given.
        package var localized: [String: LocalizedText]

        package init(
            title: String,
            body: String,
            subtitle: String? = nil,
            route: String? = nil,
            metadataJSON: String? = nil,
            eventType: String? = nil,
            imageURL: String? = nil,
            sound: String? = nil,
            threadID: String? = nil,
            sentAtIso: String? = nil,
            actionsJSON: String? = nil,
            localized: [String: LocalizedText] = [:]
        ) {
            self.title = title
            self.body = body
            self.subtitle = subtitle
            self.route = route
            self.metadataJSON = metadataJSON
            self.eventType = eventType
            self.imageURL = imageURL
            self.sound = sound
            self.threadID = threadID
            self.sentAtIso = sentAtIso
            self.actionsJSON = actionsJSON
            self.localized = localized
        }
    }

    /// The enqueue options the delivery path reads.
    package struct Options: Sendable, Hashable {
        package var collapseID: String?
        package var silent: Bool?
        package var dedupKey: String?
        package var context: String?
        package var mandatory: Bool?
        /// A device that must not receive this job (the one that caused a badge/dismiss sync).
        package var excludeDevice: Int64?
        /// The W3C `traceparent` the enqueuer passed: the job's spans continue that trace.
        package var traceparent: String?

        package init(
            collapseID: String? = nil,
            silent: Bool? = nil,
            dedupKey: String? = nil,
            context: String? = nil,
            mandatory: Bool? = nil,
            excludeDevice: Int64? = nil,
            traceparent: String? = nil
        ) {
            self.traceparent = traceparent
            self.collapseID = collapseID
            self.silent = silent
            self.dedupKey = dedupKey
            self.context = context
            self.mandatory = mandatory
            self.excludeDevice = excludeDevice
        }
    }
}
