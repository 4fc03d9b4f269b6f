import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import Queue
import ServiceLifecycle

/// The operator console: server-rendered pages to see the queue, find a job or a user, replay or
/// purge dead letters, and pause, resume or cancel, served by `herald run` on its own port.
///
/// Off unless `console.credentials` (or `console.credentials_file`) is set. Every request needs
/// HTTP Basic credentials of a ``ConsoleCredentials`` account; a viewer reads, an operator also
/// acts. Every state-changing request is a POST carrying the account's CSRF token (and, when the
/// browser sends one, an `Origin` of this host), and asks for a confirmation that says how many
/// jobs or dead letters it touches before it does anything. Each action is logged with who did it
/// and written to `herald.audit_log`. Failed logins are limited per client address
/// (``LoginLimiter``). Device tokens never reach a page: devices are shown by their hash.
package struct ConsoleServer: Service {
    package struct Configuration: Sendable {
        /// Listen address (`console.host`). Default `0.0.0.0`.
        package var host = "0.0.0.0"
        /// Listen port (`console.port`). Default 8081; 0 picks a free port.
        package var port = 8081
        /// The accounts; nil turns the console off. From `console.credentials[_file]`.
        package var credentials: ConsoleCredentials?
        package init() {}
    }

    let outbox: Outbox
    let configuration: Configuration
    let credentials: ConsoleCredentials
    /// Each device provider's adapter in this process (`live`, `local`, `sink`, `off`).
    let adapters: [String: String]
    /// Each provider's circuit state in this process (0 closed, 1 half-open, 2 open).
    let circuits: @Sendable () -> [String: Int]
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void
    let limiter = LoginLimiter()
    let library: MustacheLibrary

    /// - Parameter credentials: the accounts (`configuration.credentials`, which the caller
    ///   checked: without them there is no console).
    package init(
        outbox: Outbox,
        configuration: Configuration,
        credentials: ConsoleCredentials,
        adapters: [String: String],
        circuits: @escaping @Sendable () -> [String: Int],
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws {
        self.outbox = outbox
        self.configuration = configuration
        self.credentials = credentials
        self.adapters = adapters
        self.circuits = circuits
        self.logger = logger
        self.onListening = onListening
        var library = MustacheLibrary()
        for (name, text) in ConsoleTemplates.all { try library.register(text, named: name) }
        self.library = library
    }

    package func run() async throws {
        let router = Router(context: ConsoleContext.self)
        router.add(middleware: ConsoleGuard(credentials: credentials, limiter: limiter, logger: logger))
        router.get("style.css") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "max-age=300"],
                body: .init(byteBuffer: ByteBuffer(string: ConsoleTemplates.stylesheet))
            )
        }
        router.get("/") { _, context in try self.render("overview", try await self.overview(), context) }
        router.get("jobs") { request, context in
            try self.render("jobs", try await self.jobs(FormFields(request.uri.query ?? "")), context)
        }
        router.get("jobs/:id") { _, context in
            guard let id = context.parameters.get("id").flatMap({ Int64($0) }) else {
                return try self.message(.badRequest, "Not a job id", "A job id is a number.", back: "/jobs", context)
            }
            guard let view = try await self.job(id) else {
                return try self.message(
                    .notFound,
                    "No such job",
                    "Herald has no record of job \(id).",
                    back: "/jobs",
                    context
                )
            }
            return try self.render("job", view, context)
        }
        router.get("users") { request, context in
            if let user = FormFields(request.uri.query ?? "")["user"] {
                return Response(status: .seeOther, headers: [.location: "/users/" + user.pathSegment])
            }
            return try self.render("users", [:], context)
        }
        router.get("users/:id") { _, context in
            let user = context.parameters.get("id").flatMap { $0.removingPercentEncoding } ?? ""
            return try self.render("user", try await self.user(user), context)
        }
        router.get("dead-letters") { request, context in
            try self.render("dead-letters", try await self.deadLetters(FormFields(request.uri.query ?? "")), context)
        }
        router.post("dead-letters") { request, context in
            try await self.act(request, context) { form in try await self.deadLetterAction(form, context) }
        }
        router.get("control") { _, context in try self.render("control", try await self.control(), context) }
        router.post("control") { request, context in
            try await self.act(request, context) { form in try await self.controlAction(form, context) }
        }
        let onListening = self.onListening
        let app = Application(
            router: router,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "herald-console"
            ),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        try await app.run()  // a Service of the worker's group: no signal handlers of its own
    }

    // MARK: - Rendering

    /// Renders `template` with `view` plus what every page shows (the account, the navigation,
    /// `has<Name>` for each list, the CSRF token for operators).
    func render(
        _ template: String,
        _ view: [String: Any],
        _ context: ConsoleContext,
        status: HTTPResponse.Status = .ok
    )
        throws -> Response
    {
        var view = view
        for (key, value) in view {
            if let list = value as? [Any] { view["has" + key.prefix(1).uppercased() + key.dropFirst()] = !list.isEmpty }
        }
        view["account"] = context.account
        view["role"] = context.role.rawValue
        view["canAct"] = context.role == .operator
        if context.role == .operator { view["csrf"] = credentials.csrfToken(for: context.account) }
        let nav: [String: String] = [
            "overview": "overview", "jobs": "jobs", "job": "jobs", "users": "users", "user": "users",
            "dead-letters": "deadLetters", "control": "control",
        ]
        if let item = nav[template] { view["nav"] = [item: true] }
        guard let html = library.render(view, withTemplate: template) else {
            throw HTTPError(.internalServerError, message: "no template \(template)")
        }
        return Response(
            status: status,
            headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: html))
        )
    }

    func message(
        _ status: HTTPResponse.Status,
        _ heading: String,
        _ text: String,
        back: String,
        _ context: ConsoleContext,
        success: Bool = false
    ) throws -> Response {
        try render(
            "message",
            ["heading": heading, "text": text, "back": back, "class": success ? "done" : "error"],
            context,
            status: status
        )
    }

    /// A state-changing request: operators only, with the CSRF token; the form goes to `body`.
    func act(
        _ request: Request,
        _ context: ConsoleContext,
        _ body: (FormFields) async throws -> Response
    ) async throws
        -> Response
    {
        guard context.role == .operator else {
            return try message(.forbidden, "Not allowed", "Your role (viewer) can look, not act.", back: "/", context)
        }
        var request = request
        let buffer = try await request.collectBody(upTo: 1 << 20)
        let form = FormFields(String(buffer: buffer))
        guard let token = form["csrf"], credentials.checkCSRF(token, for: context.account) else {
            logger.warning(
                "Console request refused: missing or wrong CSRF token",
                metadata: ["console.user": "\(context.account)"]
            )
            return try message(
                .forbidden,
                "Refused",
                "The form's security token is missing or wrong: reload the page and try again.",
                back: "/",
                context
            )
        }
        do {
            return try await body(form)
        } catch let error as PostgresError {
            return try message(.badRequest, "Refused by the database", error.description, back: "/control", context)
        }
    }
}

/// The request context: the signed-in account and the client address (for the login limiter).
struct ConsoleContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    var account = ""
    var role = ConsoleRole.viewer

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Authenticates every request (HTTP Basic), limits failed logins, refuses cross-site POSTs and
/// adds the security headers to every answer.
struct ConsoleGuard: RouterMiddleware {
    typealias Context = ConsoleContext
    let credentials: ConsoleCredentials
    let limiter: LoginLimiter
    let logger: Logger

    @concurrent
    func handle(
        _ request: Request,
        context: Context,
        next: @concurrent (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        var response = try await authenticate(request, context: context, next: next)
        response.headers[HTTPField.Name("Content-Security-Policy")!] =
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        response.headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }

    @concurrent
    private func authenticate(
        _ request: Request,
        context: Context,
        next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        let address = context.remoteAddress?.ipAddress ?? "unknown"
        let now = Date().timeIntervalSince1970
        if let wait = limiter.retryAfter(address, now: now) {
            return Response(
                status: .tooManyRequests,
                headers: [.retryAfter: String(Int(wait.rounded(.up)))],
                body: .init(
                    byteBuffer: ByteBuffer(string: "Too many failed logins from this address; try again later.\n")
                )
            )
        }
        guard let header = request.headers[.authorization] else { return Self.challenge() }
        guard let (name, password) = Self.basic(header),
            let role = credentials.authenticate(name: name, password: password)
        else {
            limiter.recordFailure(address, now: now)
            logger.notice("Console login failed", metadata: ["console.client": "\(address)"])
            return Self.challenge()
        }
        if request.method == .post {
            // A browser says where a form came from; a form posted from another site is refused
            // even before its CSRF token is checked.
            if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site == "cross-site" {
                return Self.refuse("cross-site request refused")
            }
            if let origin = request.headers[.origin], let host = request.head.authority,
                origin != "http://\(host)" && origin != "https://\(host)"
            {
                return Self.refuse("request from another origin refused")
            }
        }
        var context = context
        context.account = name
        context.role = role
        return try await next(request, context)
    }

    static func challenge() -> Response {
        Response(
            status: .unauthorized,
            headers: [
                .wwwAuthenticate: "Basic realm=\"Herald console\", charset=\"UTF-8\"",
                .contentType: "text/plain; charset=utf-8",
            ],
            body: .init(byteBuffer: ByteBuffer(string: "Sign in with a console account.\n"))
        )
    }

    static func refuse(_ reason: String) -> Response {
        Response(
            status: .forbidden,
            headers: [.contentType: "text/plain; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: reason + "\n"))
        )
    }

    /// (name, password) from `Basic <base64(name:password)>`.
    static func basic(_ header: String) -> (String, String)? {
        guard header.prefix(6).lowercased() == "basic " else { return nil }
        guard let data = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }
}
