/// A title, body and subtitle in one language (a payload's `localized` entry, or a category's
/// `coalesce.localized` summary template). Absent fields fall back to the default text.
package struct LocalizedText: Sendable, Hashable {
    package var title: String?
    package var body: String?
    package var subtitle: String?

    package init(title: String? = nil, body: String? = nil, subtitle: String? = nil) {
        self.title = title
        self.body = body
        self.subtitle = subtitle
    }

    /// Reads `{"sv": {"title": …, "body": …, "subtitle": …}, …}`; `titleKey`/`bodyKey` name the
    /// fields (a summary template also accepts `summaryTitle`/`summaryBody`). Malformed entries
    /// are skipped (enqueue already refused them).
    package static func variants(_ json: JSONValue?) -> [String: LocalizedText] {
        guard let members = json?.members, !members.isEmpty else { return [:] }
        var variants: [String: LocalizedText] = [:]
        for (tag, value) in members {
            let fields = value.members
            let text = LocalizedText(
                title: fields["title"]?.string ?? fields["summaryTitle"]?.string,
                body: fields["body"]?.string ?? fields["summaryBody"]?.string,
                subtitle: fields["subtitle"]?.string
            )
            if text.title != nil || text.body != nil || text.subtitle != nil { variants[tag] = text }
        }
        return variants
    }
}
