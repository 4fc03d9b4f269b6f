import NIOCore
import NIOHPACK

/// Where HTTP/2 requests go: an `https` origin and the path its URL adds in front of every
/// request path.
package struct HTTP2Endpoint: Hashable, Sendable {
    package var host: String
    package var port: Int
    /// The URL's path without its trailing slash (`""` for a bare origin).
    package var pathPrefix: String

    /// `host[:port]` as sent in `:authority`.
    package var authority: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == 443 ? name : "\(name):\(port)"
    }

    package init(host: String, port: Int = 443, pathPrefix: String = "") {
        self.host = host
        self.port = port
        self.pathPrefix = pathPrefix
    }

    /// Parses an `https` base URL such as `https://api.push.apple.com` or `https://127.0.0.1:8443/x`.
    ///
    /// - Throws: ``ProviderConfigurationError`` naming `setting` when the URL is not `https://host…`.
    package init(url: String, setting: String) throws {
        guard url.hasPrefix("https://") else {
            throw ProviderConfigurationError("\(setting) must be an https:// URL (HTTP/2 is negotiated through TLS)")
        }
        var rest = Substring(url.dropFirst("https://".count))
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var path = String(rest[slash...])
        rest = rest[..<slash]
        while path.hasSuffix("/") { path.removeLast() }
        var host: Substring
        var port = 443
        if rest.hasPrefix("[") {  // [IPv6]:port
            guard let close = rest.firstIndex(of: "]") else {
                throw ProviderConfigurationError("\(setting) has an unclosed IPv6 address")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else {
                    throw ProviderConfigurationError("\(setting) has an invalid port")
                }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else {
                throw ProviderConfigurationError("\(setting) has an invalid port")
            }
            port = p
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains("@") else {
            throw ProviderConfigurationError("\(setting) has no host")
        }
        self.host = String(host)
        self.port = port
        self.pathPrefix = path
    }
}

/// One request of a batch sent by ``HTTP2Client``.
package struct HTTP2Request: Sendable {
    package var method: String
    /// The path after the endpoint's prefix, starting with `/`.
    package var path: String
    /// Regular headers (lowercase names). Values that repeat across requests (a bearer token)
    /// are indexed by HPACK; add per-request values with `.nonIndexable`.
    package var headers: HPACKHeaders
    /// The `authorization` header, written after `headers`; separate so that a request prepared
    /// once can be sent with a fresh credential without copying its headers.
    package var authorization: String?
    package var body: ByteBuffer?

    package init(
        method: String = "POST",
        path: String,
        headers: HPACKHeaders = [:],
        authorization: String? = nil,
        body: ByteBuffer? = nil
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.authorization = authorization
        self.body = body
    }
}

/// A complete response.
package struct HTTP2Response: Sendable {
    package var status: Int
    package var headers: HPACKHeaders
    package var body: ByteBuffer

    /// The first value of a header, by lowercase name.
    package func header(_ name: String) -> String? { headers.first(name: name) }
}

/// Why a request has no response. The cases say what a retry may do.
package enum HTTP2RequestError: Error, Sendable, Equatable {
    /// The server never saw it (refused by GOAWAY or `REFUSED_STREAM`, or the connection was
    /// gone before it was written): sending it again cannot duplicate it.
    case notSent
    /// No complete response within the request timeout; the stream was cancelled.
    case timeout
    /// The connection closed while the request was in flight: the server may have processed it.
    case connectionClosed
    /// No connection could be made (TCP or TLS).
    case connectFailed
    /// TLS completed but the server did not choose `h2` by ALPN: it speaks HTTP/1.1 only.
    /// Nothing was sent.
    case http2NotNegotiated
    /// The server reset the stream.
    case streamReset
    /// The response body passed the client's limit.
    case responseTooLarge
    /// The client was shut down.
    case shutDown
    /// The calling task was cancelled; a written stream was reset.
    case cancelled
}
