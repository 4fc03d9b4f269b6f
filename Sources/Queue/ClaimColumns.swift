import Foundation
import HeraldCore

/// The fields of one kind of record the claim returns, by name.
///
/// The SQL expression of each field and the reader's index come from the same enum case, so a
/// field cannot be read from another's place.
protocol RecordColumns: RawRepresentable, CaseIterable where RawValue == Int, AllCases == [Self] {
    /// The SQL expression of this field.
    var sql: String { get }
}

extension RecordColumns {
    /// `ROW(…)` of this kind's fields, in the enum's order.
    static func row() -> String {
        precondition(allCases.enumerated().allSatisfy { $0.offset == $0.element.rawValue })
        return "ROW(" + allCases.map(\.sql).joined(separator: ", ") + ")"
    }
}

/// The columns of one kind of claim row, by name.
///
/// The claim (``OutboxStatements/claim``) returns jobs, devices, categories and each recipient's
/// context in one result of two columns: the kind (`j`, `d`, …) and the row as one composite
/// value, whose fields are the kind's enum cases in order. No kind is padded to another's width.
protocol ClaimColumns: RecordColumns {
    /// The value of the first column for this kind.
    static var kind: String { get }
}

extension ClaimColumns {
    /// The select list of this kind's rows: `kind, record`.
    static func selectList() -> String {
        "SELECT '\(kind)'::text AS kind, \(row())::text AS record"
    }
}

/// Reads one record by field name.
struct ClaimReader<Column: RecordColumns> {
    let fields: [String?]

    /// - Parameter record: the text of a composite value of `Column`'s fields.
    init(record: String?) {
        fields = record.map { PostgresText.recordFields($0, expected: Column.allCases.count) } ?? []
        assert(record == nil || fields.count == Column.allCases.count, "\(Column.self): \(fields.count) fields")
    }

    func string(_ column: Column) -> String? { column.rawValue < fields.count ? fields[column.rawValue] : nil }
    func int(_ column: Column) -> Int? { string(column).flatMap { Int($0) } }
    func int64(_ column: Column) -> Int64? { string(column).flatMap { Int64($0) } }
    func double(_ column: Column) -> Double? { string(column).flatMap { Double($0) } }
    func bool(_ column: Column) -> Bool? { string(column).map { $0 == "t" || $0 == "true" } }
}

/// A claimed job (`j`): an outbox row with its payload and options unpacked.
enum JobColumn: Int, ClaimColumns {
    case id = 0
    case userID, category, priority, attempt, maxAttempts, createdAt, expiresAt, acceptedDevices
    case title, body, subtitle, route, metadata, eventType, imageURL, sound, threadID
    case collapseID, silent, dedupKey, context, mandatory, runAt, summaryKey, summaryCount
    case geoLat, geoLon, requires, scope, coalesceKey, deliverAt, excludeDevice
    case sentAtIso, actions, alertedAt, summarizedIDs, summarizedTitles, localized, traceparent

    static let kind = "j"

    var sql: String {
        switch self {
        case .id: "id::text"
        case .userID: "user_id"
        case .category: "category"
        case .priority: "priority::text"
        case .attempt: "attempt::text"
        case .maxAttempts: "max_attempts::text"
        case .createdAt: "date_part('epoch', created_at)::text"
        case .expiresAt: "date_part('epoch', expires_at)::text"
        case .acceptedDevices: "accepted_devices::text"
        case .title: "payload->>'title'"
        case .body: "payload->>'body'"
        case .subtitle: "payload->>'subtitle'"
        case .route: "payload->>'route'"
        case .metadata: "(payload->'metadata')::text"
        case .eventType: "payload->>'eventType'"
        case .imageURL: "payload->>'imageUrl'"
        case .sound: "payload->>'sound'"
        case .threadID: "payload->>'threadId'"
        case .collapseID: "options->>'collapseId'"
        case .silent: "options->>'silent'"
        case .dedupKey: "dedup_key"
        case .context: "options->>'context'"
        case .mandatory: "options->>'mandatory'"
        case .runAt: "date_part('epoch', run_at)::text"
        case .summaryKey: "summary_key"
        case .summaryCount: "summary_count::text"
        case .geoLat: "options->'geo'->>'lat'"
        case .geoLon: "options->'geo'->>'lon'"
        case .requires: "(options->'requires')::text"
        case .scope: "options->>'scope'"
        case .coalesceKey: "options->>'coalesceKey'"
        case .deliverAt: "date_part('epoch', (options->>'deliverAt')::timestamptz)::text"
        case .excludeDevice: "options->>'excludeDevice'"
        case .sentAtIso: "payload->>'sentAtIso'"
        case .actions: "(payload->'actions')::text"
        case .alertedAt: "date_part('epoch', alerted_at)::text"
        case .summarizedIDs: "summarized_ids::text"
        case .summarizedTitles: "to_json(summarized_titles)::text"
        case .localized: "(payload->'localized')::text"
        case .traceparent: "options->>'traceparent'"
        }
    }
}

/// An active device of a claimed recipient (`d`), from `herald.devices d`.
enum DeviceColumn: Int, ClaimColumns {
    case id = 0
    case userID, provider, token, appID, environment, p256dh, auth, locale, timeZone, attributes
    case registeredAt

    static let kind = "d"

    var sql: String {
        switch self {
        case .id: "d.id::text"
        case .userID: "d.user_id"
        case .provider: "d.provider"
        case .token: "d.token"
        case .appID: "d.app_id"
        case .environment: "d.environment"
        case .p256dh: "d.p256dh"
        case .auth: "d.auth"
        case .locale: "d.locale"
        case .timeZone: "d.time_zone"
        case .attributes: "d.attributes::text"
        case .registeredAt: "date_part('epoch', d.registered_at)::text"
        }
    }
}

/// A category of a claimed job (`c`), from `herald.categories k`.
enum CategoryColumn: Int, ClaimColumns {
    case name = 0
    case appID, priority, mandatory, backoffBase, backoffCap, maxAttempts, sound
    case interruptionLevel, apnsCategory, androidChannel, defaultRoute, silent, optIn, quietHours
    case coalesce, rateLimit, previewChars, deadline

    static let kind = "c"

    var sql: String {
        switch self {
        case .name: "k.name"
        case .appID: "k.app_id"
        case .priority: "k.priority"
        case .mandatory: "k.mandatory::text"
        case .backoffBase: "extract(epoch FROM k.backoff_base)::text"
        case .backoffCap: "extract(epoch FROM k.backoff_cap)::text"
        case .maxAttempts: "k.max_attempts::text"
        case .sound: "k.sound"
        case .interruptionLevel: "k.interruption_level"
        case .apnsCategory: "k.apns_category"
        case .androidChannel: "k.android_channel"
        case .defaultRoute: "k.default_route"
        case .silent: "k.silent::text"
        case .optIn: "k.opt_in::text"
        case .quietHours: "k.quiet_hours"
        case .coalesce: "k.coalesce::text"
        case .rateLimit: "k.rate_limit::text"
        case .previewChars: "k.preview_chars::text"
        case .deadline: "extract(epoch FROM k.deadline)::text"
        }
    }
}

/// A recipient's preferences document (`p`), from `herald.preferences p`.
enum PreferencesColumn: Int, ClaimColumns {
    case userID = 0
    case document
    static let kind = "p"
    var sql: String {
        switch self {
        case .userID: "p.user_id"
        case .document: "p.preferences::text"
        }
    }
}

/// One live presence context of a recipient (`r`), from `herald.presence r`.
enum PresenceColumn: Int, ClaimColumns {
    case userID = 0
    case context
    static let kind = "r"
    var sql: String {
        switch self {
        case .userID: "r.user_id"
        case .context: "r.context"
        }
    }
}

/// A recipient's recent sends (`s`): those of the user's window (`reach` seconds back), an array
/// of ``SentColumn`` records, oldest first; how many the row keeps (`size`) and the oldest it
/// keeps (`oldest`, epoch seconds), to tell whether they are every send of the window (below
/// ``OutboxStatements/historyLimit``, or the oldest at or before the window's start).
enum SendsColumn: Int, ClaimColumns {
    case userID = 0
    case sends, size, oldest, reach
    static let kind = "s"
    var sql: String {
        switch self {
        case .userID: "u.user_id"
        case .sends: "h.sends"
        case .size: "h.size::text"
        case .oldest: "date_part('epoch', h.oldest)::text"
        case .reach: "n.reach::text"
        }
    }
}

/// One recent send of a recipient, from `recipients.sends` (`herald.recent_send i`).
enum SentColumn: Int, RecordColumns {
    case category = 0
    case coalesceKey, scope, at
    var sql: String {
        switch self {
        case .category: "i.category"
        case .coalesceKey: "i.coalesce_key"
        case .scope: "i.scope"
        case .at: "date_part('epoch', i.at)::text"
        }
    }
}

/// How many users a batch slot's claim left to the critical lane (`q`, ``OutboxStatements/laneUsers``):
/// one row, only when it left any. The slot then signals the lane.
enum LaneUsersColumn: Int, ClaimColumns {
    case count = 0
    static let kind = "q"
    var sql: String { "cardinality(l.users)::text" }
}

/// A recipient's unread count, the badge before this batch (`u`), from the `held` recipients.
enum UnreadColumn: Int, ClaimColumns {
    case userID = 0
    case count
    static let kind = "u"
    var sql: String {
        switch self {
        case .userID: "h.user_id"
        case .count: "h.unread::text"
        }
    }
}

/// A recipient's due backlog in one category (`b`).
enum BacklogColumn: Int, ClaimColumns {
    case userID = 0
    case category, count
    static let kind = "b"
    var sql: String {
        switch self {
        case .userID: "u.user_id"
        case .category: "q.category"
        case .count: "q.n::text"
        }
    }
}

/// An open (pending) summary of a recipient (`o`).
enum OpenSummaryColumn: Int, ClaimColumns {
    case userID = 0
    case category, key, dueAt
    static let kind = "o"
    var sql: String {
        switch self {
        case .userID: "u.user_id"
        case .category: "q.category"
        case .key: "q.summary_key"
        case .dueAt: "date_part('epoch', q.run_at)::text"
        }
    }
}

/// A job of a claimed recipient that waits to be sent again (`w`): its newer jobs wait behind it
/// on every device that has not accepted it.
enum RetryingColumn: Int, ClaimColumns {
    case userID = 0
    case jobID, priority, runAt, acceptedDevices
    static let kind = "w"
    var sql: String {
        switch self {
        case .userID: "u.user_id"
        case .jobID: "q.id::text"
        case .priority: "q.priority::text"
        case .runAt: "date_part('epoch', q.run_at)::text"
        case .acceptedDevices: "q.accepted_devices::text"
        }
    }
}

/// Where this claim's walk of an app's scopes ended (`l`), and how many scopes it walked: the next
/// claim of the same worker starts after it, so every scope with pending jobs gets its turn
/// (``OutboxStatements/claimWithScopeTurns``).
enum ScopeCursorColumn: Int, ClaimColumns {
    case appID = 0
    case scope, scopes
    static let kind = "l"
    var sql: String {
        switch self {
        case .appID: "l.app_id"
        case .scope: "l.scope"
        case .scopes: "l.lanes::text"
        }
    }
}
