import KassaCore
import KassaEdge
import Synchronization
import Tracing

/// One HTTP request on its way through the middleware chain: what the outer links
/// set for the inner ones (ids, the route) and what the handler tells the access log.
final class Exchange: Sendable {
    let request: HTTPRequest
    let requestID: String
    let traceID: String
    /// The request's server span (a no-op one with tracing off), and its id for log lines (nil when off).
    let span: any Span
    let spanID: String?
    private let notes = Mutex<(routeName: String, sessionID: String?)>(("unmatched", nil))
    /// The route routing found, with its path parameters.
    private let found = Mutex<(route: Route<Gateway>, parameters: [String: String])?>(nil)

    var match: (route: Route<Gateway>, parameters: [String: String])? {
        get { found.withLock { $0 } }
        set { found.withLock { $0 = newValue } }
    }

    init(request: HTTPRequest, requestID: String, traceID: String, span: any Span, spanID: String?) {
        self.request = request
        self.requestID = requestID
        self.traceID = traceID
        self.span = span
        self.spanID = spanID
    }

    /// The bounded route name for logs and metrics ("unmatched" until routing found one).
    var routeName: String {
        get { notes.withLock { $0.routeName } }
        set { notes.withLock { $0.routeName = newValue } }
    }

    /// The session the request concerns, when a handler knows it (a create learns it late).
    var sessionID: String? {
        get { notes.withLock { $0.sessionID } }
        set { notes.withLock { $0.sessionID = newValue } }
    }

    /// The exchange of the request the current task serves.
    @TaskLocal static var current: Exchange?
}

/// A link of the chain: does its part, then calls `next` (or answers, or throws, itself).
protocol Middleware: Sendable {
    func handle(_ exchange: Exchange, next: @Sendable (Exchange) async throws -> HTTPResponse) async throws -> HTTPResponse
}

/// The links in order, outermost first; `innermost` runs after the last.
struct MiddlewareChain: Sendable {
    let links: [any Middleware]

    func run(_ exchange: Exchange, innermost: @Sendable (Exchange) async throws -> HTTPResponse) async throws -> HTTPResponse {
        try await run(from: 0, exchange, innermost)
    }

    private func run(from index: Int, _ exchange: Exchange,
                     _ innermost: @Sendable (Exchange) async throws -> HTTPResponse) async throws -> HTTPResponse {
        guard index < links.count else { return try await innermost(exchange) }
        return try await links[index].handle(exchange) { try await run(from: index + 1, $0, innermost) }
    }
}
