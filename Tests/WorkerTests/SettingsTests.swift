import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import HeraldMetrics
import Providers
import Queue
import Settings
import Testing

/// The settings table is the one list of what Herald reads: its defaults are valid values, and
/// the configuration resolved from an empty environment is those defaults.
@Suite("Settings: one table of keys, defaults, ranges and help")
struct SettingsTests {
    @Test("every default is a value its setting accepts; keys and variables are unique")
    func defaultsAreValid() {
        for setting in Setting.all {
            switch setting.kind {
            case .integer(let range):
                if let text = setting.defaultValue {
                    #expect(Int(text).map(range.contains) == true, "\(setting.key) default \(text) outside \(range)")
                }
            case .boolean:
                #expect(["true", "false"].contains(setting.defaultValue), "\(setting.key)")
            case .choice(let words):
                #expect(setting.defaultValue.map(words.contains) == true, "\(setting.key)")
            case .url:
                if let text = setting.defaultValue { #expect(text.hasPrefix("https://"), "\(setting.key)") }
            case .text, .list:
                break
            }
            #expect(!setting.help.isEmpty, "\(setting.key) has no help")
        }
        #expect(Set(Setting.all.map(\.key)).count == Setting.all.count)
        #expect(Set(Setting.all.map(\.environmentName)).count == Setting.all.count)
    }

    @Test("an empty environment resolves to the table's defaults; a bad value names its key")
    func emptyEnvironmentIsTheDefaults() async throws {
        let c = try await HeraldConfiguration.load(file: nil, environment: [:])
        func value(_ key: String) -> Int? { Setting.all.first { $0.key == key }?.defaultValue.flatMap { Int($0) } }
        #expect(c.consumer.batchSize == value("queue.batch_size"))
        #expect(c.consumer.maxInFlightBatches == value("queue.max_in_flight_batches"))
        #expect(c.consumer.maxConcurrentAcks == value("queue.max_concurrent_acks"))
        #expect(c.pool.size == value("database.pool_size"))
        #expect(Int(c.shutdownDeadline.components.seconds) == value("shutdown.deadline_seconds"))
        #expect(c.delivery.circuit.failureThreshold == value("circuit.failure_threshold"))
        #expect(c.http.port == value("http.port"))
        #expect(c.providers[.apns] == "off" && c.providers[.local] == "local")
        #expect(c.delivery.ratePerSecond[.expo] == 600 && c.delivery.ratePerSecond[.apns] == nil)
        #expect(c.logLevel == "info" && !c.allowSuperuser)

        await #expect(throws: (any Error).self) {
            _ = try await HeraldConfiguration.load(file: nil, environment: ["HERALD_QUEUE_BATCH_SIZE": "0"])
        }
        do {
            _ = try await HeraldConfiguration.load(file: nil, environment: ["HERALD_PROVIDERS_APNS": "sometimes"])
            Issue.record("an unknown adapter loaded")
        } catch {
            #expect("\(error)".contains("providers.apns") && "\(error)".contains("live, local, sink, off"))
        }
        let apns = try await HeraldConfiguration.load(file: nil, environment: ["HERALD_PROVIDERS_APNS": "apns"])
        #expect(apns.providers[.apns] == "live")
    }

    @Test("a HERALD_ variable that names no setting is reported (typos are not ignored in silence)")
    func unknownVariablesAreReported() {
        let unknown = Setting.unknownEnvironmentNames(in: [
            "HERALD_QUEUE_BATCH_SIZE": "100", "HERALD_QUEUE_BATCHSIZE": "100", "HERALD_CONFIG_FILE": "/etc/h.json",
            "HERALD_APP_FOODSHARE_APNS_PRIVATE_KEY_FILE": "/k", "HERALD_PACING_EXPO_PER_SECOND": "10", "PATH": "/bin",
        ])
        #expect(unknown == ["HERALD_QUEUE_BATCHSIZE"])
    }
}
