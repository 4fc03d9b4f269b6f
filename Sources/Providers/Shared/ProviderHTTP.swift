import AsyncHTTPClient
import Foundation
import HeraldCore
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL

/// Where a provider lives and how to reach it: base URLs are configurable so the worker can be
/// pointed at the provider simulator or a staging endpoint, and extra CA certificates can be
/// trusted for them.
package struct ProviderHTTPConfiguration: Sendable {
    /// PEM files whose certificates are trusted in addition to the system roots.
    package var extraCAFiles: [String]
    /// Deadline for one provider request, connect included. No request waits longer.
    package var requestTimeout: Duration
    package var connectTimeout: Duration
    /// Connections per host; HTTP/2 multiplexes many streams on each.
    package var maxConnectionsPerHost: Int
    /// A connection with no request in flight for this long is closed; the next request opens
    /// another. Five minutes: a busy worker keeps its connections, an idle one holds none.
    package var idleTimeout: Duration

    package init(
        extraCAFiles: [String] = [],
        requestTimeout: Duration = .seconds(10),
        connectTimeout: Duration = .seconds(5),
        maxConnectionsPerHost: Int = 4,
        idleTimeout: Duration = .seconds(300)
    ) {
        self.extraCAFiles = extraCAFiles
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.idleTimeout = idleTimeout
    }

    /// An HTTP client (HTTP/2 when the server offers it through ALPN) trusting the extra CAs.
    package func makeClient(
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws
        -> HTTPClient
    {
        let tls = try tlsConfiguration()
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: connectTimeout.timeAmount, read: requestTimeout.timeAmount),
            connectionPool: .init(
                idleTimeout: idleTimeout.timeAmount,
                concurrentHTTP1ConnectionsPerHostSoftLimit: maxConnectionsPerHost
            ),
            proxy: nil,
            ignoreUncleanSSLShutdown: false,
            // Bodies a provider gzips (Expo does when asked) arrive inflated, at most 10× their size.
            decompression: .enabled(limit: .ratio(10))
        )
        configuration.httpVersion = .automatic
        return HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)
    }

    /// TLS for a client: the system roots plus the extra CAs.
    package func tlsConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if !extraCAFiles.isEmpty {
            var certificates: [NIOSSLCertificate] = []
            for file in extraCAFiles {
                do {
                    certificates += try NIOSSLCertificate.fromPEMFile(file)
                } catch {
                    throw ProviderConfigurationError("cannot read CA certificates from \(file)")
                }
            }
            tls.trustRoots = .default
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        return tls
    }

}

extension Duration {
    /// This duration as NIO's `TimeAmount` (timeouts and deadlines of `HTTPClient.execute`).
    package var timeAmount: TimeAmount {
        .nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
    }
}

/// A configuration problem found while building an adapter (bad key file, bad URL). Its text
/// names the setting, never the secret.
package struct ProviderConfigurationError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

extension DeliveryOutcome {
    /// Classifies a transport failure (no HTTP response): every one is retryable. The reason is
    /// a closed vocabulary; the error's text (which may carry a URL with a token) is not used.
    package static func transportFailure(_ error: any Error, latency: Duration? = nil) -> DeliveryOutcome {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                return DeliveryOutcome(.retry, reason: .timeout, latency: latency)
            case .remoteConnectionClosed, .cancelled, .alreadyShutdown:
                return DeliveryOutcome(.retry, reason: .connectionClosed, latency: latency)
            default:
                return DeliveryOutcome(.retry, reason: .connectionError, latency: latency)
            }
        }
        if error is CancellationError { return DeliveryOutcome(.retry, reason: .cancelled, latency: latency) }
        return DeliveryOutcome(.retry, reason: .connectionError, latency: latency)
    }

    /// Classifies a request of ``HTTP2Client`` that got no response: every one is retryable.
    package static func transportFailure(_ error: HTTP2RequestError, latency: Duration? = nil) -> DeliveryOutcome {
        switch error {
        case .timeout: DeliveryOutcome(.retry, reason: .timeout, latency: latency)
        case .cancelled: DeliveryOutcome(.retry, reason: .cancelled, latency: latency)
        case .notSent, .connectionClosed, .shutDown:
            DeliveryOutcome(.retry, reason: .connectionClosed, latency: latency)
        case .connectFailed, .http2NotNegotiated, .streamReset, .responseTooLarge:
            DeliveryOutcome(.retry, reason: .connectionError, latency: latency)
        }
    }

    /// A `Retry-After` header (seconds, or an HTTP date) as a duration.
    package static func retryAfter(_ headers: HTTPHeaders, now: Date = Date()) -> Duration? {
        retryAfter(headers.first(name: "retry-after"), now: now)
    }

    /// A `Retry-After` value (seconds, or an HTTP date) as a duration.
    package static func retryAfter(_ header: String?, now: Date = Date()) -> Duration? {
        guard let value = header?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        if let date = formatter.date(from: value) {
            return .seconds(max(0, Int(date.timeIntervalSince(now).rounded(.up))))
        }
        return nil
    }
}
