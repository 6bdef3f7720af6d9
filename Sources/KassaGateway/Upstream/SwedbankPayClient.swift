import Foundation
import KassaCore
import KassaStore
import KassaUpstream
import Logging
import Synchronization
import Tracing

/// Swedbank Pay as the gateway calls it: every exchange written to the event log as an
/// `upstream.request` / `upstream.response` pair with redacted bodies, timed in metrics,
/// guarded by a circuit breaker per origin, and for sessions retried by the retry policy.
/// Only URLs on the allowed hosts are ever called.
final class SwedbankPayClient: Sendable {
    /// Largest body excerpt kept in the event log.
    static let loggedBodyLimit = 4_096

    struct Call {
        var operation: String
        var method: String
        var url: String
        var body: Body? = nil
        var traceID: String
        var sessionID: String?
        /// A payment order API version to ask for in the media types; nil: plain JSON (the SDKs' way).
        var version: PaymentOrderVersion? = nil
        /// The exchange's time limit; nil: the configured one.
        var timeoutMs: Int? = nil
        /// The span the exchange is made for (a request's by default; a session call's for a session).
        var parent: ServiceContext = .current ?? .topLevel
        /// How many times this exchange was sent before (`http.request.resend_count`).
        var resendCount = 0
        /// `url` as the allow-list check read it; nil: read when sent.
        var parsedURL: UpstreamURL? = nil
        /// False for a call that reads a 2xx answer from its bytes (a session call's
        /// `PaymentOutput.decode`, a created order's `MerchantAPI.PaymentOrderAnswer.decode`):
        /// `send` then parses only an answer outside 2xx into a tree.
        var parsesSuccessfulAnswer = true

        /// What a call sends: a tree, written when sent, or a body already written (a created
        /// order's, `OrderToCreate`), sent as it is.
        enum Body {
            case document(JSONValue)
            case written([UInt8])

            var bytes: [UInt8] {
                switch self {
                case .document(let document): document.bytes
                case .written(let bytes): bytes
                }
            }

            /// The tree, when the call has one: a body over the log's limit is cut from it.
            var document: JSONValue? {
                switch self {
                case .document(let document): document
                case .written(let bytes): try? JSONValue.parse(bytes)
                }
            }
        }
    }

    /// Card calls (`SessionCall.takesLonger`) get three times the time of the others and half as
    /// long again to retry: 30 s and 30 s with the defaults, as in the SDKs.
    static let longerCallTimeoutFactor = 3

    private let configuration: GatewayConfiguration
    /// The `Authorization` header's value, written once.
    private let authorization: String
    private let http: UpstreamClient
    private let eventLog: EventLog
    private let metrics: KassaMetrics
    private let clock: any WallClock
    private let telemetry: Telemetry
    private let logger: Logger
    /// The configured upstream URL's origin, `scheme://host:port` (parsed once, at start-up).
    let upstreamOrigin: String
    /// The origins an upstream `href` may point at: the upstream URL's, its `ecom.` sibling's,
    /// and each allowed host's, all with the upstream URL's scheme and port; an allowed entry
    /// written as a URL is taken as its own origin. Another port on an allowed host is refused.
    let allowedOrigins: Set<String>
    /// The same origins' plain hrefs, read without libcurl (`PlainHrefReader`).
    private let plainHrefs: PlainHrefReader
    /// Circuit breakers by upstream origin.
    private let breakers = Mutex<[String: CircuitBreaker]>([:])
    private let readiness = Mutex<(checkedAt: ContinuousClock.Instant?, reachable: Bool)>((nil, false))

    init(configuration: GatewayConfiguration, http: UpstreamClient, eventLog: EventLog, metrics: KassaMetrics, clock: any WallClock,
         telemetry: Telemetry, logger: Logger) {
        self.configuration = configuration
        authorization = "Bearer \(configuration.upstreamToken)"
        self.telemetry = telemetry
        self.clock = clock
        self.http = http
        self.eventLog = eventLog
        self.metrics = metrics
        self.logger = logger
        let upstream = UpstreamURL(configuration.upstreamURL)
        upstreamOrigin = upstream?.origin ?? ""
        allowedOrigins = Self.origins(upstream: upstream, allowed: configuration.allowedUpstreamHosts)
        plainHrefs = PlainHrefReader(origins: allowedOrigins.compactMap { UpstreamURL($0) }.filter { $0.scheme == "https" || $0.scheme == "http" })
    }

    static func origins(upstream: UpstreamURL?, allowed: [String]) -> Set<String> {
        var origins = Set<String>()
        for entry in allowed where entry.contains("://") {
            if let url = UpstreamURL(entry) { origins.insert(url.origin) }
        }
        guard let upstream else { return origins }
        let hosts = Self.hosts(servingSessionsFor: upstream.host) + allowed.filter { !$0.contains("://") }.map { $0.lowercased() }
        for host in hosts where !host.isEmpty {
            origins.insert(UpstreamURL(scheme: upstream.scheme, host: host, path: "/", port: upstream.port).origin)
        }
        return origins
    }

    /// The API host and, for Swedbank Pay's `api.` hosts, their `ecom.` sibling, which serves the
    /// view-paymentsession href of a v3 order (seed 002: ecom.externalintegration.payex.com).
    static func hosts(servingSessionsFor apiHost: String) -> [String] {
        guard apiHost.hasPrefix("api."), apiHost.hasSuffix("payex.com") else { return [apiHost] }
        return [apiHost, "ecom." + apiHost.dropFirst(4)]
    }

    /// The absolute URL for an upstream path such as `/psp/consumers`.
    func url(_ path: String) -> String {
        var base = configuration.upstreamURL
        while base.hasSuffix("/") { base.removeLast() }
        return base + path
    }

    /// True when `href` is on an allowed upstream origin over http(s): no request goes elsewhere.
    func isAllowed(_ href: String) -> Bool { allowedURL(href) != nil }

    /// `href` as libcurl reads it, when it is on an allowed upstream origin over http(s).
    func allowedURL(_ href: String) -> UpstreamURL? {
        if let url = plainHrefs.read(href) { return url }
        guard let url = UpstreamURL(href), url.scheme == "https" || url.scheme == "http", allowedOrigins.contains(url.origin) else { return nil }
        return url
    }

    // MARK: One exchange

    /// One upstream exchange, logged; the answer's body parsed once (nil when it is not JSON), and how long it took.
    func send(_ call: Call) async -> (result: Result<UpstreamResponse, UpstreamError>, document: JSONValue?, durationMs: Double) {
        let exchange = begin(call)
        let result: Result<UpstreamResponse, UpstreamError>
        if let request = exchange.request {
            do {
                result = .success(try await http.send(request))
            } catch {
                result = .failure(error)
            }
        } else {
            // Fail fast while the origin keeps failing; nothing is sent, so a retry is safe.
            result = .failure(.connectFailed("circuit breaker open for \(exchange.origin)"))
        }
        return finish(call, exchange, result)
    }

    // The steps before and after the exchange's await are plain functions, kept out of line: an
    // async function's locals live in its task's slabs (each past the first is a `malloc`, and
    // a loop around an await keeps every temporary of its body there), a plain one's on the stack.

    /// An exchange under way: what `finish` logs it by.
    private struct InFlight {
        var path: String
        var origin: String
        var span: any Span
        var started: ContinuousClock.Instant
        /// The same on the wall clock, for the circuit breaker.
        var startedUs: Int64
        /// Nil when the origin's circuit breaker refused the exchange.
        var request: UpstreamRequest?
    }

    /// The exchange's request, its span and its logged request event.
    @inline(never)
    private func begin(_ call: Call) -> InFlight {
        let url = call.parsedURL ?? UpstreamURL(call.url)
        // The event log redacts what it is given (tokens in this path included).
        let path = url?.path ?? call.url
        let mediaType = call.version?.mediaType ?? "application/json"
        var headers = [("Authorization", authorization), ("Accept", mediaType)]
        let span = attemptSpan(call, url: url, path: path)
        if let traceparent = telemetry.traceparent(span.context) {
            headers.append(("traceparent", traceparent))
        } else if TraceContext.isTraceID(call.traceID) {
            headers.append(("traceparent", TraceContext.traceparent(traceID: call.traceID)))
        }
        let bodyBytes = call.body?.bytes
        if bodyBytes != nil { headers.append(("Content-Type", mediaType)) }
        log(LogEvent(atMs: clock.nowMs(), sessionID: call.sessionID, kind: "upstream.request",
                     summary: "\(call.method) \(path) (\(call.operation))", traceID: call.traceID,
                     data: ["operation": .string(call.operation), "method": .string(call.method), "path": .string(path)]),
            body: bodyBytes ?? [], document: call.body?.document, otherwise: .null)
        let started = ContinuousClock.now, startedUs = clock.nowUs()
        let origin = url?.origin ?? ""
        guard circuitAllows(origin, atUs: startedUs) else { return InFlight(path: path, origin: origin, span: span, started: started, startedUs: startedUs) }
        return InFlight(path: path, origin: origin, span: span, started: started, startedUs: startedUs, request: UpstreamRequest(
            method: call.method, url: call.url, headers: headers, body: bodyBytes,
            connectTimeoutMs: min(2_000, configuration.upstreamTimeoutMs), totalTimeoutMs: call.timeoutMs ?? configuration.upstreamTimeoutMs))
    }

    /// The exchange's outcome counted, timed and logged, with the answer's parsed document.
    @inline(never)
    private func finish(_ call: Call, _ exchange: InFlight, _ result: Result<UpstreamResponse, UpstreamError>)
        -> (result: Result<UpstreamResponse, UpstreamError>, document: JSONValue?, durationMs: Double) {
        let circuitOpen = exchange.request == nil
        if !circuitOpen {
            circuitRecord(exchange.origin, Self.circuitOutcome(result), startedUs: exchange.startedUs, traceID: call.traceID, sessionID: call.sessionID)
        }
        let path = exchange.path
        let ms = exchange.started.duration(to: .now).inMilliseconds
        if case .success(let r) = result {
            metrics.upstream(operation: call.operation, status: r.status, seconds: ms / 1000)
        } else {
            metrics.upstream(operation: call.operation, status: nil, seconds: ms / 1000)
        }
        var document: JSONValue?
        switch result {
        case .success(let response):
            if call.parsesSuccessfulAnswer || !(200..<300).contains(response.status) {
                document = try? JSONValue.parse(response.body)
            }
            log(LogEvent(
                atMs: clock.nowMs(), sessionID: call.sessionID, kind: "upstream.response",
                level: response.status >= 500 ? .error : (response.status >= 400 ? .warning : .info),
                summary: "\(call.method) \(path) → \(response.status)", durationMs: ms, status: response.status, traceID: call.traceID,
                data: ["operation": .string(call.operation), "method": .string(call.method), "path": .string(path),
                       "contentType": .string(response.header("content-type") ?? "")]),
                body: response.body, document: document ?? (try? JSONValue.parse(response.body)), otherwise: .string(Self.excerpt(response.body)))
        case .failure(let error):
            eventLog.append(LogEvent(
                atMs: clock.nowMs(), sessionID: call.sessionID, kind: "upstream.response", level: .error,
                summary: "\(call.method) \(path) failed: \(error.description)", durationMs: ms, traceID: call.traceID,
                data: ["operation": .string(call.operation), "method": .string(call.method), "path": .string(path),
                       "error": .string(error.description)]))
        }
        end(attempt: exchange.span, result, circuitOpen: circuitOpen)
        return (result, document, ms)
    }

    /// Logs an exchange's event with its body under "body": a body within the log's limit as
    /// `EventLog.append(_:body:)` keeps it (redacted from the bytes when they are JSON, else their
    /// start); a larger one as `loggable` cuts its `document`, or `otherwise` when there is none.
    private func log(_ event: LogEvent, body: [UInt8], document: @autoclosure () -> JSONValue?, otherwise: @autoclosure () -> JSONValue) {
        if !body.isEmpty, body.count <= Self.loggedBodyLimit { return eventLog.append(event, body: body) }
        var event = event
        var data = event.data?.objectValue ?? [:]
        data["body"] = document().map { Self.loggable($0, size: body.count) } ?? otherwise()
        event.data = .object(data)
        eventLog.append(event)
    }

    /// An HTTP client span for one exchange (OpenTelemetry's HTTP conventions). The URL is
    /// redacted like the event log's, since a session's path is its bearer token upstream.
    private func attemptSpan(_ call: Call, url: UpstreamURL?, path: String) -> any Span {
        let span = telemetry.span(call.method, kind: .client, parent: call.parent)
        guard telemetry.isOn else { return span }
        span.updateAttributes { a in
            a["http.request.method"] = call.method
            a["kassa.upstream.operation"] = call.operation
            if let url {
                a["server.address"] = url.host
                a["server.port"] = url.port
                a["url.full"] = url.origin + Redaction.redactText(path)
            }
            if call.resendCount > 0 { a["http.request.resend_count"] = call.resendCount }
        }
        return span
    }

    /// `circuitOpen`: the breaker refused the exchange, so nothing was sent (`error.type` says so).
    private func end(attempt span: any Span, _ result: Result<UpstreamResponse, UpstreamError>, circuitOpen: Bool) {
        if telemetry.isOn {
            switch result {
            case .success(let response):
                span.attributes["http.response.status_code"] = response.status
                if response.status >= 400 { span.failed("\(response.status)") }
            case .failure(let error):
                span.failed(circuitOpen ? "circuit_open" : Self.errorType(error))
            }
        }
        span.end()
    }

    /// A transport failure's `error.type`: a low-cardinality name, never its message.
    static func errorType(_ error: UpstreamError) -> String {
        switch error {
        case .timeout: return "timeout"
        case .connectFailed: return "connect_failed"
        case .connectionLost: return "connection_lost"
        case .responseTooLarge: return "response_too_large"
        case .invalidRequest: return "invalid_request"
        case .cancelled: return "cancelled"
        case .transport: return "transport"
        }
    }

    // MARK: Beacons

    /// An event-logging href found on an allowed upstream origin; only `eventLogging(_:)` makes
    /// one, so a beacon needs no check of its own (a session checks its href once, not per beacon).
    struct EventLoggingHref: Sendable, Equatable {
        let href: String
        fileprivate init(_ href: String) { self.href = href }
    }

    /// `href` as where a session's beacons go, when it is on an allowed upstream origin.
    func eventLogging(_ href: String) -> EventLoggingHref? { isAllowed(href) ? EventLoggingHref(href) : nil }

    /// Where a session's beacons go: its event-logging href, and the device they describe.
    struct BeaconTarget: Sendable {
        var href: EventLoggingHref
        var device: ClientDevice
    }

    /// Posts one beacon, best effort, as the SDKs do: without Kassa's token (the href names
    /// the session), outside the circuit breaker, never retried, and not written to the event
    /// log one by one; the outcome is counted (`kassa_beacons_total`). Swedbank Pay answers 204.
    func postBeacon(_ event: ClientEvent, to target: BeaconTarget) {
        guard configuration.eventLogging else { return }
        let request = UpstreamRequest(method: "POST", url: target.href.href,
                                      headers: [("Content-Type", "application/json"), ("Accept", "application/json")],
                                      body: event.body(device: target.device),
                                      connectTimeoutMs: min(1_000, configuration.upstreamTimeoutMs),
                                      totalTimeoutMs: min(2_000, configuration.upstreamTimeoutMs))
        // Counted on the curl thread when it ends: a beacon costs no task of its own.
        http.send(request) { [metrics] result in
            switch result {
            case .success(let response): metrics.beacon(outcome: response.status == 204 ? "sent" : "refused")
            case .failure: metrics.beacon(outcome: "failed")
            }
        }
    }

    // MARK: A session's call, with retries

    /// One upstream call for a session, retried by the retry policy when that
    /// is safe: reads always, writes only when no connection was ever made.
    /// `beacon`: where to report each exchange (HttpRequest), when the session offers event-logging.
    /// `parent`: the span the call is made for; the call's own span (`swedbankpay <operation>`, its
    /// attempts below it) is ended on return, and the work its outcome causes goes below it too.
    func perform(_ call: SessionCall, sessionID: String, traceID: String, beacon: BeaconTarget? = nil,
                 parent: ServiceContext = .topLevel) async -> (outcome: SessionCallOutcome, span: ServiceContext) {
        let span = telemetry.span("swedbankpay \(call.rel)", parent: parent)
        if telemetry.isOn {
            span.attributes["kassa.upstream.operation"] = call.rel
            span.attributes["kassa.session.id"] = sessionID
        }
        var retries = 0
        let outcome = await perform(call, sessionID: sessionID, traceID: traceID, beacon: beacon, span: span, retries: &retries)
        if telemetry.isOn {
            span.attributes["kassa.upstream.retries"] = retries
            switch outcome {
            case .output: break
            case .conflict: span.attributes["kassa.upstream.outcome"] = "conflict"
            case .refused(let status, _, _): span.failed("\(status)")
            case .failed: span.failed("failed")
            }
        }
        span.end()
        return (outcome, span.context)
    }

    private func perform(_ call: SessionCall, sessionID: String, traceID: String, beacon: BeaconTarget?, span: any Span,
                         retries retry: inout Int) async -> SessionCallOutcome {
        guard let url = allowedURL(call.href) else {
            return .failed("the \(call.rel) operation points outside the allowed upstream hosts")
        }
        let started = ContinuousClock.now
        var retryPolicy = configuration.sessionRetry
        var timeoutMs: Int?
        if call.takesLonger {
            retryPolicy.deadlineMs += retryPolicy.deadlineMs / 2
            timeoutMs = configuration.upstreamTimeoutMs * Self.longerCallTimeoutFactor
        }
        while true {
            let exchangeStarted = clock.nowMs()
            let (result, document, durationMs) = await send(Call(operation: call.rel, method: call.method, url: call.href, body: call.body.map(Call.Body.document),
                                                     traceID: traceID, sessionID: sessionID, timeoutMs: timeoutMs,
                                                     parent: span.context, resendCount: retry, parsedURL: url,
                                                     parsesSuccessfulAnswer: false))
            if let beacon { postBeacon(call, result, startedAtMs: exchangeStarted, durationMs: durationMs, to: beacon) }
            switch Self.attempt(call, result, document: document) {
            case .settled(let outcome):
                return outcome
            case .unsettled(let reason, let neverSent):
                guard let delay = retryDelay(call, reason: reason, neverSent: neverSent, policy: retryPolicy, started: started,
                                             retry: &retry, sessionID: sessionID, traceID: traceID)
                else { return .failed(reason) }
                try? await Task.sleep(for: .milliseconds(delay))
            }
        }
    }

    // The steps around the awaits of the loop are plain functions, as in `send`.

    /// The session's HttpRequest beacon for one exchange.
    @inline(never)
    private func postBeacon(_ call: SessionCall, _ result: Result<UpstreamResponse, UpstreamError>, startedAtMs: Int64,
                            durationMs: Double, to beacon: BeaconTarget) {
        let status: Int? = if case .success(let response) = result { response.status } else { nil }
        postBeacon(ClientEvent(.httpRequest, atMs: startedAtMs, durationMs: Int(durationMs),
                               http: .init(requestUrl: call.href, method: call.method, responseStatusCode: status)), to: beacon)
    }

    /// What one exchange of a session call came to: an outcome, or a reason it may be retried for.
    private enum Attempt {
        case settled(SessionCallOutcome)
        /// `neverSent`: no connection was made, so even a write may be sent again.
        case unsettled(reason: String, neverSent: Bool)
    }

    @inline(never)
    private static func attempt(_ call: SessionCall, _ result: Result<UpstreamResponse, UpstreamError>, document: JSONValue?) -> Attempt {
        switch result {
        case .success(let response):
            if (200..<300).contains(response.status) {
                if let output = PaymentOutput.decode(response.body) { return .settled(.output(output)) }
                return .unsettled(reason: "Swedbank Pay answered \(call.rel) with a body that is not a payment session", neverSent: false)
            } else if response.status == 409 {
                // Any 409, whatever its type: the session reads itself again (the SDKs' rule).
                return .settled(.conflict(document ?? .null))
            } else if (400..<500).contains(response.status) {
                // Refused: not retried, nothing took effect; reported as the SDKs do (PaymentSessionAPIRequestFailed).
                let type = document?["type"]?.stringValue.map { " (\($0))" } ?? ""
                return .settled(.refused(status: response.status, problem: document?["type"] != nil ? document : nil,
                                         reason: "Swedbank Pay refused \(call.rel) with \(response.status)\(type)"))
            }
            return .unsettled(reason: "Swedbank Pay answered \(call.rel) with \(response.status)", neverSent: false)
        case .failure(let error):
            let neverSent: Bool = if case .connectFailed = error { true } else { false }
            return .unsettled(reason: "\(call.rel): \(error)", neverSent: neverSent)
        }
    }

    /// The wait before the next try, counted and logged; nil, logged as the call's end, when the
    /// policy allows none.
    @inline(never)
    private func retryDelay(_ call: SessionCall, reason: String, neverSent: Bool, policy: RetryPolicy, started: ContinuousClock.Instant,
                            retry: inout Int, sessionID: String, traceID: String) -> Int? {
        let elapsedMs = Int(started.duration(to: .now).inMilliseconds)
        guard RetryPolicy.mayRetry(idempotent: call.isIdempotent, neverSent: neverSent),
              let delay = policy.delayMs(beforeRetry: retry + 1, elapsedMs: elapsedMs, jitter: Double.random(in: 0...1))
        else {
            eventLog.append(LogEvent(atMs: clock.nowMs(), sessionID: sessionID, kind: "problem", level: .error,
                                     summary: "\(call.rel) failed after \(retry) retries: \(reason)", traceID: traceID,
                                     data: ["operation": .string(call.rel), "retries": .number(Double(retry)),
                                            "reason": .string(reason)]))
            return nil
        }
        retry += 1
        metrics.upstreamRetry(operation: call.rel)
        eventLog.append(LogEvent(atMs: clock.nowMs(), sessionID: sessionID, kind: "upstream.retry", level: .warning,
                                 summary: "retry \(retry) of \(call.rel) in \(delay) ms: \(reason)", traceID: traceID,
                                 data: ["operation": .string(call.rel), "retry": .number(Double(retry)), "delayMs": .number(Double(delay))]))
        return delay
    }

    // MARK: Readiness

    /// Any HTTP answer from the upstream base URL counts as reachable; the
    /// result is kept for two seconds so probes do not load the upstream.
    func reachable() async -> Bool {
        let cached = readiness.withLock { state -> Bool? in
            guard let at = state.checkedAt, at.duration(to: .now) < .seconds(2) else { return nil }
            return state.reachable
        }
        if let cached { return cached }
        let request = UpstreamRequest(method: "GET", url: configuration.upstreamURL, connectTimeoutMs: 1_000, totalTimeoutMs: 2_000)
        let reachable = (try? await http.send(request)) != nil
        readiness.withLock { $0 = (.now, reachable) }
        return reachable
    }

    // MARK: Circuit breaker

    /// What an exchange says about its origin: an answer below 500 that it works; a 5xx, a
    /// timeout or a broken connection that it fails; anything else (a URL libcurl refused, a
    /// body too large, a cancelled caller) says nothing and is not counted.
    static func circuitOutcome(_ result: Result<UpstreamResponse, UpstreamError>) -> CircuitBreaker.Outcome {
        switch result {
        case .success(let response): return response.status < 500 ? .success : .failure
        case .failure(.timeout), .failure(.connectFailed), .failure(.connectionLost), .failure(.transport): return .failure
        case .failure(.invalidRequest), .failure(.responseTooLarge), .failure(.cancelled): return .neutral
        }
    }

    /// The breaker's time: seconds on the wall clock, to the µs.
    private static func breakerSeconds(_ us: Int64) -> Double { Double(us) / 1_000_000 }

    /// `atUs`: now, as the exchange's start already read it.
    private func circuitAllows(_ origin: String, atUs: Int64) -> Bool {
        let now = Self.breakerSeconds(atUs)
        return breakers.withLock { all -> Bool in
            var breaker = all[origin] ?? configuration.circuitBreaker
            defer { all[origin] = breaker }
            return breaker.allow(now: now)
        }
    }

    /// The state of the configured upstream's breaker: `closed`, `open` or `half-open`.
    var upstreamCircuitState: String {
        switch breakers.withLock({ $0[upstreamOrigin]?.state }) ?? .closed {
        case .closed: return "closed"
        case .open: return "open"
        case .halfOpen: return "half-open"
        }
    }

    /// `startedUs`: when the exchange began, on the clock the breaker is given (which tells a call
    /// made after a failure was known from one under way with it).
    private func circuitRecord(_ origin: String, _ outcome: CircuitBreaker.Outcome, startedUs: Int64, traceID: String, sessionID: String?) {
        let now = Self.breakerSeconds(clock.nowUs())
        let change = breakers.withLock { all -> CircuitBreaker.State? in
            var breaker = all[origin] ?? configuration.circuitBreaker
            defer { all[origin] = breaker }
            return breaker.record(outcome, startedAt: Self.breakerSeconds(startedUs), now: now)
        }
        guard let change else { return }
        let open = if case .open = change { true } else { false }
        metrics.circuit(origin: origin, open: open)
        if open || change == .closed {
            eventLog.append(LogEvent(atMs: clock.nowMs(), sessionID: sessionID, kind: "upstream.circuit", level: open ? .error : .info,
                                     summary: "circuit breaker for \(origin) \(open ? "opened" : "closed")", traceID: traceID,
                                     data: ["origin": .string(origin), "open": .bool(open)]))
            if open { logger.error("upstream circuit breaker opened", metadata: ["origin": "\(origin)"]) }
        }
    }

    // MARK: What the event log keeps of a body

    /// A body cut to a size the event log can hold. `size` is the body's size on the wire. A
    /// body that fits goes as it is (the event log redacts every entry); one that is cut is
    /// redacted first, while its member names still say what is secret.
    static func loggable(_ value: JSONValue, size: Int) -> JSONValue {
        guard size > loggedBodyLimit else { return value }
        return ["truncated": true, "bytes": .number(Double(size)), "excerpt": .string(excerpt(Redaction.redactedBytes(value)))]
    }

    /// The start of a body, as text; whoever keeps or shows it redacts it (the event log, a problem).
    static func excerpt(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.prefix(256), as: UTF8.self)
    }
}

/// What happened to an upstream call, as the session machine needs to know it.
enum SessionCallOutcome: Sendable {
    case output(PaymentOutput)
    /// A 409 with its body.
    case conflict(JSONValue)
    /// Another 4xx, with its problem document when it had one.
    case refused(status: Int, problem: JSONValue?, reason: String)
    case failed(String)
}
