import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A lean HTTP/2 client for the push providers' send path: a batch of requests is written as
/// frames onto one connection and flushed once, and its responses are matched by stream id.
///
/// Measured against async-http-client on the APNs drain (`make bench-worker`), which opens a
/// stream channel per request and flushes head, body and end separately (each flush a TLS record
/// and a `write`), plus a task hop per request: that stack was most of the worker's CPU per
/// message. Everything HTTP/2 itself needs (framing, HPACK, stream states, flow control, the
/// peer's stream limit) is swift-nio-http2's `NIOHTTP2Handler`; only the request bookkeeping is
/// here (``HTTP2StreamRouter``).
///
/// Each endpoint gets up to `connectionsPerEndpoint` connections, made on demand on the group's
/// event loops in turn, and batches go to them round-robin. A connection that closes or is told
/// GOAWAY is forgotten and replaced by the next batch that needs it, and so is one left with no
/// request in flight for `idleTimeout` (it is closed). Only `https` with `h2`
/// negotiated by ALPN is spoken (APNs and FCM require it); a server that completes TLS without
/// choosing `h2` fails the batch with ``HTTP2RequestError/http2NotNegotiated``, so a caller
/// that may meet HTTP/1.1-only servers (Web Push) can send those requests another way.
package final class HTTP2Client: Sendable {
    private struct Slot {
        var id: UInt64
        var connection: EventLoopFuture<HTTP2Connection>
        /// Set once connected (TLS done, `h2` chosen).
        var ready: HTTP2Connection?
    }

    private struct State {
        var slots: [HTTP2Endpoint: [Slot?]] = [:]
        var turn = 0
        var nextID: UInt64 = 0
        var shutDown = false
    }

    private let group: any EventLoopGroup
    private let sslContext: NIOSSLContext
    private let connectTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private let connectionsPerEndpoint: Int
    private let state = NIOLockedValueBox(State())

    /// - Throws: ``ProviderConfigurationError`` when a CA file cannot be read.
    package init(
        configuration: ProviderHTTPConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        var tls = try configuration.tlsConfiguration()
        tls.applicationProtocols = ["h2"]
        self.sslContext = try NIOSSLContext(configuration: tls)
        self.group = eventLoopGroup
        self.connectTimeout = configuration.connectTimeout.timeAmount
        self.idleTimeout = configuration.idleTimeout.timeAmount
        self.connectionsPerEndpoint = max(1, configuration.maxConnectionsPerHost)
    }

    /// Sends `requests` to `endpoint` on one connection, written and flushed together, and
    /// returns one result per request, in order. Never throws: a request that could not be sent
    /// or answered carries the reason.
    ///
    /// - Parameter timeout: how long the whole exchange may take, connecting included. When it
    ///   runs out, written requests are reset; every unanswered request ends `timeout`.
    package func execute(
        _ requests: [HTTP2Request],
        to endpoint: HTTP2Endpoint,
        timeout: Duration
    ) async -> [Result<HTTP2Response, HTTP2RequestError>] {
        guard !requests.isEmpty else { return [] }
        guard let connection = connection(for: endpoint) else { return requests.map { _ in .failure(.shutDown) } }
        let deadline = NIODeadline.now() + timeout.timeAmount
        let prefix = endpoint.pathPrefix
        let loop = connection.eventLoop
        let answered = loop.makePromise(of: [Result<HTTP2Response, HTTP2RequestError>].self)
        // Until the connection is ready the deadline is kept here; once the requests are
        // written, the connection keeps it and resets what is still open.
        let waiting = NIOLockedValueBox(true)
        let stopWaiting: @Sendable () -> Bool = {
            waiting.withLockedValue { was in
                defer { was = false }
                return was
            }
        }
        let cancel = loop.makePromise(of: Void.self)
        let connectTimer = loop.scheduleTask(deadline: deadline) {
            guard stopWaiting() else { return }
            answered.succeed(requests.map { _ in .failure(.timeout) })
        }
        connection.whenComplete { result in
            guard stopWaiting() else { return }
            connectTimer.cancel()
            switch result {
            case .failure(let error):
                let reason: HTTP2RequestError =
                    (error as? HTTP2RequestError) == .http2NotNegotiated
                    ? .http2NotNegotiated : .connectFailed
                answered.succeed(requests.map { _ in .failure(reason) })
            case .success(let connection):
                connection.start(requests, pathPrefix: prefix, deadline: deadline, cancel: cancel.futureResult)
                    .cascade(to: answered)
            }
        }
        return await withTaskCancellationHandler {
            defer { cancel.succeed(()) }  // the batch is over: its cancel hook is released
            return (try? await answered.futureResult.get()) ?? requests.map { _ in .failure(.connectFailed) }
        } onCancel: {
            // Still connecting: nothing was written. Written: the streams are reset.
            if stopWaiting() {
                connectTimer.cancel()
                answered.succeed(requests.map { _ in .failure(.cancelled) })
            }
            cancel.succeed(())
        }
    }

    /// ``execute(_:to:timeout:)``, then once more, at once, for the requests the server never saw
    /// (``HTTP2RequestError/notSent``: refused by GOAWAY or `REFUSED_STREAM`, or written to a
    /// connection already gone), which go on a connection that still takes requests. Sending those
    /// again cannot duplicate them; a request refused twice ends `notSent`. The adapters' send path.
    package func executeResendingUnsent(
        _ requests: [HTTP2Request],
        to endpoint: HTTP2Endpoint,
        timeout: Duration
    ) async -> [Result<HTTP2Response, HTTP2RequestError>] {
        var results = await execute(requests, to: endpoint, timeout: timeout)
        let unsent = results.indices.filter { if case .failure(.notSent) = results[$0] { true } else { false } }
        guard !unsent.isEmpty else { return results }
        let again = await execute(unsent.map { requests[$0] }, to: endpoint, timeout: timeout)
        for (i, result) in zip(unsent, again) { results[i] = result }
        return results
    }

    /// Closes every connection; requests in flight end with `connectionClosed`, later ones with
    /// `shutDown`. Waits for the connected ones to close; one still connecting is closed when its
    /// handshake ends (or fails by the connect timeout), without being waited for.
    package func shutdown() async {
        let slots = state.withLockedValue { state -> [Slot] in
            state.shutDown = true
            defer { state.slots = [:] }
            return state.slots.values.flatMap { $0.compactMap { $0 } }
        }
        for slot in slots {
            if let connection = slot.ready {
                try? await connection.channel.close()
            } else {
                slot.connection.whenSuccess { $0.channel.close(promise: nil) }
            }
        }
    }

    /// Connections open or opening (for tests).
    package var connectionCount: Int {
        state.withLockedValue { $0.slots.values.reduce(0) { $0 + $1.compactMap { $0 }.count } }
    }

    /// Connections opened since the client was made (for tests).
    package var connectionsOpened: Int { state.withLockedValue { Int($0.nextID) } }

    /// The connection of the next slot in turn, made when the slot is empty.
    private func connection(for endpoint: HTTP2Endpoint) -> EventLoopFuture<HTTP2Connection>? {
        let (slot, index, fresh) = state.withLockedValue { state -> (Slot?, Int, Bool) in
            guard !state.shutDown else { return (nil, 0, false) }
            var slots = state.slots[endpoint] ?? Array(repeating: nil, count: connectionsPerEndpoint)
            let index = state.turn % slots.count
            state.turn &+= 1
            if let slot = slots[index] { return (slot, index, false) }
            state.nextID += 1
            let slot = Slot(id: state.nextID, connection: connect(endpoint))
            slots[index] = slot
            state.slots[endpoint] = slots
            return (slot, index, true)
        }
        guard let slot else { return nil }
        if fresh {
            let forget: @Sendable () -> Void = { [state] in
                state.withLockedValue { state in
                    guard state.slots[endpoint]?[index]?.id == slot.id else { return }
                    state.slots[endpoint]?[index] = nil
                    // An endpoint with no connection left is dropped (Web Push meets as many
                    // endpoints as its subscriptions name).
                    if state.slots[endpoint]?.allSatisfy({ $0 == nil }) == true { state.slots[endpoint] = nil }
                }
            }
            slot.connection.whenComplete { [state] result in
                switch result {
                case .success(let connection):
                    state.withLockedValue { state in
                        if state.slots[endpoint]?[index]?.id == slot.id {
                            state.slots[endpoint]?[index]?.ready = connection
                        }
                    }
                    connection.onUnusable(forget)
                case .failure: forget()
                }
            }
        }
        return slot.connection
    }

    private func connect(_ endpoint: HTTP2Endpoint) -> EventLoopFuture<HTTP2Connection> {
        let loop = group.next()
        let sslContext = self.sslContext
        let hostname = Self.isIPAddress(endpoint.host) ? nil : endpoint.host
        let authority = endpoint.authority
        let connectTimeout = self.connectTimeout
        let idleTimeout = self.idleTimeout
        return ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let ready = channel.eventLoop.makePromise(of: Void.self)
                    let router = HTTP2StreamRouter(authority: authority, ready: ready, idleTimeout: idleTimeout)
                    // The bootstrap's timeout bounds the TCP connect alone; this one, started
                    // before it, bounds connecting and the TLS handshake together, so a server
                    // that accepts and never answers is given up.
                    let handshake = channel.eventLoop.scheduleTask(in: connectTimeout) {
                        ready.fail(HTTP2RequestError.connectFailed)
                    }
                    ready.futureResult.whenComplete { _ in handshake.cancel() }
                    try channel.pipeline.syncOperations.addHandlers([
                        try NIOSSLClientHandler(context: sslContext, serverHostname: hostname),
                        // The adapters build every header from constants and checked values
                        // (a collapse id loses control characters), so NIO's per-header
                        // validation (a twentieth of the worker's CPU per message) is off.
                        NIOHTTP2Handler(
                            mode: .client,
                            initialSettings: HTTP2Connection.settings,
                            headerBlockValidation: .disabled,
                            contentLengthValidation: .disabled
                        ),
                        router,
                    ])
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel in
                channel.eventLoop.makeCompletedFuture {
                    let router = try channel.pipeline.syncOperations.handler(type: HTTP2StreamRouter.self)
                    return (
                        HTTP2Connection(channel: channel, router: NIOLoopBound(router, eventLoop: channel.eventLoop)),
                        router.ready.futureResult
                    )
                }.flatMap { connection, ready in
                    ready.map { @Sendable _ in connection }
                }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
    }
}

/// One HTTP/2 connection of an ``HTTP2Client``.
final class HTTP2Connection: Sendable {
    /// What the client announces: no server push; the rest NIO's defaults.
    static let settings: HTTP2Settings = [
        HTTP2Setting(parameter: .enablePush, value: 0),
        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
        HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoderDefaults.maxHeaderListSize),
    ]

    let channel: any Channel
    private let router: NIOLoopBound<HTTP2StreamRouter>

    init(channel: any Channel, router: NIOLoopBound<HTTP2StreamRouter>) {
        self.channel = channel
        self.router = router
    }

    func start(
        _ requests: [HTTP2Request],
        pathPrefix: String,
        deadline: NIODeadline,
        cancel: EventLoopFuture<Void>
    ) -> EventLoopFuture<[Result<HTTP2Response, HTTP2RequestError>]> {
        let router = self.router
        if channel.eventLoop.inEventLoop {
            return router.value.start(requests, pathPrefix: pathPrefix, deadline: deadline, cancel: cancel)
        }
        return channel.eventLoop.flatSubmit {
            router.value.start(requests, pathPrefix: pathPrefix, deadline: deadline, cancel: cancel)
        }
    }

    /// Calls `callback` (once, on the event loop) when the connection stops taking requests.
    func onUnusable(_ callback: @escaping @Sendable () -> Void) {
        let router = self.router
        channel.eventLoop.execute {
            if router.value.accepting { router.value.onUnusable = callback } else { callback() }
        }
    }
}

private enum HPACKDecoderDefaults {
    static let maxHeaderListSize = 16 * 1024
}
