import Foundation
import HeraldCore
import NIOCore
import NIOHTTP1
import NIOHTTP2

/// What one HTTP/2 connection's streams share: the highest stream the server has begun, the
/// requests still being answered, and whether a GOAWAY has been sent. Confined to the
/// connection's event loop (stream channels run on their parent's loop).
final class SimulatorH2Connection {
    private let parent: any Channel
    private var highestStarted: HTTP2StreamID = .rootStream
    private var answering = 0
    private var draining = false

    init(parent: any Channel) {
        self.parent = parent
    }

    func started(_ stream: HTTP2StreamID) {
        if stream > highestStarted { highestStarted = stream }
    }

    func requestBegan() {
        answering += 1
    }

    func requestEnded() {
        answering -= 1
        if draining && answering == 0 { parent.close(promise: nil) }
    }

    /// Sends GOAWAY naming the highest stream begun (RFC 9113 §6.8: streams above it were not
    /// processed, and NIOHTTP2 ignores any that arrive later), lets the begun streams finish,
    /// then closes; a grace period bounds the wait.
    func goAway() {
        guard !draining else { return }
        draining = true
        let debugData = parent.allocator.buffer(string: #"{"reason":"Shutdown"}"#)
        let frame = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(lastStreamID: highestStarted, errorCode: .noError, opaqueData: debugData)
        )
        parent.writeAndFlush(frame, promise: nil)
        let parent = self.parent
        parent.eventLoop.scheduleTask(in: .seconds(2)) { parent.close(promise: nil) }
    }
}

/// Collects one HTTP request (an HTTP/1.1 connection or one HTTP/2 stream, both seen through
/// the HTTP/1 message types), hands it to the router, and writes the answer or performs a
/// connection-level fault.
final class SimulatorRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Largest body collected; larger requests get 413 without reaching a service. 1 MiB.
    static let maximumBodySize = 1 << 20

    private let router: SimulatorRouter
    /// "h2" or "http/1.1".
    private let httpVersion: String
    /// Set on HTTP/2 stream channels.
    private let connection: SimulatorH2Connection?
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false

    init(router: SimulatorRouter, httpVersion: String, connection: SimulatorH2Connection? = nil) {
        self.router = router
        self.httpVersion = httpVersion
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if let connection, let stream = Self.streamID(context) { connection.started(stream) }
            self.head = head
            body = []
            bodyTooLarge = false
        case .body(var buffer):
            if body.count + buffer.readableBytes > Self.maximumBodySize {
                bodyTooLarge = true
            } else if let bytes = buffer.readBytes(length: buffer.readableBytes) {
                body += bytes
            }
        case .end:
            guard let head else { return }
            self.head = nil
            let keepAlive = head.isKeepAlive
            if bodyTooLarge {
                write(
                    .json(status: 413, ["error": "request body too large"]),
                    version: head.version,
                    keepAlive: false,
                    context: context
                )
                return
            }
            let request = makeRequest(head)
            let router = self.router
            let connection = self.connection
            connection?.requestBegan()
            let promise = context.eventLoop.makePromise(of: SimulatorAction.self)
            Task(executorPreference: SimulatorExecutor.shared) { promise.succeed(await router.process(request)) }
            promise.futureResult.assumeIsolated().whenSuccess { action in
                self.perform(action, version: head.version, keepAlive: keepAlive, context: context)
                connection?.requestEnded()
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func makeRequest(_ head: HTTPRequestHead) -> SimulatorRequest {
        var path = head.uri
        var query: [String: String] = [:]
        if let mark = path.firstIndex(of: "?") {
            let queryText = path[path.index(after: mark)...]
            path = String(path[..<mark])
            for pair in queryText.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
                let value = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
                query[name] = value
            }
        }
        let headers = head.headers.map { (name: $0.name.lowercased(), value: $0.value) }
        return SimulatorRequest(
            method: head.method.rawValue,
            path: path,
            query: query,
            headers: headers,
            body: body,
            httpVersion: httpVersion,
            receivedAt: router.context.now()
        )
    }

    private func perform(
        _ action: SimulatorAction,
        version: HTTPVersion,
        keepAlive: Bool,
        context: ChannelHandlerContext
    ) {
        switch action {
        case .respond(let response):
            write(response, version: version, keepAlive: keepAlive, context: context)
        case .dropConnection:
            // On HTTP/2 the TCP connection is the parent of this stream channel.
            (context.channel.parent ?? context.channel).close(promise: nil)
        case .goaway:
            guard let connection else {
                context.close(promise: nil)
                return
            }
            // This stream is refused (not processed, so a client may send it again elsewhere);
            // the streams already begun on the connection are answered before it closes.
            refuseStream(context)
            connection.goAway()
        }
    }

    private static func streamID(_ context: ChannelHandlerContext) -> HTTP2StreamID? {
        try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
    }

    /// RST_STREAM(REFUSED_STREAM), written below the HTTP/1 codec, which speaks frame payloads.
    private func refuseStream(_ context: ChannelHandlerContext) {
        guard
            let codec = try? context.pipeline.syncOperations.context(
                handlerType: HTTP2FramePayloadToHTTP1ServerCodec.self
            )
        else {
            context.close(promise: nil)
            return
        }
        codec.writeAndFlush(NIOAny(HTTP2Frame.FramePayload.rstStream(.refusedStream)), promise: nil)
    }

    private func write(
        _ response: SimulatorResponse,
        version: HTTPVersion,
        keepAlive: Bool,
        context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        headers.replaceOrAdd(name: "content-length", value: String(response.body.count))
        let closeAfter = httpVersion != "h2" && !keepAlive
        if closeAfter { headers.replaceOrAdd(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: version,
            status: HTTPResponseStatus(statusCode: response.status),
            headers: headers
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if closeAfter {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }
}
