import Foundation
import HeraldCore
import Hummingbird
import Logging
import Queue

/// What each page shows (the views the templates render) and what each action does.
extension ConsoleServer {
    static let jobStates = [
        "pending", "running", "paused", "done", "dead", "suppressed", "summarized", "expired", "cancelled",
    ]
    static let providerNames = ["apns", "fcm", "expo", "webpush", "local"]

    // MARK: - Overview

    func overview() async throws -> [String: Any] {
        // One pass over the outbox (the cells); the totals, the lag and the jobs past a
        // deadline are sums over it.
        let cells = try await outbox.consoleCells()
        let activity = try await outbox.consoleActivity()
        let pauses = try await outbox.pauses()
        let deadlines = try await outbox.consoleDeadlines()
        let minutes = try await outbox.consoleThroughput()
        let states = circuits()
        let names = ["closed", "half-open", "open"]
        let peak = max(1, minutes.map(\.accepted).max() ?? 1)
        var jobs: [String: Int] = [:]
        var pastDeadline: [String: Int] = [:]
        for cell in cells {
            jobs[cell.state, default: 0] += cell.jobs
            pastDeadline[cell.category, default: 0] += cell.pastDeadline
        }
        let lag = cells.compactMap(\.oldestDueAge).max() ?? .zero
        return [
            "now": Self.timestamp(Date()),
            "depth": [
                "pendingDue": jobs["due", default: 0], "pendingScheduled": jobs["scheduled", default: 0],
                "running": jobs["running", default: 0], "paused": jobs["paused", default: 0],
                "deadLetters": activity.openDeadLetters,
            ],
            "lag": Self.span(lag), "lagWarning": lag > .seconds(60),
            "deadLetterWarning": activity.openDeadLetters > 0,
            "deliveredLastHour": activity.deliveredLastHour, "activeDevices": activity.activeDevices,
            "pauses": pauses.map(Self.pauseView),
            "providers": adapters.filter { $0.value != "off" }.keys.sorted().map { name -> [String: Any] in
                let state = states[name] ?? 0
                return [
                    "name": name, "adapter": adapters[name] ?? "", "circuit": names[min(max(state, 0), 2)],
                    "circuitClass": state == 0 ? "ok" : state == 1 ? "warn" : "bad",
                ]
            },
            "deadlines": deadlines.map { x -> [String: Any] in
                let waiting = pastDeadline[x.category, default: 0]
                let late = waiting > 0 || x.alertsLastHour > 0
                return [
                    "category": x.category, "deadline": Self.span(x.deadline), "waiting": waiting,
                    "delivered": x.deliveredLastHour, "alerts": x.alertsLastHour,
                    "status": late ? "missing" : "meeting", "statusClass": late ? "bad" : "ok",
                ]
            },
            "minutes": minutes.map {
                ["minute": $0.minute, "accepted": $0.accepted, "failed": $0.failed, "max": peak]
            },
            "depthCells": cells.map {
                ["appID": $0.appID, "category": $0.category, "state": $0.state, "jobs": $0.jobs]
            },
        ]
    }

    static func pauseView(_ p: Pause) -> [String: Any] {
        [
            "target": p.category.map { "category \($0)" } ?? p.appID.map { "app \($0)" } ?? "everything",
            "category": p.category ?? "", "app": p.appID ?? "",
            "until": p.until ?? "resumed", "by": p.pausedBy, "since": p.since,
        ]
    }

    // MARK: - Jobs

    func jobs(_ form: FormFields) async throws -> [String: Any] {
        let sinceHours = form["since"].flatMap { Double($0) } ?? 24
        let filter = ConsoleData.JobFilter(
            user: form["user"],
            category: form["category"],
            state: form["state"].flatMap { Self.jobStates.contains($0) ? $0 : nil },
            dedupKey: form["dedup"],
            since: Date() - sinceHours * 3600
        )
        let limit = 200
        let rows = try await outbox.consoleJobs(filter, limit: limit)
        let categories = try await outbox.consoleCategories()
        let sinces: [(String, String)] = [
            ("1", "last hour"), ("24", "last day"), ("168", "last week"), ("720", "last 30 days"),
        ]
        return [
            "filter": ["user": filter.user ?? "", "dedup": filter.dedupKey ?? ""],
            "categories": categories.map { ["name": $0.name, "selected": $0.name == filter.category] },
            "states": Self.jobStates.map { ["name": $0, "selected": $0 == filter.state] },
            "sinces": sinces.map { ["value": $0.0, "label": $0.1, "selected": Double($0.0) == sinceHours] },
            "count": rows.count, "limited": rows.count == limit, "limit": limit,
            "rows": rows.map { r -> [String: Any] in
                [
                    "id": r.id, "userID": r.userID, "userPath": r.userID.pathSegment, "category": r.category,
                    "state": r.state, "stateClass": Self.stateClass(r.state), "reason": r.reason, "at": r.at,
                ]
            },
        ]
    }

    func job(_ id: Int64) async throws -> [String: Any]? {
        let rows = try await outbox.explain(job: id)
        guard let first = rows.first, let last = rows.last else { return nil }
        let keys = [
            "time", "user", "category", "event", "provider", "outcome", "status", "reason", "attempt", "ms", "worker",
        ]
        return [
            "id": id, "userID": first[1], "userPath": first[1].pathSegment, "category": first[2],
            "state": last[6], "stateClass": Self.stateClass(last[6]),
            "records": rows.map { row in Dictionary(uniqueKeysWithValues: zip(keys, row)) },
        ]
    }

    // MARK: - A user

    func user(_ user: String) async throws -> [String: Any] {
        let devices = try await outbox.consoleDevices(user: user)
        let preferences = try await outbox.consolePreferences(user: user)
        let notifications = try await outbox.consoleNotifications(user: user, limit: 50)
        var suggestions: [String] = []
        var pending = 0
        if let json = try await outbox.diagnose(user: user),
            let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        {
            suggestions = (object["suggestions"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }
            pending = (object["pending"] as? NSNumber)?.intValue ?? 0
        }
        return [
            "userID": user, "userQuery": user.pathSegment,
            "pending": pending, "suggestions": suggestions,
            "devices": devices.map { d -> [String: Any] in
                [
                    "id": d.id, "provider": d.provider, "environment": d.environment, "appID": d.appID,
                    "tokenHash": d.tokenHash, "status": d.active ? "active" : "disabled: \(d.disabledReason)",
                    "statusClass": d.active ? "ok" : "bad", "permission": d.permission, "locale": d.locale,
                    "registeredAt": d.registeredAt,
                ]
            },
            "preferences": PreferencesInWords.describe(preferences),
            "notifications": notifications.map { n -> [String: Any] in
                [
                    "jobID": n.jobID, "category": n.category, "firstSeen": n.firstSeen, "event": n.event,
                    "provider": n.provider, "outcome": n.outcome, "status": n.status,
                    "statusClass": Self.stateClass(n.status), "reason": n.reason,
                ]
            },
        ]
    }

    // MARK: - Dead letters

    func deadLetters(_ form: FormFields) async throws -> [String: Any] {
        let filter = DeadLetterFilter(
            category: form["category"],
            reason: form["reason"],
            provider: form["provider"].flatMap { Self.providerNames.contains($0) ? $0 : nil }
        )
        let limit = 500
        let rows = try await outbox.deadLetters(limit: limit, includeReplayed: false, filter: filter)
        let categories = try await outbox.consoleCategories()
        return [
            "filter": ["reason": filter.reason ?? ""],
            "categories": categories.map { ["name": $0.name, "selected": $0.name == filter.category] },
            "providers": Self.providerNames.map { ["name": $0, "selected": $0 == filter.provider] },
            "count": rows.count, "limited": rows.count == limit, "limit": limit,
            "rows": rows.map { r -> [String: Any] in
                [
                    "id": r.id, "jobID": r.jobID, "userID": r.userID, "userPath": r.userID.pathSegment,
                    "category": r.category, "attempts": r.attempts, "lastError": r.lastError, "failedAt": r.failedAt,
                ]
            },
        ]
    }

    /// Replay or purge the selected dead letters: first a confirmation with the count, then the action.
    func deadLetterAction(_ form: FormFields, _ context: ConsoleContext) async throws -> Response {
        let ids = form.all("id").compactMap { Int64($0) }
        guard let action = form["action"], ["replay", "purge"].contains(action) else {
            return try message(.badRequest, "Nothing to do", "Choose replay or purge.", back: "/dead-letters", context)
        }
        guard !ids.isEmpty else {
            return try message(
                .badRequest,
                "Nothing selected",
                "Select at least one dead letter.",
                back: "/dead-letters",
                context
            )
        }
        let verb = action == "replay" ? "Replay" : "Purge"
        guard form["confirmed"] == "yes" else {
            let what =
                action == "replay"
                ? "as new jobs (fresh attempts, the same collapse id so devices replace rather than repeat)"
                : "for good (they cannot be replayed afterwards)"
            return try render(
                "confirm",
                [
                    "question": "\(verb) \(ids.count) dead letter(s) \(what)?", "action": "/dead-letters",
                    "button": "\(verb) \(ids.count)", "buttonClass": action == "purge" ? "danger" : "",
                    "back": "/dead-letters",
                    "fields": [["name": "action", "value": action]] + ids.map { ["name": "id", "value": String($0)] },
                ],
                context
            )
        }
        let done: Int
        if action == "replay" {
            done = try await outbox.replayDeadLetters(ids: ids).count
        } else {
            done = try await outbox.purgeDeadLetters(ids: ids, olderThan: .zero)
        }
        let target = "{\"dead_letters\":[\(ids.map(String.init).joined(separator: ","))]}"
        try await outbox.audit(
            actor: "console:\(context.account)",
            action: "dlq_\(action)",
            targetJSON: target,
            jobs: done
        )
        logger.notice(
            "Console action",
            metadata: [
                "console.user": "\(context.account)", "console.action": "dlq_\(action)", "console.count": "\(done)",
            ]
        )
        let result =
            action == "replay" ? "Replayed \(done) dead letter(s) as new jobs." : "Purged \(done) dead letter(s)."
        return try message(.ok, "Done", result, back: "/dead-letters", context, success: true)
    }

    // MARK: - Pause, resume, cancel

    func control() async throws -> [String: Any] {
        let categories = try await outbox.consoleCategories()
        return [
            "pauses": try await outbox.pauses().map(Self.pauseView),
            "categories": categories.map { ["name": $0.name] },
            "apps": Array(Set(categories.map(\.appID))).sorted(),
            "audit": try await outbox.auditLog(limit: 50).map { a -> [String: Any] in
                ["at": a.at, "actor": a.actor, "action": a.action, "targetJSON": a.targetJSON, "jobs": a.jobs]
            },
        ]
    }

    /// Pause, resume or cancel: first a confirmation that says how many jobs it touches, then the action.
    func controlAction(_ form: FormFields, _ context: ConsoleContext) async throws -> Response {
        // A scope narrows a cancel only.
        let category = form["category"]
        let app = form["app"]
        let scope = form["action"] == "cancel" ? form["scope"] : nil
        guard let action = form["action"], ["pause", "resume", "cancel"].contains(action) else {
            return try message(
                .badRequest,
                "Nothing to do",
                "Choose pause, resume or cancel.",
                back: "/control",
                context
            )
        }
        if category != nil && app != nil && action != "cancel" {
            return try message(
                .badRequest,
                "Choose one",
                "Give a category or an app, not both.",
                back: "/control",
                context
            )
        }
        if action == "cancel" && category == nil && app == nil && scope == nil {
            return try message(
                .badRequest,
                "Choose what to cancel",
                "Give a category, a scope or an app: cancelling everything at once is not offered.",
                back: "/control",
                context
            )
        }
        var minutes: Double?
        if action == "pause", let text = form["minutes"] {
            guard let m = Double(text), m > 0, m <= 525_600 else {
                return try message(
                    .badRequest,
                    "Not a duration",
                    "Minutes must be a positive number.",
                    back: "/control",
                    context
                )
            }
            minutes = m
        }
        // "category chat", "app foodshare, scope org-7", or "everything".
        let parts = [category.map { "category \($0)" }, app.map { "app \($0)" }, scope.map { "scope \($0)" }]
        let label = parts.compactMap { $0 }.joined(separator: ", ").nonEmpty ?? "everything"
        guard form["confirmed"] == "yes" else {
            let jobs = try await outbox.countPending(category: category, scope: scope, appID: app)
            let question: String
            switch action {
            case "pause":
                question =
                    "Pause \(label)\(minutes.map { " for \(Self.span(.seconds($0 * 60)))" } ?? " until resumed")? \(jobs) pending job(s) will be held (not lost); new ones wait too."
            case "resume":
                question = "Resume \(label)? Its \(jobs) pending job(s) become due again."
            default:
                question =
                    "Cancel \(jobs) pending job(s) of \(label)? Cancelled jobs are not sent; each is logged as cancelled."
            }
            var fields = [["name": "action", "value": action]]
            for (name, value) in [("category", category), ("app", app), ("scope", scope), ("minutes", form["minutes"])]
            {
                if let value { fields.append(["name": name, "value": value]) }
            }
            return try render(
                "confirm",
                [
                    "question": question, "action": "/control", "back": "/control", "fields": fields,
                    "button": action == "pause" ? "Pause" : action == "resume" ? "Resume" : "Cancel \(jobs) job(s)",
                    "buttonClass": action == "resume" ? "" : "danger",
                ],
                context
            )
        }
        let actor = "console:\(context.account)"
        let result: String
        let count: Int
        switch action {
        case "pause":
            let until = minutes.map { Date() + $0 * 60 }
            _ = try await outbox.pause(category: category, appID: app, until: until, actor: actor)
            count = try await outbox.holdPaused()
            result = "Paused \(label); \(count) pending job(s) held."
        case "resume":
            count = try await outbox.resume(category: category, appID: app, actor: actor)
            _ = try await outbox.releaseUnpaused()
            result = "Resumed \(label); \(count) job(s) released."
        default:
            count = try await outbox.cancelPending(category: category, scope: scope, appID: app, actor: actor)
            result = "Cancelled \(count) pending job(s) of \(label)."
        }
        logger.notice(
            "Console action",
            metadata: [
                "console.user": "\(context.account)", "console.action": "\(action)", "console.target": "\(label)",
                "console.count": "\(count)",
            ]
        )
        return try message(.ok, "Done", result, back: "/control", context, success: true)
    }

    // MARK: - Formatting

    static func stateClass(_ state: String) -> String {
        switch state {
        case "done": "ok"
        case "dead", "expired", "cancelled": "bad"
        case "pending", "running", "paused", "suppressed", "summarized": "warn"
        default: ""
        }
    }

    static func span(_ span: Duration) -> String {
        let s = span.seconds
        if s < 1 { return "\(Int((s * 1000).rounded())) ms" }
        if s < 120 { return "\(Int(s.rounded())) s" }
        if s < 7200 { return "\(Int((s / 60).rounded())) min" }
        return "\(Int((s / 3600).rounded())) h"
    }

    static func timestamp(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [
            .withFullDate, .withTime, .withColonSeparatorInTime, .withDashSeparatorInDate, .withSpaceBetweenDateAndTime,
        ]
        return f.string(from: date)
    }
}

extension String {
    /// Nil for the empty string.
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
