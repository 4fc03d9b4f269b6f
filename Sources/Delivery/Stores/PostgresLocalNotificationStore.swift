import Foundation
import HeraldCore
import Providers
import Queue

/// Writes the local-fallback provider's recordings in one statement per batch.
package struct PostgresLocalNotificationStore: LocalNotificationStore {
    let pool: PostgresPool
    package init(pool: PostgresPool) { self.pool = pool }

    package func record(_ messages: [PushMessage]) async throws {
        var records = PostgresRecords(OutboxStatements.localRecord)
        for m in messages {
            records.row {
                $0.field("job_id", m.jobID)
                $0.field("device_id", m.device.id)
                $0.field("user_id", m.device.userID)
                $0.field("title", m.title)
                $0.field("body", m.body)
                $0.field("subtitle", m.subtitle)
                $0.field("route", m.route)
                $0.field("data", JSONText.object(m.data, metadata: m.metadata))
                $0.field("collapse_id", m.collapseID)
            }
        }
        _ = try await pool.query(OutboxStatements.recordLocal, [records.encoded()])
    }
}
