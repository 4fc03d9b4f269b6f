import Foundation
import HeraldCore

/// A category's delivery rules (`herald.categories`), as the dispatcher needs them.
package struct CategoryRules: Sendable, Hashable {
    package var name: String
    package var appID: String
    package var priority: Priority
    /// Users cannot mute it.
    package var mandatory: Bool
    package var retry: RetryStrategy
    package var sound: String?
    package var interruptionLevel: String?
    package var apnsCategory: String?
    package var androidChannel: String?
    package var defaultRoute: String?
    package var silent: Bool
    /// Characters of the body a push shows (grapheme-safe, with "…"); nil: ``defaultPreviewChars``.
    /// The whole text is always in the user's inbox.
    package var previewChars: Int?
    /// The push preview when a category sets none: 100 characters (seed 000 "message preview
    /// (first 100 characters)"; seed 002 "preview text"). A category that wants whole bodies sets
    /// `preview_chars` up to 4,000.
    package static let defaultPreviewChars = 100
    /// Preferences, quiet hours, coalescing and rate limits for this category.
    package var policy: CategoryPolicy
    /// Time from enqueue by which a device should have accepted a job (`categories.deadline`);
    /// a critical job still undelivered then gets its in-app alert while push keeps retrying.
    package var deadline: Duration?

    package init(
        name: String,
        appID: String = "default",
        priority: Priority = .normal,
        mandatory: Bool = false,
        retry: RetryStrategy = RetryStrategy(),
        sound: String? = nil,
        interruptionLevel: String? = nil,
        apnsCategory: String? = nil,
        androidChannel: String? = nil,
        defaultRoute: String? = nil,
        silent: Bool = false,
        previewChars: Int? = nil,
        policy: CategoryPolicy? = nil,
        deadline: Duration? = nil
    ) {
        self.name = name
        self.appID = appID
        self.priority = priority
        self.mandatory = mandatory
        self.retry = retry
        self.sound = sound
        self.interruptionLevel = interruptionLevel
        self.apnsCategory = apnsCategory
        self.androidChannel = androidChannel
        self.defaultRoute = defaultRoute
        self.silent = silent
        self.previewChars = previewChars
        self.policy = policy ?? CategoryPolicy(name: name, mandatory: mandatory)
        self.deadline = deadline
    }
}
