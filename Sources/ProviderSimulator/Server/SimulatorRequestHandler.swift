import Foundation
import HeraldCore
import NIOCore
import NIOHTTP1
import NIOHTTP2

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
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false

    init(router: SimulatorRouter, httpVersion: String) {
        self.router = router
        self.httpVersion = httpVersion
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
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
                write(.json(status: 413, ["error": "request body too large"]), version: head.version,
                    keepAlive: false, context: context)
                return
            }
            let request = makeRequest(head)
            let router = self.router
            let promise = context.eventLoop.makePromise(of: SimulatorAction.self)
            Task(executorPreference: SimulatorExecutor.shared) { promise.succeed(await router.process(request)) }
            promise.futureResult.assumeIsolated().whenSuccess { action in
                self.perform(action, version: head.version, keepAlive: keepAlive, context: context)
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
            method: head.method.rawValue, path: path, query: query, headers: headers, body: body,
            httpVersion: httpVersion, receivedAt: router.context.now())
    }

    private func perform(
        _ action: SimulatorAction, version: HTTPVersion, keepAlive: Bool, context: ChannelHandlerContext
    ) {
        switch action {
        case .respond(let response):
            write(response, version: version, keepAlive: keepAlive, context: context)
        case .dropConnection:
            // On HTTP/2 the TCP connection is the parent of this stream channel.
            (context.channel.parent ?? context.channel).close(promise: nil)
        case .goaway:
            guard let parent = context.channel.parent else {
                context.close(promise: nil)
                return
            }
            // This stream is reported as not processed, so a client may retry it elsewhere.
            let streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID))
                .map { Int($0) } ?? 0
            let lastStreamID = HTTP2StreamID(max(0, streamID - 2))
            let debugData = parent.allocator.buffer(string: #"{"reason":"Shutdown"}"#)
            let frame = HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: debugData))
            parent.writeAndFlush(frame).whenComplete { _ in parent.close(promise: nil) }
        }
    }

    private func write(
        _ response: SimulatorResponse, version: HTTPVersion, keepAlive: Bool, context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        headers.replaceOrAdd(name: "content-length", value: String(response.body.count))
        let closeAfter = httpVersion != "h2" && !keepAlive
        if closeAfter { headers.replaceOrAdd(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
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
