import Dispatcher
import Foundation
import HeraldCore
import Queue
import Synchronization

extension Outbox {
    /// A claimed batch with everything the dispatcher needs about it: what the claim read
    /// (``ClaimedBatch``), turned into policy inputs.
    package struct Batch: Sendable {
        package var jobs: [Job]
        /// Per recipient: preferences, presence, active devices, recent sends, backlog, open summaries.
        package var recipients: [String: RecipientContext]
        package var categories: [String: CategoryRules]
        /// Unread inbox rows per recipient (the badge before this batch).
        package var unread: [String: Int]
        /// The oldest due time in the batch (epoch s), for the lag metric.
        package var oldestRunAt: Date?
        /// Per recipient: its jobs waiting to be sent again that this batch did not claim, oldest
        /// first. A device's newer jobs wait behind them.
        package var retrying: [String: [RetryingJob]]
        /// The bucket it was claimed from (its acknowledgement names it).
        package var bucket: Int
        /// Users with due critical jobs this (batch slot's) claim left to the critical lane.
        package var leftToLane: Int

        /// Active devices per recipient.
        package var devices: [String: [Device]] { recipients.mapValues(\.devices) }

        package init(_ claimed: ClaimedBatch) {
            jobs = claimed.jobs
            recipients = claimed.recipients.mapValues { stored in
                RecipientContext(
                    userID: stored.userID,
                    preferences: stored.preferencesJSON.map(Self.preferences) ?? Preferences(),
                    presence: stored.presence,
                    devices: stored.devices,
                    recentSends: stored.recentSends,
                    pending: stored.backlog,
                    openSummaries: stored.openSummaries
                )
            }
            categories = claimed.categories.mapValues(CategoryRules.init)
            unread = claimed.recipients.compactMapValues { $0.unread > 0 ? $0.unread : nil }
            oldestRunAt = claimed.oldestRunAt
            retrying = claimed.recipients.compactMapValues { $0.retrying.isEmpty ? nil : $0.retrying }
            bucket = claimed.bucket
            leftToLane = claimed.leftToLane
        }

        private static let parsedPreferences = Mutex<[String: Preferences]>([:])

        /// Parses a preferences document, remembering recent ones: the same users come back batch
        /// after batch, and parsing was the policy engine's largest CPU cost. Bounded: the cache is
        /// emptied when it passes 50,000 documents.
        static func preferences(_ json: String) -> Preferences {
            if let cached = parsedPreferences.withLock({ $0[json] }) { return cached }
            let parsed = Preferences(json: json)
            parsedPreferences.withLock { cache in
                if cache.count >= 50_000 { cache.removeAll(keepingCapacity: true) }
                cache[json] = parsed
            }
            return parsed
        }
    }
}

extension CategoryRules {
    /// The rules of a stored category.
    init(_ stored: StoredCategory) {
        self.init(
            name: stored.name,
            appID: stored.appID,
            priority: stored.priority,
            mandatory: stored.mandatory,
            retry: RetryStrategy(base: stored.backoffBase, cap: stored.backoffCap, maxAttempts: stored.maxAttempts),
            sound: stored.sound,
            interruptionLevel: stored.interruptionLevel,
            apnsCategory: stored.apnsCategory,
            androidChannel: stored.androidChannel,
            defaultRoute: stored.defaultRoute,
            silent: stored.silent,
            previewChars: stored.previewChars,
            policy: CategoryPolicy(
                name: stored.name,
                mandatory: stored.mandatory,
                optIn: stored.optIn,
                quietHours: stored.quietHours,
                coalesceJSON: stored.coalesceJSON,
                rateLimitJSON: stored.rateLimitJSON
            ),
            deadline: stored.deadline
        )
    }
}
