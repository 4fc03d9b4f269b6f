import Foundation

/// The enqueue options the policy engine reads that `Job.Options` does not carry yet.
package struct PolicyInputs: Sendable, Hashable {
    /// `deliverAt`: the job waits until then. Default nil (now).
    package var deliverAt: Date?
    /// `geo`: reaches only users whose location circle covers it. Default nil (everyone).
    package var geo: GeoPoint?
    /// `requires`: device attributes that must match exactly, e.g. `["bluetooth": .bool(true)]`. Default empty.
    package var requires: [String: JSONValue]
    /// `scope`: the key of the category's per-scope quota, e.g. an org id. Default nil.
    package var scope: String?
    /// `coalesceKey`: jobs with the same key coalesce (and share a summary); nil uses the category. Default nil.
    package var coalesceKey: String?
    /// The job is itself a summary of folded jobs (`herald.outbox.summary_key` set): never coalesced or
    /// throttled again. Default false.
    package var isSummary: Bool

    package init(
        deliverAt: Date? = nil,
        geo: GeoPoint? = nil,
        requires: [String: JSONValue] = [:],
        scope: String? = nil,
        coalesceKey: String? = nil,
        isSummary: Bool = false
    ) {
        self.deliverAt = deliverAt
        self.geo = geo
        self.requires = requires
        self.scope = scope
        self.coalesceKey = coalesceKey
        self.isSummary = isSummary
    }

    /// Reads the `herald.outbox.options` jsonb text; malformed fields are ignored. `isSummary` is left false.
    package init(optionsJSON text: String) {
        let options = [String: JSONValue].parsing(text)
        self.init(
            deliverAt: options["deliverAt"]?.timestamp,
            geo: GeoPoint(options["geo"]),
            requires: options["requires"]?.members ?? [:],
            scope: options["scope"]?.string,
            coalesceKey: options["coalesceKey"]?.string
        )
    }
}
