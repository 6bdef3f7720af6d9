import Foundation
import KassaCore
import KassaEdge
import KassaStore

/// The support API (`/v1/admin/…`, admin token, checked by the middleware): find
/// sessions, list events, read a session's timeline. Bad filters get a 400 naming the parameter.
struct SupportAPI: Sendable {
    let store: Store

    func events(_ context: RequestContext) throws -> HTTPResponse {
        let query: Store.EventQuery
        do { query = try SupportQuery.events(context.request.query) } catch { throw error.problem }
        do {
            let found = try store.searchEvents(query)
            let next = found.count == query.limit ? found.last?.id.map { String($0) } : nil
            return .json(["events": .array(found.map(Self.eventJSON)), "nextCursor": next.map { .string($0) } ?? .null])
        } catch {
            throw Problem.serviceUnavailable("the event log cannot be read: \(Store.reason(error))")
        }
    }

    func sessions(_ context: RequestContext) throws -> HTTPResponse {
        let query: Store.SessionQuery
        do { query = try SupportQuery.sessions(context.request.query) } catch { throw error.problem }
        do {
            let found = try store.searchSessions(query)
            let next = found.count == query.limit ? found.last.map { "\($0.createdAtMs).\($0.id)" } : nil
            return .json(["sessions": .array(found.map(Self.sessionJSON)), "nextCursor": next.map { .string($0) } ?? .null])
        } catch {
            throw Problem.serviceUnavailable("the session store cannot be read: \(Store.reason(error))")
        }
    }

    func timeline(_ context: RequestContext) throws -> HTTPResponse {
        let id = context.parameters["id"] ?? ""
        guard PaymentURLHelper.isSafeID(id) else { throw Problem.badRequest("id must be a session id", parameter: "id") }
        let record: Store.SessionRecord?, events: [LogEvent]
        do {
            record = try store.session(id: id)
            events = record == nil ? [] : try store.timeline(sessionID: id)
        } catch {
            throw Problem.serviceUnavailable("the event log cannot be read: \(Store.reason(error))")
        }
        guard let record else { throw Problem.notFound("no session \(id)") }
        let start = events.first?.atMs ?? record.createdAtMs
        var previous = start
        let steps: [JSONValue] = events.map { event in
            var json = Self.eventJSON(event).objectValue ?? [:]
            json["sinceStartMs"] = .number(Double(event.atMs - start))
            json["sincePreviousMs"] = .number(Double(event.atMs - previous))
            previous = event.atMs
            return .object(json)
        }
        return .json(["session": Self.sessionJSON(record), "events": .array(steps),
                      "durationMs": .number(Double((events.last?.atMs ?? start) - start))])
    }

    static func eventJSON(_ e: LogEvent) -> JSONValue {
        var o: [String: JSONValue] = ["id": e.id.map { .number(Double($0)) } ?? .null, "at": .string(Timestamp.iso8601(ms: e.atMs)),
                                      "atMs": .number(Double(e.atMs)), "kind": .string(e.kind), "level": .string(e.level.rawValue),
                                      "summary": .string(e.summary)]
        if let v = e.sessionID { o["session"] = .string(v) }
        if let v = e.seq { o["seq"] = .number(Double(v)) }
        if let v = e.durationMs { o["durationMs"] = .number((v * 1000).rounded() / 1000) }
        if let v = e.status { o["status"] = .number(Double(v)) }
        if let v = e.traceID { o["traceId"] = .string(v) }
        if let v = e.data { o["data"] = v }
        return .object(o)
    }

    static func sessionJSON(_ s: Store.SessionRecord) -> JSONValue {
        ["id": .string(s.id), "state": .string(s.phase), "payeeReference": s.payeeReference.map { .string($0) } ?? .null,
         "paymentOrder": s.paymentOrderID.map { .string($0) } ?? .null, "msisdnSuffix": s.msisdnSuffix.map { .string($0) } ?? .null,
         "lastProblemType": s.lastProblemType.map { .string($0) } ?? .null, "traceId": s.traceID.map { .string($0) } ?? .null,
         "created": .string(Timestamp.iso8601(ms: s.createdAtMs)), "updated": .string(Timestamp.iso8601(ms: s.updatedAtMs))]
    }
}

/// Reads and checks the support API's query parameters (also used by `kassa events`).
public enum SupportQuery {
    public struct Invalid: Error, Equatable {
        public let parameter: String
        public let reason: String
        public var problem: Problem { .badRequest("\(parameter) \(reason)", parameter: parameter) }
    }

    static let phases = PaymentSessionMachine.Phase.allCases.map(\.rawValue)

    public static func events(_ query: [(name: String, value: String)]) throws(Invalid) -> Store.EventQuery {
        var q = Store.EventQuery()
        for (name, value) in query where !name.isEmpty {
            switch name {
            case "session": q.sessionID = try sessionID(value, "session")
            case "kind":
                let kinds = value.split(separator: ",").map(String.init)
                guard !kinds.isEmpty, kinds.count <= 20, kinds.allSatisfy({ $0.count <= 40 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0 == ".") } })
                else { throw Invalid(parameter: "kind", reason: "must be event kinds such as upstream.response, comma-separated") }
                q.kinds = kinds
            case "level":
                guard let level = LogEvent.Level(rawValue: value) else { throw Invalid(parameter: "level", reason: "must be debug, info, warning or error") }
                q.minimumLevel = level
            case "from": q.fromMs = try time(value, "from")
            case "to": q.toMs = try time(value, "to")
            case "q":
                guard value.count <= 200 else { throw Invalid(parameter: "q", reason: "must be at most 200 characters") }
                q.text = value
            case "trace":
                guard TraceContext.isTraceID(value) else { throw Invalid(parameter: "trace", reason: "must be a 32-digit trace id") }
                q.traceID = value
            case "cursor":
                guard let id = ClientNumber.whole(value, in: 0...Int64.max) else {
                    throw Invalid(parameter: "cursor", reason: "must be a cursor from a previous page")
                }
                q.afterID = id
            case "limit": q.limit = try limit(value, maximum: 1_000)
            case "token": break
            default: throw Invalid(parameter: name, reason: "is not a filter of this list")
            }
        }
        try checkRange(q.fromMs, q.toMs)
        return q
    }

    public static func sessions(_ query: [(name: String, value: String)]) throws(Invalid) -> Store.SessionQuery {
        var q = Store.SessionQuery()
        for (name, value) in query where !name.isEmpty {
            switch name {
            case "id": q.id = try sessionID(value, "id")
            case "payeeReference":
                guard !value.isEmpty, value.count <= 30, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                    throw Invalid(parameter: "payeeReference", reason: "must be 1 to 30 letters and digits")
                }
                q.payeeReference = value
            case "paymentOrder":
                guard !value.isEmpty, value.count <= 200, !value.contains(where: { $0.isWhitespace }) else {
                    throw Invalid(parameter: "paymentOrder", reason: "must be a payment order id such as /psp/paymentorders/…")
                }
                q.paymentOrderID = value
            case "msisdn":
                guard (4...15).contains(value.count), value.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                    throw Invalid(parameter: "msisdn", reason: "must be the last 4 or more digits of an MSISDN")
                }
                q.msisdnSuffix = String(value.suffix(4))
            case "state":
                guard phases.contains(value) else { throw Invalid(parameter: "state", reason: "must be one of \(phases.joined(separator: ", "))") }
                q.phase = value
            case "problemType":
                guard !value.isEmpty, value.count <= 300 else { throw Invalid(parameter: "problemType", reason: "must be a problem type") }
                q.problemType = value
            case "from": q.fromMs = try time(value, "from")
            case "to": q.toMs = try time(value, "to")
            case "cursor":
                let parts = value.split(separator: ".")
                guard parts.count == 2, let ms = ClientNumber.whole(parts[0], in: 0...ClientNumber.maxTimeMs),
                      PaymentURLHelper.isSafeID(String(parts[1])) else {
                    throw Invalid(parameter: "cursor", reason: "must be a cursor from a previous page")
                }
                q.before = (ms, String(parts[1]))
            case "limit": q.limit = try limit(value, maximum: 500)
            case "token": break
            default: throw Invalid(parameter: name, reason: "is not a filter of this list")
            }
        }
        try checkRange(q.fromMs, q.toMs)
        return q
    }

    static func sessionID(_ value: String, _ parameter: String) throws(Invalid) -> String {
        guard PaymentURLHelper.isSafeID(value) else { throw Invalid(parameter: parameter, reason: "must be a session id (hex digits)") }
        return value
    }

    static func limit(_ value: String, maximum: Int) throws(Invalid) -> Int {
        guard let n = ClientNumber.whole(value, in: 1...Int64(maximum)) else {
            throw Invalid(parameter: "limit", reason: "must be a whole number from 1 to \(maximum)")
        }
        return Int(n)
    }

    static func checkRange(_ from: Int64?, _ to: Int64?) throws(Invalid) {
        if let from, let to, to <= from { throw Invalid(parameter: "to", reason: "must be after from") }
    }

    /// Milliseconds since 1970 from an ISO 8601 time (an offset too) or a number of
    /// milliseconds, from 1970 to the end of year 9999.
    public static func time(_ value: String, _ parameter: String) throws(Invalid) -> Int64 {
        if let ms = ClientNumber.timeMs(value) { return ms }
        for style in [Date.ISO8601FormatStyle(includingFractionalSeconds: true), Date.ISO8601FormatStyle()] {
            guard let date = try? Date(value, strategy: style) else { continue }
            let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
            if ms >= 0, ms <= Double(ClientNumber.maxTimeMs) { return Int64(ms) }
        }
        throw Invalid(parameter: parameter, reason: "must be an ISO 8601 time (2026-11-22T10:00:00Z) or milliseconds since 1970, up to year 9999")
    }
}
