import Foundation
import KassaCore
import KassaEdge
import KassaStore
import KassaUpstream
import Logging
import Synchronization
import Tracing

/// The application behind the edge: one middleware chain (access log, problem
/// rendering, rate limit, routing, authentication) in front of one route table, whose
/// handlers belong to small services: the Merchant API, the sessions, the support API.
public final class Gateway: EdgeHandler {
    public let configuration: GatewayConfiguration
    public let store: Store
    /// Wall-clock time for every event and rule (tests pass a `ManualClock`).
    public let clock: any WallClock
    let logger: Logger
    let router: Router<Gateway>
    private let edgeReference = Mutex<EdgeServer?>(nil)
    public let metrics: KassaMetrics
    /// Swedbank Pay: logged calls, retries, breakers.
    let swedbankPay: SwedbankPayClient
    /// The sessions this node holds.
    let sessions: SessionService
    let merchant: MerchantAPI
    let support: SupportAPI
    /// Spans: off unless the node was given a tracer (`--otlp-endpoint`).
    let telemetry: Telemetry
    private let chain: MiddlewareChain
    private let upstream: UpstreamClient
    let throttle: Throttle
    let crossOrigin: CrossOrigin
    let idempotencyInFlight = Mutex<Set<String>>([])
    /// Admin page connections following the event log, by connection, with their session filter.
    let adminStreams = Mutex<[UInt64: String?]>([:])
    /// Keys for client tokens, from the cluster secrets.
    var tokenKeys: TokenKeys { sessions.tokenKeys }

    /// `tokenKeys`: derived from `configuration.clusterSecrets` (see `KassaNode`).
    public init(configuration: GatewayConfiguration, tokenKeys: TokenKeys, store: Store, upstream: UpstreamClient,
                clock: any WallClock = SystemClock(), telemetry: Telemetry = .off, logger: Logger) {
        self.configuration = configuration
        self.telemetry = telemetry
        self.clock = clock
        self.store = store
        self.upstream = upstream
        self.logger = logger
        self.router = Router(Gateway.table.map(\.route))
        let metrics = KassaMetrics()
        self.metrics = metrics
        swedbankPay = SwedbankPayClient(configuration: configuration, http: upstream, eventLog: store.eventLog, metrics: metrics,
                                        clock: clock, telemetry: telemetry, logger: logger)
        sessions = SessionService(configuration: configuration, store: store, tokenKeys: tokenKeys, swedbankPay: swedbankPay,
                                  metrics: metrics, clock: clock, telemetry: telemetry, logger: logger)
        merchant = MerchantAPI(configuration: configuration, store: store, swedbankPay: swedbankPay, clock: clock, logger: logger)
        support = SupportAPI(store: store, node: configuration.nodeName, peers: configuration.peers,
                             adminToken: configuration.adminToken, http: upstream)
        let access = Gateway.access
        let throttle = Throttle(configuration: configuration, metrics: metrics, clock: clock)
        self.throttle = throttle
        let accessOf: @Sendable (String) -> Access = { access[$0] ?? .open }
        let crossOrigin = CrossOrigin(allowed: configuration.corsOrigins, publicBaseURL: configuration.publicBaseURL, router: router,
                                      access: accessOf, metrics: metrics)
        self.crossOrigin = crossOrigin
        chain = MiddlewareChain(links: [
            AccessLog(metrics: metrics, eventLog: store.eventLog, clock: clock, logger: logger),
            // Outside the problem rendering, so a refusal a page must read (401, 409) carries CORS too.
            crossOrigin,
            ProblemRendering(metrics: metrics, logger: logger),
            throttle,
            Routing(),
            Authentication(apiKeys: configuration.apiKeys, adminToken: configuration.adminToken, access: accessOf),
        ])
        store.eventLog.onCommit(isListening: { [weak self] in self?.adminStreams.withLock { !$0.isEmpty } ?? false }) { [weak self] events in
            self?.forwardToAdminStreams(events)
        }
        metrics.prepare(upstreamOrigin: swedbankPay.upstreamOrigin)
        store.eventLog.onWrite { count, seconds, ok in
            if ok { metrics.eventLogBatch(count: count, seconds: seconds) } else { metrics.eventLogWriteError() }
        }
        store.eventLog.onWALRestart { seconds in metrics.eventLogWALRestart(seconds: seconds) }
        let readTimers = metrics.sqliteReadTimers()
        store.onFileRead { reader, seconds in readTimers[reader]?.recordNanoseconds(Int64(seconds * 1e9)) }
    }

    /// The edge that serves this gateway, for WebSocket sends.
    public func attach(_ edge: EdgeServer) {
        edgeReference.withLock { $0 = edge }
        sessions.attach(edge)
    }
    var edge: EdgeServer? { edgeReference.withLock { $0 } }

    /// At start: takes up the sessions the store holds unfinished.
    public func recoverSessions() { sessions.recover() }

    /// The periodic sweep: ended sessions leave memory; with `waiting`, idle waiting ones too.
    public func evictSessions(nowMs: Int64, waiting: Bool) async { await sessions.evict(nowMs: nowMs, waiting: waiting) }

    /// Header names the edge must read beyond the ones libwebsockets knows.
    public static let customHeaderNames = ["idempotency-key", "traceparent", "x-request-id", MerchantAPI.apiKeyHeader,
                                           "access-control-request-method", "access-control-request-headers"]

    // MARK: WebSockets: session streams and the admin stream

    /// Upgrades pass the same throttle as requests: their rate, and their failed authentications.
    public func shouldAcceptWebSocket(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        if let refused = throttle.refusal(address: upgrade.remoteAddress, apiKey: nil) { return .problem(for: refused) }
        let admin = upgrade.path == Self.adminStreamPath
        if let refused = crossOrigin.streamRefusal(origin: upgrade.headers["origin"], host: upgrade.headers["host"], admin: admin) {
            return .problem(refused)
        }
        let answer = admin ? shouldAcceptAdminStream(upgrade) : sessions.shouldAcceptStream(upgrade)
        if let answer, let blocked = throttle.afterAnswer(answer.status, address: upgrade.remoteAddress, path: upgrade.path, headers: upgrade.headers) {
            return .problem(for: blocked)
        }
        return answer
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
        let exchange = begin(request, routing: router.match(request.method, request.path))
        let response = await Exchange.$current.withValue(exchange) {
            await ServiceContext.withValue(exchange.span.context) {
                do {
                    return try await chain.run(exchange) { exchange in
                        let route = try route(of: exchange)
                        return try await route.handler(self, context(of: exchange, route))
                    }
                } catch {
                    // ProblemRendering catches everything below it; only the access log could throw here.
                    return .problem(for: error)
                }
            }
        }
        telemetry.end(request: exchange.span, method: request.method, route: exchange.match?.route.pattern.description, status: response.status)
        return response
    }

    /// A fixed document (a route with a `now` handler) is answered on the edge's thread, through
    /// the same links, without a task: microseconds, no database read, no lock held across I/O.
    /// Everything else, and everything while tracing is on (its spans want the task's context), goes to `respond`.
    public func respondNow(to request: HTTPRequest) -> HTTPResponse? {
        let routing = router.match(request.method, request.path)
        guard !telemetry.isOn, case .found(let route, _) = routing, let now = route.now else { return nil }
        let exchange = begin(request, routing: routing)
        do {
            // The handler runs only once Routing has let the request on, with this same route.
            return try chain.runNow(exchange) { try now(self, context(of: $0, route)) }
        } catch {
            return .problem(for: error)
        }
    }

    /// A request's exchange: its request id (the caller's, when safe to echo), span and trace.
    private func begin(_ request: HTTPRequest, routing: Router<Gateway>.Match) -> Exchange {
        let requestID = request.headers["x-request-id"].flatMap { Self.isSafeToken($0) ? $0 : nil } ?? UniqueID.hex(bytes: 8)
        let span = telemetry.requestSpan(request, tls: configuration.edgeServesTLS)
        // With tracing on, the span's trace (the caller's, or one the tracer began) is the request's.
        let ids = telemetry.ids(span.context)
        let traceID = ids?.traceID ?? TraceContext.traceID(fromTraceparent: request.headers["traceparent"]) ?? TraceContext.newTraceID()
        return Exchange(request: request, routing: routing, requestID: requestID, traceID: traceID, span: span, spanID: ids?.spanID)
    }

    /// The route routing found, once the links have let the request through.
    private func route(of exchange: Exchange) throws -> Route<Gateway> {
        guard let route = exchange.match?.route else { throw Problem.notFound("no route for \(exchange.request.path)") }
        return route
    }

    private func context(of exchange: Exchange, _ route: Route<Gateway>) -> RequestContext {
        RequestContext(request: exchange.request, parameters: exchange.match?.parameters ?? [:], requestID: exchange.requestID,
                       routeName: route.name, traceID: exchange.traceID)
    }

    static func isSafeToken(_ s: String) -> Bool {
        !s.isEmpty && s.count <= 64 && s.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
    }

    // MARK: Operations

    func metricsPage(_ context: RequestContext) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                     body: Array(metrics.scrape(eventLogQueue: store.eventLog.pendingCount, sqliteMemory: Store.sqliteMemoryBytes,
                                                refusedConnections: edge?.refusedConnections ?? 0,
                                                evictedHalfOpen: edge?.evictedHalfOpenConnections ?? 0,
                                                upstreamWaits: .init(now: upstream.waitingNow, total: upstream.waitedTotal)).utf8))
    }

    /// Probes and scrapes: never rate-limited, never traced. Compared, not hashed: it is asked
    /// on every request.
    static func isProbe(_ path: String) -> Bool { path == "/healthz" || path == "/readyz" || path == "/metrics" }

    func healthz(_ context: RequestContext) -> HTTPResponse {
        .json(["status": "ok"])
    }

    func readyz(_ context: RequestContext) async throws -> HTTPResponse {
        let storeOK = store.isHealthy()
        let upstreamOK = await swedbankPay.reachable()
        // An open breaker fails this node's payments at once: a balancer should prefer another node.
        let circuit = swedbankPay.upstreamCircuitState
        let circuitOK = circuit != "open"
        let checks: [String: JSONValue] = ["store": .string(storeOK ? "ok" : (store.eventLog.lastWriteError ?? "unavailable")),
                                           "upstream": .string(upstreamOK ? "ok" : "unreachable"),
                                           "upstreamCircuit": .string(circuit)]
        if storeOK && upstreamOK && circuitOK {
            // The same `checks` object as in the 503 problem, so a probe reads one shape.
            return .json(["status": "ready", "checks": .object(checks)])
        }
        var problem = Problem.serviceUnavailable("not ready: " + [storeOK ? nil : "store", upstreamOK ? nil : "upstream",
                                                                 circuitOK ? nil : "upstream circuit breaker open"].compactMap { $0 }.joined(separator: ", "))
        problem.extensions["checks"] = .object(checks)
        throw problem
    }
}
