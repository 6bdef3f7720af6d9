import Foundation
import KassaCore
import KassaEdge
import KassaStore
import Logging
import Synchronization

/// Times the request, counts it, logs it, and writes it to the event log (probes excepted, and
/// fixed documents unless refused); stamps `x-request-id` on every answer and empties the body of a HEAD.
struct AccessLog: Middleware {
    let metrics: KassaMetrics
    let eventLog: EventLog
    let clock: any WallClock
    let logger: Logger

    func leave(_ exchange: Exchange, _ outcome: Result<HTTPResponse, any Error>) throws -> HTTPResponse {
        var response = try outcome.get()
        let request = exchange.request
        response.headers.append(("x-request-id", exchange.requestID))
        if request.method == .HEAD { response.body = [] }
        let ms = exchange.started.duration(to: .now).inMilliseconds
        let routeName = exchange.routeName
        metrics.httpRequest(route: routeName, status: response.status, seconds: ms / 1000)
        if logger.logLevel <= .debug {   // the metadata is built only for a line that is written
            var metadata: Logger.Metadata = ["trace_id": "\(exchange.traceID)", "request_id": "\(exchange.requestID)", "route": "\(routeName)"]
            if let spanID = exchange.spanID { metadata["span_id"] = "\(spanID)" }
            logger.debug("\(request.method.rawValue) \(request.path) \(response.status)", metadata: metadata)
        }
        // A fixed document (the discovery document, a page, a script) concerns no payment: support
        // reads its count in the metrics, and the event log keeps only its refusals (a wrong key).
        let fixedDocument = exchange.match?.route.now != nil
        if routeName != "health", !fixedDocument || response.status >= 400 {
            eventLog.append(LogEvent(
                atMs: clock.nowMs(), sessionID: exchange.sessionID,
                kind: "http.request", level: response.status >= 500 ? .error : .info,
                summary: "\(request.method.rawValue) \(request.path) → \(response.status)", durationMs: ms, status: response.status,
                traceID: exchange.traceID,
                data: ["method": .string(request.method.rawValue), "path": .string(request.path), "route": .string(routeName),
                       "remote": .string(ClientAddress.network(request.remoteAddress)), "requestId": .string(exchange.requestID)]))
        }
        return response
    }
}

/// The one place a thrown problem becomes an answer: stamped with the request's
/// `instance`, counted by type. Any other error is a 500 that does not leak its cause.
struct ProblemRendering: Middleware {
    let metrics: KassaMetrics
    let logger: Logger

    func leave(_ exchange: Exchange, _ outcome: Result<HTTPResponse, any Error>) throws -> HTTPResponse {
        switch outcome {
        case .success(let response): return response
        case .failure(let error):
            if !ProblemError.isProblem(error) {
                var metadata: Logger.Metadata = ["request_id": "\(exchange.requestID)", "trace_id": "\(exchange.traceID)", "error": "\(error)"]
                if let spanID = exchange.spanID { metadata["span_id"] = "\(spanID)" }
                logger.error("request failed", metadata: metadata)
            }
            var answer = ProblemError(answering: error)
            if answer.problem.instance == nil { answer.problem.instance = "urn:kassa:request:\(exchange.requestID)" }
            metrics.problem(type: answer.problem.type)
            return .problem(answer.problem, headers: answer.headers)
        }
    }
}

/// Every door's limits, for HTTP requests and WebSocket upgrades alike (`Gateway.shouldAcceptWebSocket`):
/// - the request rate per client address and per API key (opt-in: behind a proxy every client has its address);
/// - failed authentication, on by default: each 401 takes a token from the caller's address and from the
///   credential it tried (a session, the admin token, an API key's digest). An address out of tokens is refused
///   before anything is checked; a credential out of tokens turns only wrong guesses into 429, so a stranger who
///   knows a session's id cannot lock its client out.
/// Probes are never limited. Answers 429 with `Retry-After`.
final class Throttle: Middleware {
    let perAddress: Mutex<RateLimiter>?
    let perKey: Mutex<RateLimiter>?
    let failuresPerAddress: Mutex<RateLimiter>?
    let failuresPerCredential: Mutex<RateLimiter>?
    let metrics: KassaMetrics
    let clock: any WallClock

    init(configuration: GatewayConfiguration, metrics: KassaMetrics, clock: any WallClock) {
        self.clock = clock
        self.metrics = metrics
        perAddress = configuration.rateLimitPerIP > 0 ? Mutex(RateLimiter(ratePerSecond: configuration.rateLimitPerIP)) : nil
        perKey = configuration.rateLimitPerKey > 0 ? Mutex(RateLimiter(ratePerSecond: configuration.rateLimitPerKey)) : nil
        let failures = Double(configuration.authFailuresPerMinute)
        failuresPerAddress = failures > 0 ? Mutex(RateLimiter(ratePerSecond: failures / 60, burst: failures)) : nil
        failuresPerCredential = failures > 0 ? Mutex(RateLimiter(ratePerSecond: failures / 60, burst: failures)) : nil
    }

    func enter(_ exchange: Exchange) throws -> HTTPResponse? {
        let request = exchange.request
        guard !Gateway.isProbe(request.path) else { return nil }
        if let refused = refusal(address: request.remoteAddress, apiKey: request.headers[MerchantAPI.apiKeyHeader]) {
            exchange.routeName = "rate-limited"
            throw refused
        }
        return nil
    }

    func leave(_ exchange: Exchange, _ outcome: Result<HTTPResponse, any Error>) throws -> HTTPResponse {
        let request = exchange.request
        guard case .failure(let error) = outcome, !Gateway.isProbe(request.path) else { return try outcome.get() }
        guard let blocked = afterAnswer(ProblemError(answering: error).problem.status, address: request.remoteAddress,
                                        path: request.path, headers: request.headers) else { throw error }
        exchange.routeName = "rate-limited"
        throw blocked
    }

    /// After an answer: a 401 is a failed authentication, recorded; the 429 to send instead when
    /// the address or the credential has no failure left.
    func afterAnswer(_ status: Int, address: String, path: String, headers: HTTPHeaders) -> ProblemError? {
        guard status == 401 else { return nil }
        return failedAuthentication(address: address, credential: Self.credential(path, headers))
    }

    /// The 429 for a caller over its request rate, or whose address failed authentication too often.
    func refusal(address: String, apiKey: String?) -> ProblemError? {
        let now = Double(clock.nowMs()) / 1000
        if let wait = failuresPerAddress?.withLock({ $0.wait(address, now: now) }) {
            return tooMany(wait, "too many failed authentications from this address", reason: "auth-address")
        }
        if let wait = perAddress?.withLock({ $0.take(address, now: now) }) { return tooMany(wait, "slow down", reason: "address") }
        if let apiKey, !apiKey.isEmpty, let wait = perKey?.withLock({ $0.take(Hashing.sha256Hex(apiKey), now: now) }) {
            // Keys are held as digests, so the limiter's memory holds no secret.
            return tooMany(wait, "slow down", reason: "key")
        }
        return nil
    }

    /// Records a refused credential; the 429 that replaces the 401 when its address or the
    /// credential has no failure left.
    private func failedAuthentication(address: String, credential: String?) -> ProblemError? {
        let now = Double(clock.nowMs()) / 1000
        metrics.authenticationFailed()
        let byAddress = failuresPerAddress?.withLock { $0.take(address, now: now) }
        let byCredential = credential.flatMap { c in failuresPerCredential?.withLock { $0.take(c, now: now) } }
        if let wait = byCredential { return tooMany(wait, "too many failed authentications for this credential", reason: "auth-credential") }
        if let wait = byAddress { return tooMany(wait, "too many failed authentications from this address", reason: "auth-address") }
        return nil
    }

    /// What a request tried to open: the session in its path, the admin token, or the API key it carries (as a digest).
    static func credential(_ path: String, _ headers: HTTPHeaders) -> String? {
        if path.hasPrefix("/v1/sessions/") {
            let id = path.dropFirst("/v1/sessions/".count).prefix { $0 != "/" }
            if !id.isEmpty { return "session:" + id }
        }
        if path.hasPrefix("/v1/admin") { return "admin" }
        if let key = headers[MerchantAPI.apiKeyHeader], !key.isEmpty { return "key:" + Hashing.sha256Hex(key) }
        return nil
    }

    private func tooMany(_ wait: Double, _ detail: String, reason: String) -> ProblemError {
        metrics.rateLimited(reason: reason)
        let seconds = max(1, Int(wait.rounded(.up)))
        return ProblemError(.kassa("rate-limited", "Too Many Requests", 429, detail: "\(detail): retry after \(seconds) s",
                                   extensions: ["retryAfter": .number(Double(seconds))]),
                            headers: [("retry-after", String(seconds))])
    }
}

/// Lets a request with a route on (404, or 405 with `Allow`, when there is none), so the links after it know it.
/// A body must be JSON (`application/json`, `application/…+json`, or no type), else 415; only the issuer's
/// 3-D Secure notification takes a form.
struct Routing: Middleware {
    static let formRoutes: Set<String> = ["sessions.3ds-notification"]

    /// A missing type is taken as JSON (clients built on the SDKs' samples leave it out); a named
    /// other type is refused.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return true }
        let mediaType = contentType.utf8.firstIndex(of: UInt8(ascii: ";")).map { contentType[..<$0] } ?? contentType[...]
        let type = mediaType.trimmingHTTPSpace().lowercased()
        return type == "application/json" || (type.hasPrefix("application/") && type.hasSuffix("+json"))
    }

    func enter(_ exchange: Exchange) throws -> HTTPResponse? {
        let request = exchange.request
        switch exchange.routing {
        case .found(let route, let parameters):
            exchange.routeName = route.name
            exchange.match = (route, parameters)
            if !request.body.isEmpty, !Self.formRoutes.contains(route.name), !Self.isJSON(request.headers["content-type"]) {
                throw Problem.kassa("unsupported-media-type", "Unsupported Media Type", 415,
                                    detail: "send the body as application/json, not \(request.headers["content-type"] ?? "")")
            }
            return nil
        case .methodNotAllowed(let allowed):
            let list = allowed.map(\.rawValue).joined(separator: ", ")
            throw ProblemError(.methodNotAllowed("\(request.method.rawValue) is not allowed on \(request.path); allowed: \(list)"),
                               headers: [("allow", list)])
        case .notFound where request.path.hasPrefix(MerchantAPI.root):
            // The apps' SDKs recognise Swedbank Pay's own type, not Kassa's.
            throw MerchantProblem.notFound("no route for \(request.path)")
        case .notFound:
            throw Problem.notFound("no route for \(request.path)")
        }
    }
}

/// Who may call a route; checked before its handler runs.
enum Access: Sendable {
    /// No credential (pages, probes, the payment-url helpers).
    case open
    /// The Merchant API key, refused with the seed's own problem type.
    case merchantKey
    /// The Merchant API key, refused with Kassa's problem and `WWW-Authenticate`.
    case apiKey
    /// The admin token.
    case admin
    /// The session's client token, checked by the handler (it needs the session).
    case clientToken
}

/// Checks the route's `Access` with the credentials from the gateway's configuration.
struct Authentication: Middleware {
    let apiKeys: [String]
    let adminToken: String
    let access: @Sendable (String) -> Access

    func enter(_ exchange: Exchange) throws -> HTTPResponse? {
        let request = exchange.request
        switch access(exchange.routeName) {
        case .open, .clientToken: break
        case .merchantKey:
            guard hasAPIKey(request) else { throw MerchantProblem.unauthorized() }
        case .apiKey:
            guard hasAPIKey(request) else { throw Gateway.unauthorized("the Your-Api-Key header is missing or holds no valid key") }
        case .admin:
            guard Self.holdsAdminToken(request.headers, query: request.query, adminToken: adminToken) else {
                throw Gateway.unauthorized("the admin token is required (Authorization: Bearer)")
            }
        }
        return nil
    }

    /// The admin token as bearer header or `?token=` (the admin page's stream), compared in constant time.
    static func holdsAdminToken(_ headers: HTTPHeaders, query: [(name: String, value: String)], adminToken: String) -> Bool {
        guard let token = Gateway.clientToken(headers, query: query), !token.isEmpty else { return false }
        return Secrets.constantTimeEquals(token, adminToken)
    }

    func hasAPIKey(_ request: HTTPRequest) -> Bool {
        guard let key = request.headers[MerchantAPI.apiKeyHeader], !key.isEmpty else { return false }
        return Secrets.matchesAny(key, apiKeys)
    }
}
