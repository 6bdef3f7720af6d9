import KassaCore
import KassaEdge

/// The session stream, `/v1/sessions/{id}/stream?since=SEQ` (subprotocol
/// `kassa.v1`): pushed events out, commands in, each command answered by
/// `{"re": id, "ok": true}` or `{"re": id, "ok": false, "problem": …}`.
extension Gateway {
    public func shouldAcceptWebSocket(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        if upgrade.path == Self.adminStreamPath { return shouldAcceptAdminStream(upgrade) }
        guard let id = Self.streamPattern.match(upgrade.path)?["id"] else {
            return .problem(.notFound("no WebSocket route for \(upgrade.path)"))
        }
        if let since = upgrade.queryValue("since"), Int64(since).map({ $0 < 0 }) ?? true {
            return .problem(.badRequest("since must be a whole number ≥ 0", parameter: "since"))
        }
        let token = Self.clientToken(upgrade.headers, query: upgrade.query)
        let since = upgrade.queryValue("since").flatMap { Int64($0) } ?? 0
        guard let actor = session(id) ?? adopt(id, token: token, since: since) else { return .problem(.notFound("no session \(id)")) }
        return clientTokenRefusal(token, actor)
    }

    public func webSocketOpened(_ upgrade: WebSocketUpgrade) {
        metrics.webSocketOpened(open: edge?.openWebSockets ?? 0)
        if upgrade.path == Self.adminStreamPath { return adminStreamOpened(upgrade) }
        guard let id = Self.streamPattern.match(upgrade.path)?["id"] else { return }
        // Follow first, then look up: a followed session is never dropped from memory, and one
        // dropped just before is read back here.
        sessions.follow(connection: upgrade.connectionID, session: id)
        guard let actor = session(id) else {
            _ = sessions.unfollow(connection: upgrade.connectionID)
            return
        }
        let since = upgrade.queryValue("since").flatMap { Int64($0) } ?? 0
        store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: id, kind: "ws.open", summary: "subscribed since \(since)",
                                       traceID: actor.traceID,
                                       data: ["connection": .number(Double(upgrade.connectionID)), "since": .number(Double(since)),
                                              "remote": .string(upgrade.remoteAddress)]))
        let connection = upgrade.connectionID
        Task { await actor.subscribe(connection, since: since) }
    }

    public func webSocketReceived(_ connectionID: UInt64, text: String) {
        guard let edge, let id = sessions.followed(by: connectionID), let actor = sessions.session(id) else { return }
        let message: JSONValue
        do { message = try JSONValue.parse(text, maxDepth: 16) } catch {
            edge.send(connectionID, json: Self.answer(nil, .badRequest("the frame is not JSON: \(error)", parameter: "frame")))
            return
        }
        let re = message["id"]
        guard case .object = message, let type = message["type"]?.stringValue else {
            edge.send(connectionID, json: Self.answer(re, .badRequest("a command is an object with a type", parameter: "type")))
            return
        }
        if type == "ping" {
            edge.send(connectionID, json: ["re": re ?? .null, "ok": true, "type": "pong"])
            return
        }
        switch Self.parseCommand(type, message) {
        case .failure(let problem):
            edge.send(connectionID, json: Self.answer(re, problem))
        case .success(let command):
            Task {
                let problem = await actor.command(command, source: "ws")
                edge.send(connectionID, json: problem.map { Self.answer(re, $0) } ?? ["re": re ?? .null, "ok": true])
            }
        }
    }

    public func webSocketClosed(_ connectionID: UInt64, code: UInt16?) {
        metrics.webSocketClosed(code: code, open: edge?.openWebSockets ?? 0)
        adminStreams.withLock { _ = $0.removeValue(forKey: connectionID) }
        guard let id = sessions.unfollow(connection: connectionID) else { return }
        store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: id, kind: "ws.close",
                                       summary: "closed\(code.map { " with \($0)" } ?? "")", traceID: sessions.session(id)?.traceID,
                                       data: ["connection": .number(Double(connectionID)), "code": code.map { .number(Double($0)) } ?? .null]))
        if let actor = sessions.session(id) { Task { await actor.unsubscribe(connectionID) } }
    }

    public func frameWritten(after latency: Duration) {
        metrics.pushWritten(after: latency)
    }

    static func answer(_ re: JSONValue?, _ problem: Problem) -> JSONValue {
        ["re": re ?? .null, "ok": false, "problem": problem.json]
    }
}
