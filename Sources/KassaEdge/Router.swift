import KassaCore


/// A path pattern such as `/v1/sessions/{id}/stream`: literal segments and
/// `{name}` parameters, each matching one non-empty segment.
public struct PathPattern: Sendable, CustomStringConvertible {
    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    let segments: [Segment]
    let hasTrailingSlash: Bool
    public let description: String

    public init(_ pattern: String) {
        description = pattern
        hasTrailingSlash = pattern.utf8.last == UInt8(ascii: "/")
        segments = pattern.split(separator: "/", omittingEmptySubsequences: true).map { part in
            part.hasPrefix("{") && part.hasSuffix("}") ? .parameter(String(part.dropFirst().dropLast())) : .literal(String(part))
        }
    }

    /// The parameters when `path` matches, else nil. A trailing slash matters
    /// only where the pattern has one (the Merchant API root is `/swedbank-pay-mobile/`).
    public func match(_ path: String) -> [String: String]? { match(RequestPath(path)) }

    /// A request path split once, then tried against every route's pattern.
    struct RequestPath {
        let parts: [Substring]
        let trailingSlash: Bool
        let isRoot: Bool

        init(_ path: String) {
            parts = path.split(separator: "/", omittingEmptySubsequences: true)
            trailingSlash = path.utf8.last == UInt8(ascii: "/")
            isRoot = path == "/"
        }
    }

    func match(_ path: RequestPath) -> [String: String]? {
        guard path.trailingSlash == hasTrailingSlash || path.isRoot, path.parts.count == segments.count else { return nil }
        // Literals first (bytes, as sent), so a path that does not match builds nothing.
        for (part, segment) in zip(path.parts, segments) {
            if case .literal(let literal) = segment, !part.utf8.elementsEqual(literal.utf8) { return nil }
        }
        var parameters: [String: String] = [:]
        for (part, segment) in zip(path.parts, segments) {
            if case .parameter(let name) = segment { parameters[name] = String(part) }
        }
        return parameters
    }
}

/// What a handler gets: the request, its path parameters, and its request id.
public struct RequestContext: Sendable {
    public let request: HTTPRequest
    public let parameters: [String: String]
    public let requestID: String
    public let routeName: String
    /// The W3C trace id this request belongs to (from `traceparent`, or new).
    public let traceID: String

    public init(request: HTTPRequest, parameters: [String: String], requestID: String, routeName: String, traceID: String) {
        self.request = request
        self.parameters = parameters
        self.requestID = requestID
        self.routeName = routeName
        self.traceID = traceID
    }
}

/// One row of a routing table; `App` is the object whose handlers it calls.
public struct Route<App: Sendable>: Sendable {
    /// Answers, or throws a `Problem` (or `ProblemError`, with headers) for the one place that renders them.
    public typealias Handler = @Sendable (App, RequestContext) async throws -> HTTPResponse

    public let method: HTTPMethod
    public let pattern: PathPattern
    /// A bounded, stable name for logs and metrics.
    public let name: String
    public let handler: Handler

    public init(_ method: HTTPMethod, _ pattern: String, _ name: String, _ handler: @escaping Handler) {
        self.method = method
        self.pattern = PathPattern(pattern)
        self.name = name
        self.handler = handler
    }
}

/// Finds the route for a request, telling "no such path" (404) from "path
/// exists, other method" (405).
public struct Router<App: Sendable>: Sendable {
    public enum Match {
        case found(Route<App>, [String: String])
        case methodNotAllowed(allowed: [HTTPMethod])
        case notFound
    }

    public let routes: [Route<App>]

    public init(_ routes: [Route<App>]) { self.routes = routes }

    /// Runs the matching route, or answers 404 / 405 (with `Allow`) problems.
    public func respond(_ app: App, _ request: HTTPRequest, requestID: String, traceID: String = "") async -> (route: String, response: HTTPResponse) {
        switch match(request.method, request.path) {
        case .found(let route, let parameters):
            let context = RequestContext(request: request, parameters: parameters, requestID: requestID, routeName: route.name, traceID: traceID)
            do { return (route.name, try await route.handler(app, context)) } catch {
                return (route.name, HTTPResponse.problem(for: error))
            }
        case .methodNotAllowed(let allowed):
            let list = allowed.map(\.rawValue).joined(separator: ", ")
            return ("unmatched", .problem(.methodNotAllowed("\(request.method.rawValue) is not allowed on \(request.path); allowed: \(list)"),
                                          headers: [("allow", list)]))
        case .notFound:
            return ("unmatched", .problem(.notFound("no route for \(request.path)")))
        }
    }

    public func match(_ method: HTTPMethod, _ path: String) -> Match {
        var allowed: [HTTPMethod] = []
        let path = PathPattern.RequestPath(path)
        for route in routes {
            guard let parameters = route.pattern.match(path) else { continue }
            if route.method == method || (method == .HEAD && route.method == .GET) {
                return .found(route, parameters)
            }
            allowed.append(route.method)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }
}
