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
    /// No parameters: the pattern matches its own text.
    var isLiteral: Bool { !segments.contains { if case .parameter = $0 { true } else { false } } }
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
            // Cut on the UTF-8 bytes ("/" is ASCII): a split by Characters walked each path's
            // graphemes, twice for every WebSocket upgrade.
            var path = path
            let runs = path.withUTF8 { bytes -> [Range<Int>] in
                var runs: [Range<Int>] = [], start = 0
                for (offset, byte) in bytes.enumerated() where byte == UInt8(ascii: "/") {
                    if offset > start { runs.append(start..<offset) }
                    start = offset + 1
                }
                if bytes.count > start { runs.append(start..<bytes.count) }
                return runs
            }
            let utf8 = path.utf8
            parts = runs.map { Substring(utf8[utf8.index(utf8.startIndex, offsetBy: $0.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: $0.upperBound)]) }
            trailingSlash = utf8.last == UInt8(ascii: "/")
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

/// One row of a routing table; `App` is the object whose handlers it calls. A class: a request
/// passes its route along several times, and a copy of a reference is one retain where a copy of
/// the row's strings, pattern and handlers was one each.
public final class Route<App: Sendable>: Sendable {
    /// Answers, or throws a `Problem` (or `ProblemError`, with headers) for the one place that renders them.
    public typealias Handler = @Sendable (App, RequestContext) async throws -> HTTPResponse

    public let method: HTTPMethod
    public let pattern: PathPattern
    /// A bounded, stable name for logs and metrics.
    public let name: String
    public let handler: Handler
    /// The same answer made without suspending, for a fixed document (the discovery document, a
    /// page, a script): the edge's thread may answer it itself, with no task. Nil for the rest.
    public let now: NowHandler?
    public typealias NowHandler = @Sendable (App, RequestContext) throws -> HTTPResponse

    public init(_ method: HTTPMethod, _ pattern: String, _ name: String, _ handler: @escaping Handler) {
        self.method = method
        self.pattern = PathPattern(pattern)
        self.name = name
        self.handler = handler
        self.now = nil
    }

    public init(_ method: HTTPMethod, _ pattern: String, _ name: String, now: @escaping NowHandler) {
        self.method = method
        self.pattern = PathPattern(pattern)
        self.name = name
        self.handler = { app, context in try now(app, context) }
        self.now = now
    }
}

/// Finds the route for a request, telling "no such path" (404) from "path
/// exists, other method" (405).
public struct Router<App: Sendable>: Sendable {
    public enum Match: Sendable {
        case found(Route<App>, [String: String])
        case methodNotAllowed(allowed: [HTTPMethod])
        case notFound
    }

    public let routes: [Route<App>]
    /// Routes without parameters by their path, looked up before the scan: most requests name one
    /// exactly, and the scan splits the path and tries every pattern. Only routes the scan would
    /// find first for their own path are here, so the lookup never answers differently.
    @usableFromInline let exact: [String: [Route<App>]]

    public init(_ routes: [Route<App>]) {
        self.routes = routes
        var exact: [String: [Route<App>]] = [:]
        for route in routes where route.pattern.isLiteral {
            let path = route.pattern.description
            if case .found(let first, _) = Self.scan(routes, route.method, path), first.pattern.description == path {
                exact[path, default: []].append(route)
            }
        }
        self.exact = exact
    }

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

    /// Inlinable, so that the caller's module runs it specialised for its `App`: generic, the
    /// lookup instantiated `Route<App>`'s metadata and ran the unspecialised `first(where:)` for
    /// every request (2 % of a fixed document's answer).
    @inlinable
    public func match(_ method: HTTPMethod, _ path: String) -> Match {
        if let candidates = exact[path] {
            if let route = candidates.first(where: { $0.method == method }) ?? candidates.first(where: { method == .HEAD && $0.method == .GET }) {
                return .found(route, [:])
            }
        }
        return Self.scan(routes, method, path)
    }

    @usableFromInline
    static func scan(_ routes: [Route<App>], _ method: HTTPMethod, _ path: String) -> Match {
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
