import ArgumentParser
import Foundation
import KassaCore
import KassaGateway
import KassaStore
import KassaUpstream

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Query the event log: from a database file or from running nodes.",
        discussion: """
        The filters are the support API's (GET /v1/admin/events). With --url the query goes to a running \
        node (repeat --url to ask several nodes; their events are merged by time); otherwise the database \
        file is read directly.
        """
    )

    @Option(help: "Database file. (KASSA_DB, default ./kassa.sqlite; ignored with --url)")
    var db: String?
    @Option(name: .customLong("url"), help: "A running node's base URL; repeatable. (KASSA_URL)")
    var urls: [String] = []
    @Option(name: .customLong("admin-token"), help: "Admin token for --url. (KASSA_ADMIN_TOKEN)")
    var adminToken: String?
    @Option(help: "Only this session's events.")
    var session: String?
    @Option(help: "Only these kinds, comma-separated (e.g. upstream.response,push.sent).")
    var kind: String?
    @Option(help: "Only this level and above: debug, info, warning, error.")
    var level: String?
    @Option(help: "From this time (ISO 8601 or epoch ms).")
    var from: String?
    @Option(help: "Before this time (ISO 8601 or epoch ms).")
    var to: String?
    @Option(help: "Free text in the summary or details.")
    var search: String?
    @Option(help: "Only this W3C trace id.")
    var trace: String?
    @Option(help: "At most this many events (1…1000).")
    var limit: Int = 100
    @Option(help: "table, json (one object a line) or csv.")
    var format: String = "table"
    @Flag(help: "Keep printing new events as they are written (Ctrl-C stops).")
    var follow = false

    func run() async throws {
        guard ["table", "json", "csv"].contains(format) else { throw ValidationError("--format must be table, json or csv") }
        var query: [(name: String, value: String)] = [("limit", String(limit))]
        for (name, value) in [("session", session), ("kind", kind), ("level", level), ("from", from), ("to", to), ("q", search), ("trace", trace)] {
            if let value { query.append((name, value)) }
        }
        // The same checks as the API, so a bad filter is named the same way.
        do { _ = try SupportQuery.events(query) } catch { throw ValidationError("\(error.parameter) \(error.reason)") }

        let source: EventSource
        let nodes = urls.isEmpty ? commaList(setting(nil, "KASSA_URL", default: "")) : urls
        if !nodes.isEmpty {
            let token = setting(adminToken, "KASSA_ADMIN_TOKEN", default: "")
            guard !token.isEmpty else { throw ValidationError("--admin-token (or KASSA_ADMIN_TOKEN) is needed with --url") }
            source = .nodes(nodes, token: token, client: UpstreamClient())
        } else {
            let path = setting(db, "KASSA_DB", default: "./kassa.sqlite")
            guard FileManager.default.fileExists(atPath: path) else { throw ValidationError("no database at \(path)") }
            do { source = .database(try Store.open(path: path)) } catch {
                printToTerminal("kassa events: \(error)")
                throw ExitCode(1)
            }
        }
        var printer = EventPrinter(format: format)
        var cursors: [String: Int64] = [:]
        repeat {
            let events = try await source.fetch(query, cursors: cursors)
            for (node, event) in events {
                if let id = event["id"]?.intValue { cursors[node] = max(cursors[node] ?? 0, Int64(id)) }
            }
            printer.print(events.map(\.1))
            if follow { try await Task.sleep(for: .milliseconds(500)) }
        } while follow
    }
}

/// Where events come from: the database file, or nodes' support APIs.
enum EventSource {
    case database(Store)
    case nodes([String], token: String, client: UpstreamClient)

    /// Events after each node's cursor, merged by time.
    func fetch(_ query: [(name: String, value: String)], cursors: [String: Int64]) async throws -> [(String, JSONValue)] {
        switch self {
        case .database(let store):
            var q = try SupportQuery.events(query)
            q.afterID = cursors["db"]
            return try store.searchEvents(q).map { ("db", EventPrinter.json($0)) }
        case .nodes(let urls, let token, let client):
            var merged: [(String, JSONValue)] = []
            for url in urls {
                var items = query
                if let cursor = cursors[url] { items.append(("cursor", String(cursor))) }
                let target = url.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + "/v1/admin/events?" + PaymentURLHelper.encodeQuery(items)
                let response: UpstreamResponse
                do { response = try await client.send(UpstreamRequest(url: target, headers: [("Authorization", "Bearer \(token)")])) } catch {
                    throw ValidationError("\(url): \(error)")
                }
                let body = try? JSONValue.parse(response.body)
                guard response.status == 200, let events = body?["events"]?.arrayValue else {
                    throw ValidationError("\(url) answered \(response.status): \(body?["detail"]?.stringValue ?? response.text)")
                }
                merged += events.map { (url, urls.count > 1 && $0["node"] == nil ? $0.adding("node", .string(url)) : $0) }
            }
            return merged.sorted { ($0.1["atMs"]?.doubleValue ?? 0) < ($1.1["atMs"]?.doubleValue ?? 0) }
        }
    }
}

/// Prints events as an aligned table, JSON lines, or CSV.
struct EventPrinter {
    let format: String
    var printedHeader = false

    static let columns = ["at", "node", "session", "seq", "kind", "level", "status", "ms", "summary"]

    static func json(_ e: LogEvent) -> JSONValue {
        var o: [String: JSONValue] = ["id": e.id.map { .number(Double($0)) } ?? .null, "atMs": .number(Double(e.atMs)),
                                      "at": .string(Timestamp.iso8601(ms: e.atMs)),
                                      "kind": .string(e.kind), "level": .string(e.level.rawValue), "summary": .string(e.summary)]
        if let v = e.sessionID { o["session"] = .string(v) }
        if let v = e.seq { o["seq"] = .number(Double(v)) }
        if let v = e.status { o["status"] = .number(Double(v)) }
        if let v = e.durationMs { o["durationMs"] = .number(v) }
        if let v = e.traceID { o["traceId"] = .string(v) }
        if let v = e.data { o["data"] = v }
        return .object(o)
    }

    static func cells(_ e: JSONValue) -> [String] {
        let duration = e["durationMs"]?.doubleValue.map { String(format: "%.1f", $0) } ?? ""
        return [e["at"]?.stringValue ?? "", e["node"]?.stringValue ?? "", e["session"]?.stringValue ?? "", e["seq"]?.intValue.map(String.init) ?? "",
                e["kind"]?.stringValue ?? "", e["level"]?.stringValue ?? "", e["status"]?.intValue.map(String.init) ?? "",
                duration, e["summary"]?.stringValue ?? ""]
    }

    mutating func print(_ events: [JSONValue]) {
        var out = ""
        func emit(_ line: String) { out += line + "\n" }
        defer { if !out.isEmpty { FileHandle.standardOutput.write(Data(out.utf8)) } }
        switch format {
        case "json":
            for e in events { emit(e.text) }
        case "csv":
            if !printedHeader { emit(Self.columns.joined(separator: ",")); printedHeader = true }
            for e in events { emit(Self.cells(e).map(Self.csvField).joined(separator: ",")) }
        default:
            guard !events.isEmpty || !printedHeader else { return }
            let rows = events.map(Self.cells)
            var widths = Self.columns.map(\.count)
            for row in rows { for (i, cell) in row.enumerated() where i < widths.count - 1 { widths[i] = max(widths[i], cell.count) } }
            func line(_ cells: [String]) -> String {
                cells.enumerated().map { i, c in i == cells.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                    .joined(separator: "  ")
            }
            if !printedHeader { emit(line(Self.columns)); printedHeader = true }
            for row in rows { emit(line(row)) }
        }
    }

    static func csvField(_ s: String) -> String {
        s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
    }
}

extension JSONValue {
    func adding(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(var o) = self else { return self }
        o[key] = value
        return .object(o)
    }
}
