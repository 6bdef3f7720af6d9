import KassaCore
import KassaEdge

/// Browser access from other web origins. The client endpoints (a session read and its commands,
/// and the client kit) answer CORS for the origins of `--cors-origins`, preflight included; the
/// merchant and admin endpoints never do, whatever the origin. A stream upgrade from a page whose
/// Origin is neither Kassa's own nor listed is refused (no cross-site WebSocket hijacking).
public struct CrossOrigin: Middleware {
    /// Normalised origins (`https://shop.example`, `http://localhost:3000`).
    let allowed: Set<String>
    /// Kassa's own origin when `--public-url` names it; otherwise each request's Host stands for it.
    let ownOrigin: String?
    let router: Router<Gateway>
    let access: @Sendable (String) -> Access
    let metrics: KassaMetrics

    init(allowed: [String], publicBaseURL: String, router: Router<Gateway>, access: @escaping @Sendable (String) -> Access, metrics: KassaMetrics) {
        self.allowed = Set(allowed)
        ownOrigin = Gateway.origin(of: publicBaseURL).flatMap(Self.normalized)
        self.router = router
        self.access = access
        self.metrics = metrics
    }

    /// Open routes a page on another origin may read: the client library and the stream's contract.
    static let clientKitRoute = "client-kit"
    static let allowedMethods = "GET, POST"
    /// What a client sends: its token, a JSON body, and an idempotency key for commands.
    static let allowedHeaders = "authorization, content-type, idempotency-key"
    static let exposedHeaders = "idempotent-replayed, retry-after, www-authenticate, x-request-id"

    /// `scheme://host[:port]` in lower case, or nil for anything else (a path, a wildcard, `null`).
    public static func normalized(_ origin: String) -> String? { parsed(origin)?.origin }

    /// The normalised origin and its `host[:port]`, the scheme read by its prefix: every stream
    /// upgrade from a page comes here, and a generic split and substring search cost more than
    /// the rest of the check.
    static func parsed(_ origin: String) -> (origin: String, authority: Substring)? {
        var text = origin.lowercased()
        while text.hasSuffix("/") { text.removeLast() }
        let scheme = text.hasPrefix("https://") ? 8 : text.hasPrefix("http://") ? 7 : 0
        guard scheme > 0 else { return nil }
        let authority = text.dropFirst(scheme)
        // A host and a port alone: no path, wildcard or credentials gets past `isValidHost`.
        guard PaymentURLHelper.isValidHost(String(authority)) else { return nil }
        return (text, authority)
    }

    func isClientRoute(_ name: String) -> Bool {
        name == Self.clientKitRoute || access(name) == .clientToken
    }

    func enter(_ exchange: Exchange) throws -> HTTPResponse? {
        let request = exchange.request
        guard let origin = request.headers["origin"], request.method == .OPTIONS,
              let wanted = request.headers["access-control-request-method"] else { return nil }
        return preflight(request, origin: origin, method: wanted)
    }

    func leave(_ exchange: Exchange, _ outcome: Result<HTTPResponse, any Error>) throws -> HTTPResponse {
        var response = try outcome.get()
        guard let origin = exchange.request.headers["origin"], isClientRoute(exchange.routeName) else { return response }
        response.headers.append(("vary", "origin"))
        if let origin = Self.normalized(origin), allowed.contains(origin) {
            response.headers.append(("access-control-allow-origin", origin))
            response.headers.append(("access-control-expose-headers", Self.exposedHeaders))
        }
        return response
    }

    /// Answered only for a client route and a listed origin; anything else gets a 403 without
    /// CORS headers, which the browser reports as a refusal.
    private func preflight(_ request: HTTPRequest, origin: String, method: String) -> HTTPResponse {
        let route: String? = HTTPMethod(rawValue: method.uppercased()).flatMap {
            if case .found(let route, _) = router.match($0, request.path) { return route.name }
            return nil
        }
        guard let route, isClientRoute(route), let origin = Self.normalized(origin), allowed.contains(origin) else {
            return .problem(refused("no cross-origin \(method.prefix(10)) to \(request.path) from this origin: "
                                    + "only the client endpoints, for the origins of --cors-origins"), headers: [("vary", "origin")])
        }
        return HTTPResponse(status: 204, contentType: "text/plain", headers: [
            ("access-control-allow-origin", origin), ("access-control-allow-methods", Self.allowedMethods),
            ("access-control-allow-headers", Self.allowedHeaders), ("access-control-max-age", "600"), ("vary", "origin"),
        ])
    }

    /// A stream upgrade's Origin: none or a ws(s) one (an app, a server), Kassa's own (its Host, or
    /// the public URL), or, for session streams, a listed one; anything else is refused with 403.
    /// The admin stream takes only Kassa's own.
    func streamRefusal(origin: String?, host: String?, admin: Bool) -> Problem? {
        guard let origin else { return nil }
        // Browsers send only http(s) origins; a ws(s) one comes from a native WebSocket client
        // (SwiftNIO's sends its own URL), which could forge any Origin anyway.
        let lowered = origin.lowercased()
        if lowered.hasPrefix("ws://") || lowered.hasPrefix("wss://") { return nil }
        if let (normalized, authority) = Self.parsed(origin) {
            if let host, authority == host.lowercased() { return nil }
            if normalized == ownOrigin || (!admin && allowed.contains(normalized)) { return nil }
        }
        return refused("pages from \(origin.prefix(100)) may not open this stream" + (admin ? "" : "; list the origin in --cors-origins"))
    }

    /// The one refusal for an origin, counted.
    private func refused(_ detail: String) -> Problem {
        metrics.corsRefused()
        return .kassa("origin-not-allowed", "Forbidden", 403, detail: detail)
    }
}
