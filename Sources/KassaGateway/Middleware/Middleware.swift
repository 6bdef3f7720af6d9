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
    /// When the gateway took the request, for its duration in the access log.
    let started = ContinuousClock.now
    private let notes = Mutex<(routeName: String, sessionID: String?)>(("unmatched", nil))
    /// The route routing found, with its path parameters.
    private let found = Mutex<(route: Route<Gateway>, parameters: [String: String])?>(nil)

    var match: (route: Route<Gateway>, parameters: [String: String])? {
        get { found.withLock { $0 } }
        set { found.withLock { $0 = newValue } }
    }

    /// What the route table holds for the request's method and path, looked up once.
    let routing: Router<Gateway>.Match

    init(request: HTTPRequest, routing: Router<Gateway>.Match, requestID: String, traceID: String, span: any Span, spanID: String?) {
        self.request = request
        self.routing = routing
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

/// A link of the chain, in two halves around the links inside it: `enter` lets the request on
/// (nil), answers it, or throws; `leave` sees what came back from inside (an answer or an error)
/// and passes on an answer or throws. A link that answered or threw in `enter` is not left: its
/// outer links see its outcome. Two halves rather than one call around `next`, so the same links
/// run in a task and, for fixed documents, on the edge's thread without one.
protocol Middleware: Sendable {
    func enter(_ exchange: Exchange) throws -> HTTPResponse?
    func leave(_ exchange: Exchange, _ outcome: Result<HTTPResponse, any Error>) throws -> HTTPResponse
}

extension Middleware {
    func enter(_ exchange: Exchange) throws -> HTTPResponse? { nil }
    func leave(_ exchange: Exchange, _ outcome: Result<HTTPResponse, any Error>) throws -> HTTPResponse { try outcome.get() }
}

/// The links in order, outermost first; the route's handler runs after the last.
struct MiddlewareChain: Sendable {
    let links: [any Middleware]

    func run(_ exchange: Exchange, innermost: (Exchange) async throws -> HTTPResponse) async throws -> HTTPResponse {
        let (entered, early) = enter(exchange)
        let outcome: Result<HTTPResponse, any Error>
        if let early { outcome = early } else {
            do { outcome = .success(try await innermost(exchange)) } catch { outcome = .failure(error) }
        }
        return try leave(exchange, entered: entered, outcome).get()
    }

    /// The same, with a handler that does not suspend.
    func runNow(_ exchange: Exchange, innermost: (Exchange) throws -> HTTPResponse) throws -> HTTPResponse {
        let (entered, early) = enter(exchange)
        let outcome = early ?? Result { try innermost(exchange) }
        return try leave(exchange, entered: entered, outcome).get()
    }

    /// Enters the links until one answers or throws: how many let the request on, and that outcome.
    /// (The links are called where they lie, by index: a loop over the array copied each link's
    /// existential box out and back, twice a request.)
    private func enter(_ exchange: Exchange) -> (entered: Int, early: Result<HTTPResponse, any Error>?) {
        for index in links.indices {
            do {
                if let answer = try links[index].enter(exchange) { return (index, .success(answer)) }
            } catch {
                return (index, .failure(error))
            }
        }
        return (links.count, nil)
    }

    /// Leaves the entered links, innermost first.
    private func leave(_ exchange: Exchange, entered: Int, _ outcome: Result<HTTPResponse, any Error>) -> Result<HTTPResponse, any Error> {
        var outcome = outcome
        for index in (0..<entered).reversed() {
            do { outcome = .success(try links[index].leave(exchange, outcome)) } catch { outcome = .failure(error) }
        }
        return outcome
    }
}
