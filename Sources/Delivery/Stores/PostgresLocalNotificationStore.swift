import HeraldCore
import Providers
import Queue

/// Writes the local-fallback provider's recordings in one statement per batch.
package struct PostgresLocalNotificationStore: LocalNotificationStore {
    let pool: PostgresPool
    package init(pool: PostgresPool) { self.pool = pool }

    package func record(_ messages: [PushMessage]) async throws {
        var jobs: [Int64] = [], devices: [Int64] = [], users: [String?] = [], titles: [String?] = []
        var bodies: [String?] = [], subtitles: [String?] = [], routes: [String?] = [], data: [String?] = []
        var collapse: [String?] = []
        for m in messages {
            jobs.append(m.jobID)
            devices.append(m.device.id)
            users.append(m.device.userID)
            titles.append(m.title)
            bodies.append(m.body)
            subtitles.append(m.subtitle)
            routes.append(m.route)
            data.append(JSONText.object(m.data, metadata: m.metadata))
            collapse.append(m.collapseID)
        }
        _ = try await pool.query(
            OutboxStatements.recordLocal,
            [
                PostgresArray.encode(jobs), PostgresArray.encode(devices), PostgresArray.encode(users),
                PostgresArray.encode(titles), PostgresArray.encode(bodies), PostgresArray.encode(subtitles),
                PostgresArray.encode(routes), PostgresArray.encode(data), PostgresArray.encode(collapse),
            ])
    }
}
