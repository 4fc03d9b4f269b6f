import Foundation
import HeraldCore

/// The simulator's HTTP/JSON control API under `/_sim/` (see docs/simulator.md).
///
/// - `POST /_sim/faults`: add one ``FaultRule`` (JSON body); answers `{"id": n}` with 201.
/// - `GET /_sim/faults`: the rules in force.
/// - `DELETE /_sim/faults`: remove every rule.
/// - `GET /_sim/records?provider=apns`: accepted messages (provider, token, headers, payload, receivedAt).
/// - `GET /_sim/stats`: `{"apns": {"accepted": n, "rejected": m}, …}`.
/// - `POST /_sim/reset`: remove every rule and record, zero the counters.
struct ControlAPI: Sendable {
    let services: [any SimulatedService]
    let context: SimulatorContext
    let faults: FaultPlan

    func handle(_ request: SimulatorRequest) -> SimulatorResponse {
        switch (request.method, request.path) {
        case ("POST", "/_sim/faults"):
            do {
                let rule = try JSONDecoder().decode(FaultRule.self, from: Data(request.body))
                let id = try faults.add(rule)
                return .json(status: 201, ["id": id])
            } catch let error as FaultRuleError {
                return .json(status: 400, ["error": error.description])
            } catch {
                return .json(status: 400, ["error": "body must be one fault rule as a JSON object"])
            }
        case ("GET", "/_sim/faults"):
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let rules = faults.entries.map(\.rule)
            let data = (try? encoder.encode(rules)) ?? Data("[]".utf8)
            return SimulatorResponse(status: 200, headers: [("content-type", "application/json")], body: Array(data))
        case ("DELETE", "/_sim/faults"):
            faults.clear()
            return .json(status: 200, ["ok": true])
        case ("GET", "/_sim/records"):
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let records = context.recorder.records(provider: request.query["provider"]).map { record -> [String: Any] in
                [
                    "provider": record.provider, "token": record.token, "headers": record.headers,
                    "payload": record.payload, "receivedAt": formatter.string(from: record.receivedAt),
                ]
            }
            return .json(status: 200, records)
        case ("GET", "/_sim/stats"):
            var stats: [String: Any] = [:]
            for provider in Set(services.map(\.provider)) {
                stats[provider] = [
                    "accepted": context.recorder.acceptedCount(provider: provider),
                    "rejected": context.recorder.rejectedCount(provider: provider),
                ]
            }
            return .json(status: 200, stats)
        case ("POST", "/_sim/reset"):
            faults.clear()
            context.recorder.reset()
            return .json(status: 200, ["ok": true])
        case (_, "/_sim/faults"), (_, "/_sim/records"), (_, "/_sim/stats"), (_, "/_sim/reset"):
            return .json(status: 405, ["error": "method not allowed"])
        default:
            return .json(status: 404, ["error": "unknown control endpoint"])
        }
    }
}
