import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOTLS

/// The last handler of an ``HTTP2Client`` connection, after `NIOHTTP2Handler`: it writes a whole
/// batch of requests as frames and flushes once, and matches response frames to requests by
/// stream id. No channel per stream, no task per request.
///
/// Confined to its channel's event loop. HTTP/2 state (stream states, HPACK, outbound flow
/// control, the peer's concurrent-stream limit) stays with `NIOHTTP2Handler`; this handler owns
/// what the multiplexer would: the connection's inbound window (it returns consumed bytes with
/// `WINDOW_UPDATE`), and which streams belong to which request.
final class HTTP2StreamRouter: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Responses longer than this are refused (`responseTooLarge`); below a stream's initial window.
    static let maximumBodySize = 60 * 1024
    /// The connection window returned to the peer once this much was consumed.
    private static let windowUpdateThreshold = 16 * 1024
    /// Streams left before the id space (2^31) runs out; then the connection takes no more.
    private static let lastUsableStreamID = Int32.max - 2_000

    typealias Results = [Result<HTTP2Response, HTTP2RequestError>]

    /// The requests of one `start` call, answered together.
    private final class Batch {
        var results: [Result<HTTP2Response, HTTP2RequestError>?]
        var remaining: Int
        let promise: EventLoopPromise<Results>
        var timer: Scheduled<Void>?
        var streamIDs: [HTTP2StreamID] = []
        /// The connection's frame count when the batch was written.
        let framesReadBefore: UInt64

        init(count: Int, promise: EventLoopPromise<Results>, framesReadBefore: UInt64) {
            self.results = Array(repeating: nil, count: count)
            self.remaining = count
            self.promise = promise
            self.framesReadBefore = framesReadBefore
        }
    }

    private struct OpenStream {
        var batch: Batch
        var index: Int
        var status: Int?
        var headers: HPACKHeaders = [:]
        var body: ByteBuffer?
    }

    private let authority: String
    /// With no stream open this long, the connection stops taking requests and closes.
    private let idleTimeout: TimeAmount
    private var idleTimer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    private var nextStreamID: Int32 = 1
    private var open: [HTTP2StreamID: OpenStream] = [:]
    /// False after GOAWAY, close or id exhaustion: new requests get `notSent`.
    private(set) var accepting = true
    private var unannouncedBytes = 0
    /// Frames read so far: a batch that times out with none read since it was written is on a
    /// connection that no longer answers (a half-open TCP connection looks exactly like this).
    private var framesRead: UInt64 = 0
    /// Fulfilled when TLS negotiated `h2`.
    let ready: EventLoopPromise<Void>
    /// Called once when the connection stops taking requests (the pool forgets it).
    var onUnusable: (() -> Void)?

    init(authority: String, ready: EventLoopPromise<Void>, idleTimeout: TimeAmount) {
        self.authority = authority
        self.ready = ready
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Writes every request and flushes once; the future holds one result per request, in order.
    /// At `deadline` the streams still open are reset and end `timeout`; when `cancel` completes
    /// first, they end `cancelled`. `cancel` must be on this connection's event loop.
    func start(
        _ requests: [HTTP2Request],
        pathPrefix: String,
        deadline: NIODeadline,
        cancel: EventLoopFuture<Void>
    ) -> EventLoopFuture<Results> {
        guard let context else {
            return ready.futureResult.eventLoop.makeSucceededFuture(requests.map { _ in .failure(.notSent) })
        }
        idleTimer?.cancel()
        idleTimer = nil
        let promise = context.eventLoop.makePromise(of: Results.self)
        let batch = Batch(count: requests.count, promise: promise, framesReadBefore: framesRead)
        guard accepting else {
            for index in requests.indices { batch.results[index] = .failure(.notSent) }
            promise.succeed(batch.results.map { $0! })
            return promise.futureResult
        }
        batch.streamIDs.reserveCapacity(requests.count)
        for (index, request) in requests.enumerated() {
            guard accepting, nextStreamID < Self.lastUsableStreamID else {
                batch.results[index] = .failure(.notSent)
                batch.remaining -= 1
                continue
            }
            let streamID = HTTP2StreamID(nextStreamID)
            nextStreamID += 2
            batch.streamIDs.append(streamID)
            open[streamID] = OpenStream(batch: batch, index: index)

            var headers = HPACKHeaders()
            headers.reserveCapacity(5 + request.headers.count)
            headers.add(name: ":method", value: request.method)
            headers.add(name: ":scheme", value: "https")
            headers.add(name: ":authority", value: authority)
            headers.add(name: ":path", value: pathPrefix + request.path, indexing: .nonIndexable)
            headers.add(contentsOf: request.headers)
            if let authorization = request.authorization { headers.add(name: "authorization", value: authorization) }
            // The last frame's promise says whether the request reached the socket at all.
            let written = context.eventLoop.makePromise(of: Void.self)
            if let body = request.body {
                context.write(
                    wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
                    promise: nil
                )
                context.write(
                    wrapOutboundOut(
                        HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))
                    ),
                    promise: written
                )
            } else {
                context.write(
                    wrapOutboundOut(
                        HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))
                    ),
                    promise: written
                )
            }
            written.futureResult.assumeIsolated().whenFailure { [weak self] _ in
                // Never written: the server cannot have seen its end, so it was not processed.
                self?.finish(streamID, .failure(.notSent))
            }
        }
        if nextStreamID >= Self.lastUsableStreamID { stopAccepting() }
        if batch.remaining == 0 {
            armIdleTimer()
            promise.succeed(batch.results.map { $0! })
            return promise.futureResult
        }
        batch.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            self?.expire(batch, as: .timeout)
        }
        cancel.assumeIsolated().whenSuccess { [weak self] in
            // Also completed once the batch is answered: then nothing is open and this does nothing.
            self?.expire(batch, as: .cancelled)
        }
        context.flush()
        return promise.futureResult
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        framesRead &+= 1
        switch frame.payload {
        case .headers(let payload):
            guard var stream = open[frame.streamID] else { return }
            if stream.status == nil {
                guard let text = payload.headers.first(name: ":status"), let status = Int(text) else {
                    reset(frame.streamID, .protocolError)
                    finish(frame.streamID, .failure(.streamReset))
                    return
                }
                if (100..<200).contains(status) { return }  // informational; the final head follows
                stream.status = status
                stream.headers = payload.headers
            }
            if payload.endStream {
                open[frame.streamID] = stream
                complete(frame.streamID)
            } else {
                open[frame.streamID] = stream
            }
        case .data(let payload):
            let consumed = payload.data.readableBytes + (payload.paddingBytes.map { $0 + 1 } ?? 0)
            returnWindow(consumed, context: context)
            guard var stream = open[frame.streamID], case .byteBuffer(var bytes) = payload.data else { return }
            if (stream.body?.readableBytes ?? 0) + bytes.readableBytes > Self.maximumBodySize {
                reset(frame.streamID, .cancel)
                finish(frame.streamID, .failure(.responseTooLarge))
                return
            }
            if stream.body == nil {
                stream.body = bytes
            } else {
                stream.body!.writeBuffer(&bytes)
            }
            open[frame.streamID] = stream
            if payload.endStream { complete(frame.streamID) }
        case .rstStream(let code):
            finish(frame.streamID, .failure(code == .refusedStream ? .notSent : .streamReset))
        case .goAway(let lastStreamID, _, _):
            stopAccepting()
            // Streams above the last one the server processed were never seen: safe to resend.
            for id in open.keys where id > lastStreamID { finish(id, .failure(.notSent)) }
            closeIfDrained()
        default:
            break  // SETTINGS, PING, WINDOW_UPDATE, PRIORITY: NIOHTTP2Handler handles them
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let proto) = event {
            if proto == "h2" {
                ready.succeed(())
                armIdleTimer()
            } else {
                ready.fail(HTTP2RequestError.http2NotNegotiated)
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        ready.fail(HTTP2RequestError.connectFailed)
        stopAccepting()
        for id in Array(open.keys) { finish(id, .failure(.connectionClosed)) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            // NIOHTTP2Handler already reset the stream; the connection stays.
            finish(streamError.streamID, .failure(.streamReset))
            return
        }
        ready.fail(HTTP2RequestError.connectFailed)
        context.close(promise: nil)
    }

    // MARK: - Helpers

    private func complete(_ streamID: HTTP2StreamID) {
        guard let stream = open[streamID], let context else { return }
        let body = stream.body ?? context.channel.allocator.buffer(capacity: 0)
        finish(streamID, .success(HTTP2Response(status: stream.status ?? 0, headers: stream.headers, body: body)))
    }

    private func finish(_ streamID: HTTP2StreamID, _ result: Result<HTTP2Response, HTTP2RequestError>) {
        guard let stream = open.removeValue(forKey: streamID) else { return }
        let batch = stream.batch
        batch.results[stream.index] = result
        batch.remaining -= 1
        if batch.remaining == 0 {
            batch.timer?.cancel()
            batch.promise.succeed(batch.results.map { $0! })
        }
        closeIfDrained()
        armIdleTimer()
    }

    private func expire(_ batch: Batch, as error: HTTP2RequestError) {
        guard batch.remaining > 0 else { return }
        // Nothing at all heard since this batch went out: retire the connection, so later
        // batches open a new one instead of waiting on it until TCP gives up.
        if error == .timeout && framesRead == batch.framesReadBefore { stopAccepting() }
        var reset = false
        for id in batch.streamIDs where open[id]?.batch === batch {
            self.reset(id, .cancel, flush: false)
            reset = true
            finish(id, .failure(error))
        }
        if reset { context?.flush() }
    }

    private func reset(_ streamID: HTTP2StreamID, _ code: HTTP2ErrorCode, flush: Bool = true) {
        guard let context else { return }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(code))), promise: nil)
        if flush { context.flush() }
    }

    private func returnWindow(_ bytes: Int, context: ChannelHandlerContext) {
        unannouncedBytes += bytes
        guard unannouncedBytes >= Self.windowUpdateThreshold else { return }
        let increment = unannouncedBytes
        unannouncedBytes = 0
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
            promise: nil
        )
    }

    private func stopAccepting() {
        guard accepting else { return }
        accepting = false
        let callback = onUnusable
        onUnusable = nil
        callback?()
    }

    /// Closes the connection after `idleTimeout` with no stream open. A batch handed this
    /// connection meanwhile finds it not accepting and its requests end `notSent`, which the
    /// client sends again at once on a new connection.
    private func armIdleTimer() {
        guard accepting, open.isEmpty, let context else { return }
        idleTimer?.cancel()
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: idleTimeout) { [weak self] in
            guard let self, self.open.isEmpty else { return }
            self.stopAccepting()
            self.closeIfDrained()
        }
    }

    private func closeIfDrained() {
        if !accepting, open.isEmpty, let context, context.channel.isActive {
            context.close(promise: nil)
        }
    }
}
