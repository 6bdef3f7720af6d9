import Foundation
import KassaCore
import KassaEdge
import KassaStore
import KassaUpstream
import Logging
import Synchronization

/// The application behind the edge: finds the route for each request, runs
/// it, and writes what happened to the event log.
public final class Gateway: EdgeHandler {
    public let configuration: GatewayConfiguration
    public let store: Store
    public let upstream: UpstreamClient
    let logger: Logger
    let router: Router<Gateway>
    private let edgeReference = Mutex<EdgeServer?>(nil)
    /// The sessions this node holds.
    let sessions: SessionService
    public let metrics: KassaMetrics
    /// Rate limits by client address and by API key.
    let ipLimiter: Mutex<RateLimiter>?
    let keyLimiter: Mutex<RateLimiter>?
    let idempotencyInFlight = Mutex<Set<String>>([])
    /// Admin page connections following the event log, by connection, with their session filter.
    let adminStreams = Mutex<[UInt64: String?]>([:])
    /// Swedbank Pay: logged calls, retries, breakers.
    let swedbankPay: SwedbankPayClient
    /// Keys for client tokens, from the cluster secrets.
    var tokenKeys: TokenKeys { sessions.tokenKeys }

    /// Throws `TokenKeys.WeakSecret` for a cluster secret that is short or weak.
    public init(configuration: GatewayConfiguration, store: Store, upstream: UpstreamClient, logger: Logger) throws {
        let tokenKeys = try TokenKeys(secrets: configuration.clusterSecrets)
        self.configuration = configuration
        self.store = store
        self.upstream = upstream
        self.logger = logger
        self.router = Router(Gateway.routes)
        let upstreamHost = UpstreamURL(configuration.upstreamURL)?.host ?? ""
        let metrics = KassaMetrics()
        self.metrics = metrics
        swedbankPay = SwedbankPayClient(configuration: configuration, http: upstream, eventLog: store.eventLog, metrics: metrics, logger: logger)
        sessions = SessionService(configuration: configuration, store: store, tokenKeys: tokenKeys, swedbankPay: swedbankPay,
                                  metrics: metrics, logger: logger)
        ipLimiter = configuration.rateLimitPerIP > 0 ? Mutex(RateLimiter(ratePerSecond: configuration.rateLimitPerIP)) : nil
        keyLimiter = configuration.rateLimitPerKey > 0 ? Mutex(RateLimiter(ratePerSecond: configuration.rateLimitPerKey)) : nil
        store.eventLog.onCommit { [weak self] events in self?.forwardToAdminStreams(events) }
        metrics.prepare(upstreamHost: upstreamHost)
        store.eventLog.onWrite { count, seconds, ok in
            if ok { metrics.eventLogBatch(count: count, seconds: seconds) } else { metrics.eventLogWriteError() }
        }
    }

    /// The edge that serves this gateway, for WebSocket sends.
    public func attach(_ edge: EdgeServer) {
        edgeReference.withLock { $0 = edge }
        sessions.attach(edge)
    }
    var edge: EdgeServer? { edgeReference.withLock { $0 } }

    /// Header names the edge must read beyond the ones libwebsockets knows.
    public static let customHeaderNames = ["idempotency-key", "traceparent", "x-request-id", MerchantAPI.apiKeyHeader]

    // MARK: WebSockets: session streams and the admin stream

    public func shouldAcceptWebSocket(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        upgrade.path == Self.adminStreamPath ? shouldAcceptAdminStream(upgrade) : sessions.shouldAcceptStream(upgrade)
    }

    public func webSocketOpened(_ upgrade: WebSocketUpgrade) {
        metrics.webSocketOpened(open: edge?.openWebSockets ?? 0)
        if upgrade.path == Self.adminStreamPath { adminStreamOpened(upgrade) } else { sessions.streamOpened(upgrade) }
    }

    public func webSocketReceived(_ connectionID: UInt64, text: String) {
        sessions.streamReceived(connectionID, text: text)
    }

    public func webSocketClosed(_ connectionID: UInt64, code: UInt16?) {
        metrics.webSocketClosed(code: code, open: edge?.openWebSockets ?? 0)
        adminStreams.withLock { _ = $0.removeValue(forKey: connectionID) }
        sessions.streamClosed(connectionID, code: code)
    }

    public func frameWritten(after latency: Duration) {
        metrics.pushWritten(after: latency)
    }

    // MARK: HTTP

    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        let started = ContinuousClock.now
        let requestID = request.headers["x-request-id"].flatMap { Self.isSafeToken($0) ? $0 : nil } ?? Secrets.randomHex(bytes: 8)
        let traceID = TraceContext.traceID(fromTraceparent: request.headers["traceparent"]) ?? TraceContext.newTraceID()
        var (routeName, response): (String, HTTPResponse)
        if let refusal = rateLimited(request) {
            (routeName, response) = ("rate-limited", refusal)
        } else {
            (routeName, response) = await router.respond(self, request, requestID: requestID, traceID: traceID)
        }
        if response.contentType == Problem.contentType {
            response = Self.stampInstance(response, requestID: requestID)
            if let type = (try? JSONValue.parse(response.body))?["type"]?.stringValue { metrics.problem(type: type) }
        }
        response.headers.append(("x-request-id", requestID))
        if request.method == .HEAD { response.body = [] }

        let elapsed = started.duration(to: .now)
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        metrics.httpRequest(route: routeName, status: response.status, seconds: ms / 1000)
        logger.debug("\(request.method.rawValue) \(request.path) \(response.status)",
                     metadata: ["trace_id": "\(traceID)", "request_id": "\(requestID)", "route": "\(routeName)"])
        if routeName != "health" {
            store.eventLog.append(LogEvent(
                atMs: Self.nowMs(), sessionID: Self.sessionID(of: request, routeName: routeName, response: response),
                kind: "http.request", level: response.status >= 500 ? .error : .info,
                summary: "\(request.method.rawValue) \(request.path) → \(response.status)", durationMs: ms, status: response.status,
                traceID: traceID,
                data: ["method": .string(request.method.rawValue), "path": .string(request.path), "route": .string(routeName),
                       "remote": .string(request.remoteAddress), "requestId": .string(requestID)]))
        }
        return response
    }

    /// 429 with Retry-After when the client address or the API key is over its rate; probes are never limited.
    func rateLimited(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.path != "/healthz", request.path != "/readyz", request.path != "/metrics" else { return nil }
        let now = Date().timeIntervalSince1970
        var wait = ipLimiter?.withLock { $0.take(request.remoteAddress, now: now) }
        if wait == nil, let key = request.headers[MerchantAPI.apiKeyHeader], !key.isEmpty {
            // Keys are held as digests, so the limiter's memory holds no secret.
            wait = keyLimiter?.withLock { $0.take(Hashing.sha256Hex(key), now: now) }
        }
        guard let wait else { return nil }
        let seconds = max(1, Int(wait.rounded(.up)))
        return .problem(.kassa("rate-limited", "Too Many Requests", 429, detail: "slow down: retry after \(seconds) s",
                               extensions: ["retryAfter": .number(Double(seconds))]),
                        headers: [("retry-after", String(seconds))])
    }

    /// The session a request concerns: from its path, or for a create, from the answer.
    static func sessionID(of request: HTTPRequest, routeName: String, response: HTTPResponse) -> String? {
        if routeName == "sessions.create", response.status == 201 {
            return (try? JSONValue.parse(response.body))?["id"]?.stringValue
        }
        guard routeName.hasPrefix("sessions.") else { return nil }
        let parts = request.path.split(separator: "/")
        guard parts.count >= 3, PaymentURLHelper.isSafeID(String(parts[2])) else { return nil }
        return String(parts[2])
    }

    static func stampInstance(_ response: HTTPResponse, requestID: String) -> HTTPResponse {
        guard case .object(var object)? = try? JSONValue.parse(response.body), object["instance"] == nil else { return response }
        object["instance"] = .string("urn:kassa:request:\(requestID)")
        var stamped = response
        stamped.body = JSONValue.object(object).bytes
        return stamped
    }

    static func isSafeToken(_ s: String) -> Bool {
        !s.isEmpty && s.count <= 64 && s.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
    }

    public static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    // MARK: Operations

    func metricsPage(_ context: RequestContext) async -> HTTPResponse {
        HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                     body: Array(metrics.scrape(eventLogQueue: store.eventLog.pendingCount, sqliteMemory: Store.sqliteMemoryBytes).utf8))
    }

    func healthz(_ context: RequestContext) async -> HTTPResponse {
        .json(["status": "ok"])
    }

    func readyz(_ context: RequestContext) async -> HTTPResponse {
        let storeOK = store.isHealthy()
        let upstreamOK = await swedbankPay.reachable()
        var checks: [String: JSONValue] = ["store": .string(storeOK ? "ok" : (store.eventLog.lastWriteError ?? "unavailable")),
                                           "upstream": .string(upstreamOK ? "ok" : "unreachable")]
        if storeOK && upstreamOK {
            checks["status"] = "ready"
            return .json(.object(checks))
        }
        var problem = Problem.serviceUnavailable("not ready: " + [storeOK ? nil : "store", upstreamOK ? nil : "upstream"].compactMap { $0 }.joined(separator: ", "))
        problem.extensions["checks"] = .object(checks)
        return .problem(problem)
    }
}
