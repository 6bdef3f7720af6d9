import Foundation
import KassaCore
import KassaEdge
import KassaStore
import KassaUpstream

/// The support API (`/v1/admin/…`, admin token, checked by the middleware): find
/// sessions, list events, read a session's timeline. Bad filters get a 400 naming the parameter.
///
/// With peers (`--peers`), each answer holds every node's part, each event and session marked
/// with its `node`: a session that failed over reads as one timeline. A node asks its peers with
/// `?local=true` (so they do not ask theirs) and the shared admin token; a peer that does not
/// answer is named in `unreachable` and the rest is still given.
struct SupportAPI: Sendable {
    let store: Store
    let node: String
    let peers: [String]
    let adminToken: String
    let http: UpstreamClient

    static let peerTimeoutMs = 3_000

    /// A page after a cursor is one node's (cursors are event ids, which each node counts itself).
    private func asksPeers(_ context: RequestContext) -> Bool {
        !peers.isEmpty && context.request.queryValue("local") != "true" && context.request.queryValue("cursor") == nil
    }

    func events(_ context: RequestContext) async throws -> HTTPResponse {
        let query: Store.EventQuery
        do { query = try SupportQuery.events(context.request.query) } catch { throw error.problem }
        var events: [JSONValue]
        var next: String?
        do {
            let found = try store.searchEvents(query)
            next = found.count == query.limit ? found.last?.id.map { String($0) } : nil
            events = found.map { marked(Self.eventJSON($0)) }
        } catch {
            throw Problem.serviceUnavailable("the event log cannot be read: \(Store.reason(error))")
        }
        guard asksPeers(context) else { return .json(["events": .array(events), "nextCursor": next.map { .string($0) } ?? .null]) }
        let answers = await fromPeers(context.request.path, context.request.query)
        for answer in answers.found { events += answer["events"]?.arrayValue ?? [] }
        // Merged newest-first as each node lists them; a cursor is one node's, so none is given.
        events.sort { ($0["atMs"]?.doubleValue ?? 0, $0["node"]?.stringValue ?? "") > ($1["atMs"]?.doubleValue ?? 0, $1["node"]?.stringValue ?? "") }
        return .json(["events": .array(Array(events.prefix(query.limit))), "nextCursor": .null,
                      "unreachable": .array(answers.unreachable.map(JSONValue.string))])
    }

    func sessions(_ context: RequestContext) async throws -> HTTPResponse {
        let query: Store.SessionQuery
        do { query = try SupportQuery.sessions(context.request.query) } catch { throw error.problem }
        var sessions: [JSONValue]
        var next: String?
        do {
            let found = try store.searchSessions(query)
            next = found.count == query.limit ? found.last.map { "\($0.createdAtMs).\($0.id)" } : nil
            sessions = found.map { marked(Self.sessionJSON($0)) }
        } catch {
            throw Problem.serviceUnavailable("the session store cannot be read: \(Store.reason(error))")
        }
        guard asksPeers(context) else { return .json(["sessions": .array(sessions), "nextCursor": next.map { .string($0) } ?? .null]) }
        let answers = await fromPeers(context.request.path, context.request.query)
        // A session picked up by another node has a row on each: the one updated last speaks for it.
        var byID: [String: JSONValue] = [:]
        for session in sessions + answers.found.flatMap({ $0["sessions"]?.arrayValue ?? [] }) {
            guard let id = session["id"]?.stringValue else { continue }
            if let known = byID[id], (known["updated"]?.stringValue ?? "") >= (session["updated"]?.stringValue ?? "") { continue }
            byID[id] = session
        }
        let merged = byID.values.sorted { ($0["created"]?.stringValue ?? "", $0["id"]?.stringValue ?? "") > ($1["created"]?.stringValue ?? "", $1["id"]?.stringValue ?? "") }
        return .json(["sessions": .array(Array(merged.prefix(query.limit))), "nextCursor": .null,
                      "unreachable": .array(answers.unreachable.map(JSONValue.string))])
    }

    func timeline(_ context: RequestContext) async throws -> HTTPResponse {
        let id = context.parameters["id"] ?? ""
        guard PaymentURLHelper.isSafeID(id) else { throw Problem.badRequest("id must be a session id", parameter: "id") }
        let record: Store.SessionRecord?, events: [LogEvent]
        do {
            record = try store.session(id: id)
            events = record == nil ? [] : try store.timeline(sessionID: id)
        } catch {
            throw Problem.serviceUnavailable("the event log cannot be read: \(Store.reason(error))")
        }
        var session = record.map { marked(Self.sessionJSON($0)) }
        var rows = events.map { marked(Self.eventJSON($0)) }
        var unreachable: [String] = []
        if asksPeers(context) {
            let answers = await fromPeers(context.request.path, [])
            unreachable = answers.unreachable
            for answer in answers.found {
                rows += answer["events"]?.arrayValue ?? []
                if let other = answer["session"], (session?["updated"]?.stringValue ?? "") < (other["updated"]?.stringValue ?? "") { session = other }
            }
            rows.sort { ($0["atMs"]?.doubleValue ?? 0, $0["node"]?.stringValue ?? "", $0["id"]?.doubleValue ?? 0)
                < ($1["atMs"]?.doubleValue ?? 0, $1["node"]?.stringValue ?? "", $1["id"]?.doubleValue ?? 0) }
        }
        guard var session else { throw Problem.notFound("no session \(id)") }
        // The events have each change of phase at once; the row gets a phase in progress up to
        // `EventLog.phaseHold` later.
        if let phase = rows.last(where: { $0["kind"]?.stringValue == "state.transition" })?["data"]?["to"], case .object(var members) = session {
            members["state"] = phase
            session = .object(members)
        }
        let start = Int64(rows.first?["atMs"]?.doubleValue ?? 0)
        var previous = start
        let steps: [JSONValue] = rows.map { row in
            var json = row.objectValue ?? [:]
            let at = Int64(row["atMs"]?.doubleValue ?? 0)
            json["sinceStartMs"] = .number(Double(at - start))
            json["sincePreviousMs"] = .number(Double(at - previous))
            previous = at
            return .object(json)
        }
        var answer: [String: JSONValue] = ["session": session, "events": .array(steps),
                                           "durationMs": .number(Double(previous - start))]
        if asksPeers(context) {
            answer["nodes"] = .array(Array(Set(steps.compactMap { $0["node"]?.stringValue })).sorted().map(JSONValue.string))
            answer["unreachable"] = .array(unreachable.map(JSONValue.string))
        }
        return .json(.object(answer))
    }

    /// The item marked with this node, when there are peers to tell it from.
    private func marked(_ item: JSONValue) -> JSONValue {
        guard !peers.isEmpty, case .object(var members) = item else { return item }
        members["node"] = .string(node)
        return .object(members)
    }

    /// The same request to every peer, at once; a 404 (the peer never saw the session) counts as nothing found.
    private func fromPeers(_ path: String, _ query: [(name: String, value: String)]) async -> (found: [JSONValue], unreachable: [String]) {
        let suffix = PaymentURLHelper.encodeQuery(query.filter { $0.name != "token" && $0.name != "local" } + [("local", "true")])
        return await withTaskGroup(of: (String, JSONValue?, Bool).self) { group in
            for peer in peers {
                group.addTask {
                    let request = UpstreamRequest(url: peer + path + "?" + suffix, headers: [("Authorization", "Bearer \(adminToken)")],
                                                  totalTimeoutMs: Self.peerTimeoutMs)
                    guard let answer = try? await http.send(request) else { return (peer, nil, false) }
                    if answer.status == 404 { return (peer, nil, true) }
                    guard answer.status == 200, let body = try? JSONValue.parse(answer.body) else { return (peer, nil, false) }
                    return (peer, body, true)
                }
            }
            var found: [JSONValue] = [], unreachable: [String] = []
            for await (peer, body, answered) in group {
                if let body { found.append(body) }
                if !answered { unreachable.append(peer) }
            }
            return (found, unreachable.sorted())
        }
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
            case "token", "local": break
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
            case "token", "local": break
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
