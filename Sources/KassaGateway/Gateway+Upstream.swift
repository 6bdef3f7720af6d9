import Foundation
import KassaCore
import KassaUpstream

/// Calls to Swedbank Pay, each written to the event log as an
/// `upstream.request` / `upstream.response` pair with redacted bodies.
extension Gateway {
    /// Largest body excerpt kept in the event log.
    static let loggedBodyLimit = 4_096

    struct UpstreamCall {
        var operation: String
        var method: String
        var url: String
        var body: JSONValue?
        var traceID: String
        var sessionID: String?
    }

    /// The absolute URL for an upstream path such as `/psp/consumers`.
    func upstreamURL(_ path: String) -> String {
        var base = configuration.upstreamURL
        while base.hasSuffix("/") { base.removeLast() }
        return base + path
    }

    /// True when `href` names an allowed upstream host over http(s): no request goes elsewhere.
    func isAllowedUpstream(_ href: String) -> Bool {
        guard let url = UpstreamURL(href), url.scheme == "https" || url.scheme == "http" else { return false }
        return allowedUpstreamHosts.contains(url.host)
    }

    /// One upstream exchange, logged; the answer's body parsed once (nil when it is not JSON).
    func callUpstream(_ call: UpstreamCall) async -> (result: Result<UpstreamResponse, UpstreamError>, document: JSONValue?) {
        let url = UpstreamURL(call.url)
        let path = Redaction.redactTokens(url?.path ?? call.url)
        var headers = [("Authorization", "Bearer \(configuration.upstreamToken)"), ("Accept", "application/json")]
        if TraceContext.isTraceID(call.traceID) { headers.append(("traceparent", TraceContext.traceparent(traceID: call.traceID))) }
        var bodyBytes: [UInt8]?
        if let body = call.body {
            headers.append(("Content-Type", "application/json"))
            bodyBytes = body.bytes
        }
        var document: JSONValue?
        store.eventLog.append(LogEvent(
            atMs: Self.nowMs(), sessionID: call.sessionID, kind: "upstream.request",
            summary: "\(call.method) \(path) (\(call.operation))", traceID: call.traceID,
            data: ["operation": .string(call.operation), "method": .string(call.method), "path": .string(path),
                   "body": call.body.map { Self.loggable($0, size: bodyBytes?.count ?? 0) } ?? .null]))
        let started = ContinuousClock.now
        let host = url?.host ?? ""
        let result: Result<UpstreamResponse, UpstreamError>
        if !circuitAllows(host) {
            // Fail fast while the host keeps failing; nothing is sent, so a retry is safe.
            result = .failure(.connectFailed("circuit breaker open for \(host)"))
        } else {
            do {
                result = .success(try await upstream.send(UpstreamRequest(
                    method: call.method, url: call.url, headers: headers, body: bodyBytes,
                    connectTimeoutMs: min(2_000, configuration.upstreamTimeoutMs), totalTimeoutMs: configuration.upstreamTimeoutMs)))
            } catch {
                result = .failure(error)
            }
            let success: Bool
            if case .success(let r) = result { success = r.status < 500 } else { success = false }
            circuitRecord(host, success: success, traceID: call.traceID, sessionID: call.sessionID)
        }
        let elapsed = started.duration(to: .now)
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        if case .success(let r) = result {
            metrics.upstream(operation: call.operation, status: r.status, seconds: ms / 1000)
        } else {
            metrics.upstream(operation: call.operation, status: nil, seconds: ms / 1000)
        }
        switch result {
        case .success(let response):
            document = try? JSONValue.parse(response.body)
            store.eventLog.append(LogEvent(
                atMs: Self.nowMs(), sessionID: call.sessionID, kind: "upstream.response",
                level: response.status >= 500 ? .error : (response.status >= 400 ? .warning : .info),
                summary: "\(call.method) \(path) → \(response.status)", durationMs: ms, status: response.status, traceID: call.traceID,
                data: ["operation": .string(call.operation), "method": .string(call.method), "path": .string(path),
                       "contentType": .string(response.header("content-type") ?? ""),
                       "body": document.map { Self.loggable($0, size: response.body.count) } ?? .string(Self.excerpt(response.body))]))
        case .failure(let error):
            store.eventLog.append(LogEvent(
                atMs: Self.nowMs(), sessionID: call.sessionID, kind: "upstream.response", level: .error,
                summary: "\(call.method) \(path) failed: \(Redaction.redactTokens(error.description))", durationMs: ms, traceID: call.traceID,
                data: ["operation": .string(call.operation), "method": .string(call.method), "path": .string(path),
                       "error": .string(Redaction.redactTokens(error.description))]))
        }
        return (result, document)
    }

    // MARK: Circuit breaker

    func circuitAllows(_ host: String) -> Bool {
        let now = Date().timeIntervalSince1970
        return breakers.withLock { all -> Bool in
            var breaker = all[host] ?? configuration.circuitBreaker
            defer { all[host] = breaker }
            return breaker.allow(now: now)
        }
    }

    func circuitRecord(_ host: String, success: Bool, traceID: String, sessionID: String?) {
        let now = Date().timeIntervalSince1970
        let change = breakers.withLock { all -> CircuitBreaker.State? in
            var breaker = all[host] ?? configuration.circuitBreaker
            defer { all[host] = breaker }
            return breaker.record(success: success, now: now)
        }
        guard let change else { return }
        let open = if case .open = change { true } else { false }
        metrics.circuit(host: host, open: open)
        if open || change == .closed {
            store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: sessionID, kind: "upstream.circuit", level: open ? .error : .info,
                                           summary: "circuit breaker for \(host) \(open ? "opened" : "closed")", traceID: traceID,
                                           data: ["host": .string(host), "open": .bool(open)]))
            if open { logger.error("upstream circuit breaker opened", metadata: ["host": "\(host)"]) }
        }
    }

    /// A redacted body, cut to a size the event log can hold. `size` is the body's size
    /// on the wire: a large body is never redacted whole just to be cut.
    static func loggable(_ value: JSONValue, size: Int) -> JSONValue {
        guard size > loggedBodyLimit else { return Redaction.redact(value) }
        return ["truncated": true, "bytes": .number(Double(size)), "excerpt": .string(excerpt(Redaction.redact(value).bytes))]
    }

    /// Non-JSON bodies are kept only as a short, redacted excerpt.
    static func excerpt(_ bytes: [UInt8]) -> String {
        Redaction.redactURLQuery(String(decoding: bytes.prefix(256), as: UTF8.self))
    }
}
