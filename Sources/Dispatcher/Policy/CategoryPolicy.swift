import Foundation
import HeraldCore

/// A category's policy knobs (`herald.categories`: `mandatory`, `opt_in`, `quiet_hours`, `coalesce`, `rate_limit`).
///
/// Dedup is not here: `herald.enqueue` already enforces the category's window.
/// The two jsonb columns are parsed leniently; a malformed field keeps its default:
/// ```json
/// coalesce:   {"mode": "leading", "count": 3, "windowSeconds": 300, "summaryTitle": "New listings",
///              "summaryBody": "{count} new listings near you", "summaryRoute": "/listings", "summarizeAbove": 5}
/// rate_limit: {"perUser": {"max": 5, "windowSeconds": 600}, "perScope": {"max": 10, "windowSeconds": 86400},
///              "over": "summarize"}
/// ```
package struct CategoryPolicy: Sendable, Hashable {
    package var name: String
    /// Users cannot mute it: preferences and quiet hours do not apply, nor throttling. Default false.
    package var mandatory: Bool
    /// Off unless the user opted in (marketing). Default false.
    package var optIn: Bool
    /// What quiet hours do to a non-critical, non-mandatory job. Default `.defer`.
    package var quietHours: QuietHoursPolicy
    /// How bursts of this category merge (`coalesce.mode`). Default `.none`.
    package var coalescing: Coalescing
    /// How a summary of this category reads (`coalesce.summaryTitle`, `summaryBody`, `summaryRoute`).
    package var summary: SummaryTemplate
    /// More than this many of the user's jobs of this category due at once fold into one summary
    /// (`coalesce.summarizeAbove`, e.g. a night of deferred jobs). Nil: never. Default nil.
    package var summarizeAbove: Int?
    /// At most this many notifications to the user, of any category, per window (`rate_limit.perUser`). Default nil.
    package var perUser: RateLimit?
    /// At most this many of this category with the same `scope` per user and window (`rate_limit.perScope`).
    /// Default nil.
    package var perScope: RateLimit?
    /// What happens to a job over either limit (`rate_limit.over`). Default `.summarize`.
    package var overLimit: OverLimit

    package init(
        name: String,
        mandatory: Bool = false,
        optIn: Bool = false,
        quietHours: QuietHoursPolicy = .defer,
        coalescing: Coalescing = .none,
        summary: SummaryTemplate = SummaryTemplate(),
        summarizeAbove: Int? = nil,
        perUser: RateLimit? = nil,
        perScope: RateLimit? = nil,
        overLimit: OverLimit = .summarize
    ) {
        self.name = name
        self.mandatory = mandatory
        self.optIn = optIn
        self.quietHours = quietHours
        self.coalescing = coalescing
        self.summary = summary
        self.summarizeAbove = summarizeAbove
        self.perUser = perUser
        self.perScope = perScope
        self.overLimit = overLimit
    }

    /// Builds the policy from a `herald.categories` row: `quiet_hours` text and the two jsonb columns as text.
    package init(
        name: String,
        mandatory: Bool,
        optIn: Bool,
        quietHours: String,
        coalesceJSON: String,
        rateLimitJSON: String
    ) {
        let coalesce = [String: JSONValue].parsing(coalesceJSON)
        let limits = [String: JSONValue].parsing(rateLimitJSON)
        self.init(
            name: name,
            mandatory: mandatory,
            optIn: optIn,
            quietHours: QuietHoursPolicy(rawValue: quietHours) ?? .defer,
            coalescing: Coalescing(coalesce),
            summary: SummaryTemplate(coalesce),
            summarizeAbove: coalesce["summarizeAbove"]?.int.flatMap { $0 >= 1 ? $0 : nil },
            perUser: RateLimit(limits["perUser"]),
            perScope: RateLimit(limits["perScope"]),
            overLimit: limits["over"]?.string.flatMap(OverLimit.init(rawValue:)) ?? .summarize
        )
    }

    /// `herald.categories.quiet_hours`.
    package enum QuietHoursPolicy: String, Sendable, Hashable {
        /// Hold the job until the window ends.
        case `defer`
        /// Suppress it.
        case drop
        /// Send it anyway.
        case bypass
    }

    /// `rate_limit.over`.
    package enum OverLimit: String, Sendable, Hashable {
        /// Fold into one summary, sent when the window has room again.
        case summarize
        /// Drop, with reason `rate_limited` or `scope_quota`.
        case suppress
    }

    /// `coalesce.mode` with its parameters.
    package enum Coalescing: Sendable, Hashable {
        /// Every job goes out on its own (ride requests).
        case none
        /// The first `count` per `window` go out; the rest fold into one summary at the window's end.
        /// JSON defaults: count 3, windowSeconds 300 (seed 000 req 1.5).
        case leading(count: Int, window: Duration)
        /// Debounce: every job waits `window`; a newer one replaces it and restarts the wait.
        /// JSON default: windowSeconds 120 (seed 004 "Rapid updates").
        case trailing(window: Duration)

        init(_ json: [String: JSONValue]) {
            let window = json["windowSeconds"]?.number.flatMap { $0 > 0 ? Duration.seconds($0) : nil }
            switch json["mode"]?.string {
            case "leading":
                self = .leading(
                    count: json["count"]?.int.flatMap { $0 >= 1 ? $0 : nil } ?? 3,
                    window: window ?? .seconds(300)
                )
            case "trailing":
                self = .trailing(window: window ?? .seconds(120))
            default:
                self = .none
            }
        }
    }

    /// A sliding-window limit: at most `max` sends per `window`.
    package struct RateLimit: Sendable, Hashable {
        /// Sends allowed per window, at least 1.
        package var max: Int
        /// Window length (> 0).
        package var window: Duration

        package init(max: Int, window: Duration) {
            self.max = max
            self.window = window
        }

        /// Reads `{"max": 5, "windowSeconds": 600}`; nil unless both are valid.
        init?(_ json: JSONValue?) {
            guard let members = json?.members, let max = members["max"]?.int, max >= 1,
                let window = members["windowSeconds"]?.number, window > 0
            else { return nil }
            self.init(max: max, window: .seconds(window))
        }
    }

    /// How a summary reads. Placeholders: `{count}` (jobs folded), `{title}` and `{body}` (the
    /// latest job's), `{titles}` (the folded jobs' titles, newest first, as many as fit the preview).
    /// Per language: `coalesce.localized` `{"sv": {"title": …, "body": …}}` (or `summaryTitle`,
    /// `summaryBody`); a category that writes no `summaryBody` gets Herald's own words in the
    /// languages ``LocaleText/defaultSummaryBodies`` knows.
    package struct SummaryTemplate: Sendable, Hashable {
        /// Default `"{title}"`.
        package var title: String
        /// Default `"{count} new notifications"`; a trailing category defaults to
        /// `"Multiple updates received: {body}"` when `summaryBody` is absent.
        package var body: String
        /// The summary's deep link (a list rather than one item); nil uses the category's default route. Default nil.
        package var route: String?
        /// Title and body per locale tag; absent fields use ``title`` and ``body``.
        package var localized: [String: LocalizedText]

        package init(
            title: String = "{title}",
            body: String = "{count} new notifications",
            route: String? = nil,
            localized: [String: LocalizedText] = [:]
        ) {
            self.title = title
            self.body = body
            self.route = route
            self.localized = localized
        }

        init(_ json: [String: JSONValue]) {
            let trailing = json["mode"]?.string == "trailing"
            self.init(
                title: json["summaryTitle"]?.string ?? "{title}",
                body: json["summaryBody"]?.string ?? (trailing ? Self.trailingBody : Self.countBody),
                route: json["summaryRoute"]?.string,
                localized: LocalizedText.variants(json["localized"])
            )
        }

        static let countBody = "{count} new notifications"
        static let trailingBody = "Multiple updates received: {body}"

        /// Title and body templates for a device's locale.
        package func text(for locale: String?) -> (title: String, body: String) {
            let variant = LocaleText.best(for: locale, in: localized)
            var body = variant?.body ?? body
            // Herald's own words (a category that wrote no summaryBody) in the device's language.
            if variant?.body == nil, body == Self.countBody || body == Self.trailingBody,
                let words = LocaleText.best(for: locale, in: LocaleText.defaultSummaryBodies)
            {
                body = body == Self.countBody ? words.count : words.trailing
            }
            return (variant?.title ?? title, body)
        }
    }
}
