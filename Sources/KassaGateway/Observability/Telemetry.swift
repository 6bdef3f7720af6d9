import KassaCore
import KassaEdge
import Logging
import Tracing

/// Kassa's spans, written against swift-distributed-tracing's API. Off by default: a no-op
/// tracer, whose spans cost next to nothing. With `--otlp-endpoint` the executable passes
/// swift-otel's tracer, which exports them over OTLP/HTTP.
///
/// Each session is a trace, rooted in the request that created it. That request continues the
/// caller's `traceparent`, so the merchant's trace id is the session's here as in the event log.
/// Below the root: each upstream call (`swedbankpay <operation>`, with one HTTP client span per
/// attempt), each client command, each push (a producer span from the state change until the edge
/// has the frame) and each event-log commit a push waited for. Attribute names follow
/// OpenTelemetry's semantic conventions; Kassa's own start with `kassa.`.
public struct Telemetry: Sendable {
    let tracer: any Tracer
    /// False with the no-op tracer: no ids exist, and nothing is worth computing for a span.
    public let isOn: Bool

    public init(tracer: any Tracer) {
        self.tracer = tracer
        isOn = !(tracer is NoOpTracer)
    }

    public static let off = Telemetry(tracer: NoOpTracer())

    func span(_ name: String, kind: SpanKind = .internal, parent: ServiceContext) -> any Span {
        tracer.startSpan(name, context: parent, ofKind: kind)
    }

    /// The server span of an HTTP request: a child of the caller's span when it sent a valid
    /// `traceparent`. Its name gets the route once routing found one (`end(request:)`).
    /// Probes and scrapes, every few seconds from every balancer and Prometheus, get none: they
    /// would be most of the spans a backend stores (and bills) and explain nothing.
    func requestSpan(_ request: HTTPRequest, tls: Bool) -> any Span {
        guard isOn, !Gateway.isProbe(request.path) else { return NoOpTracer.NoOpSpan(context: .topLevel) }
        var parent = ServiceContext.topLevel
        tracer.extract(request.headers, into: &parent, using: HeaderExtraction())
        let span = tracer.startSpan(request.method.rawValue, context: parent, ofKind: .server)
        span.updateAttributes { a in
            a["http.request.method"] = request.method.rawValue
            // The path only: a client token can travel in the query.
            a["url.path"] = Redaction.redactText(request.path)
            a["url.scheme"] = tls ? "https" : "http"
        }
        return span
    }

    /// Ends a request's span with its route (the span is named after it) and answer.
    func end(request span: any Span, method: HTTPMethod, route: String?, status: Int) {
        if span.isRecording {
            if let route {
                span.operationName = "\(method.rawValue) \(route)"
                span.attributes["http.route"] = route
            }
            span.attributes["http.response.status_code"] = status
            // A server span is an error for 5xx only: a 4xx is the caller's.
            if status >= 500 {
                span.attributes["error.type"] = "\(status)"
                span.setStatus(.init(code: .error))
            }
        }
        span.end()
    }

    /// The W3C trace id and span id of a span's context; nil when tracing is off.
    func ids(_ context: ServiceContext) -> (traceID: String, spanID: String)? {
        guard let header = traceparent(context), let traceID = TraceContext.traceID(fromTraceparent: header),
              let spanID = TraceContext.parentID(fromTraceparent: header) else { return nil }
        return (traceID, spanID)
    }

    /// The `traceparent` header naming a span as the parent of a call made on its behalf.
    func traceparent(_ context: ServiceContext) -> String? {
        guard isOn else { return nil }
        var carrier: [(String, String)] = []
        tracer.inject(context, into: &carrier, using: HeaderInjection())
        return carrier.first { $0.0.lowercased() == "traceparent" }?.1
    }

    /// A parent context for work continuing a trace recorded earlier (a session read back from the
    /// store): its trace id, and the span that was its root then.
    func remoteParent(traceID: String, spanID: String?) -> ServiceContext {
        var context = ServiceContext.topLevel
        guard isOn, TraceContext.isTraceID(traceID) else { return context }
        let header = "00-\(traceID)-\(spanID.flatMap { TraceContext.isSpanID($0) ? $0 : nil } ?? TraceContext.newSpanID())-01"
        tracer.extract(HTTPHeaders([("traceparent", header)]), into: &context, using: HeaderExtraction())
        return context
    }

    /// `trace_id` and `span_id` for a log line about the work of `context` (empty when tracing is off).
    func logMetadata(_ context: ServiceContext) -> Logger.Metadata {
        guard let ids = ids(context) else { return [:] }
        return ["trace_id": "\(ids.traceID)", "span_id": "\(ids.spanID)"]
    }
}

/// Marks a span failed, with the kind of failure as `error.type`.
extension Span {
    func failed(_ type: String) {
        attributes["error.type"] = type
        setStatus(.init(code: .error))
    }
}

struct HeaderExtraction: Extractor {
    func extract(key: String, from carrier: HTTPHeaders) -> String? { carrier[key] }
}

struct HeaderInjection: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [(String, String)]) { carrier.append((key, value)) }
}
