import DatabaseTestSupport
import Foundation
import HeraldCore
import Hummingbird
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A small OTLP/HTTP collector: stores every JSON export it receives on `/v1/traces`.
private final class Collector: Sendable {
    let exports = Mutex<[Data]>([])
    let port = freePort()

    func run() async throws {
        let router = Router()
        router.post("v1/traces") { request, _ -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 16 << 20)
            self.exports.withLock { $0.append(Data(body.readableBytesView)) }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: "{}"))
            )
        }
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: port)),
            logger: Logger(label: "collector")
        )
        try await app.runService()
    }

    /// Every span received: name, trace id, span id, parent span id (hex), attributes as text.
    var spans: [(name: String, trace: String, id: String, parent: String, attributes: [String: String])] {
        exports.withLock { $0 }.flatMap { data -> [(String, String, String, String, [String: String])] in
            guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return [] }
            return (root["resourceSpans"] as? [[String: Any]] ?? []).flatMap { resource in
                (resource["scopeSpans"] as? [[String: Any]] ?? []).flatMap { scope in
                    (scope["spans"] as? [[String: Any]] ?? []).map { span in
                        var attributes: [String: String] = [:]
                        for a in span["attributes"] as? [[String: Any]] ?? [] {
                            let value = a["value"] as? [String: Any] ?? [:]
                            attributes[a["key"] as? String ?? ""] = value.values.first.map { "\($0)" }
                        }
                        return (
                            span["name"] as? String ?? "", Self.hex(span["traceId"]), Self.hex(span["spanId"]),
                            Self.hex(span["parentSpanId"]), attributes
                        )
                    }
                }
            }
        }
    }

    /// OTLP/JSON ids: hex per the spec, base64 as protobuf's JSON mapping writes bytes.
    private static func hex(_ value: Any?) -> String {
        guard let text = value as? String, !text.isEmpty else { return "" }
        if text.count == 32 || text.count == 16, text.allSatisfy(\.isHexDigit) { return text.lowercased() }
        guard let data = Data(base64Encoded: text) else { return text }
        return Hex.encode(data)
    }
}

@Suite("Traces over OTLP", .serialized)
struct TracingTests {
    @Test(
        "a job enqueued with a traceparent: its stages (claim, decide, send per provider, ack) reach an OTLP collector in that trace; a job without one is not sampled at 0 %"
    )
    func jobStagesExported() async throws {
        try await TestDatabase.withFresh { db in
            let collector = Collector()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await collector.run() }
                try await db.addCategory("chat")
                try await db.registerDevice("u1", "local", "tok-1")
                try await db.registerDevice("u2", "local", "tok-2")
                let trace = "4bf92f3577b34da6a3ce929d0e0e4736"
                let parent = "00f067aa0ba902b7"
                let traced = try #require(
                    try await db.enqueue("u1", "chat", options: #"{"traceparent": "00-\#(trace)-\#(parent)-01"}"#)
                )
                let untraced = try #require(try await db.enqueue("u2", "chat"))
                let (worker, _) = try HeraldBinary.start(
                    ["run"],
                    environment: [
                        "HERALD_DATABASE_URL": db.url, "HERALD_HTTP_PORT": "0", "HERALD_LOG_LEVEL": "warning",
                        "HERALD_TRACING_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)/v1/traces",
                        "HERALD_TRACING_OTLP_PROTOCOL": "http/json", "HERALD_TRACING_SAMPLE_PERCENT": "0",
                    ]
                )
                for _ in 0..<300 {
                    guard try await db.int("SELECT count(*) FROM herald.outbox") > 0 else { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                // SIGTERM: the exporter flushes what the drained consumers recorded.
                kill(worker.processIdentifier, SIGTERM)
                await waitUntilExitOffPool(worker)
                #expect(worker.terminationStatus == 0)
                for _ in 0..<100 where collector.spans.isEmpty { try await Task.sleep(for: .milliseconds(100)) }

                let spans = collector.spans.filter { $0.trace == trace }
                let job = try #require(spans.first { $0.name == "herald.job" }, "spans: \(collector.spans.map(\.name))")
                #expect(job.parent == parent, "the job span continues the enqueuer's span")
                #expect(job.attributes["herald.job.id"] == "\(traced)")
                #expect(job.attributes["herald.state"] == "done")
                for stage in ["herald.claim", "herald.decide", "herald.send", "herald.ack"] {
                    let span = spans.first { $0.name == stage }
                    #expect(span?.parent == job.id, "\(stage) is a child of the job span")
                }
                #expect(spans.first { $0.name == "herald.send" }?.attributes["push.provider"] == "local")
                #expect(
                    !collector.spans.contains { $0.attributes["herald.job.id"] == "\(untraced)" },
                    "a job without a traceparent is not sampled at 0 %"
                )
                group.cancelAll()
            }
        }
    }

    @Test("a malformed traceparent is refused at enqueue with a clear error")
    func malformedTraceparent() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            for bad in [
                "nope", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            ] {
                await #expect(throws: (any Error).self, "\(bad)") {
                    try await db.enqueue("u1", "chat", options: #"{"traceparent": "\#(bad)"}"#)
                }
            }
            do {
                try await db.enqueue("u1", "chat", options: #"{"traceparent": 42}"#)
                Issue.record("accepted a number")
            } catch {
                #expect("\(error)".contains("options.traceparent must be a W3C traceparent"))
            }
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }
}
