import KassaCore
import KassaEdge

/// The session stream, `/v1/sessions/{id}/stream?since=SEQ` (subprotocol
/// `kassa.v1`): pushed events out, commands in, each command answered by
/// `{"re": id, "ok": true}` or `{"re": id, "ok": false, "problem": …}`.
///
/// The edge calls these on its service thread, which serves every connection: they
/// decide from memory and the token alone, and hand everything else to the stream's
/// ordered inbox (`StreamInbox`), carried out off that thread.
extension SessionService {
    static let streamPattern = PathPattern("/v1/sessions/{id}/stream")

    /// The largest `since` taken: far beyond any session's pushes, and far enough below
    /// Int64's limit that the seqs counted on from it can never overflow (a client's
    /// `since` becomes the seq base of a session picked up from another node).
    static let maxSince: Int64 = 1_000_000_000_000

    static func since(_ text: String) -> Int64? {
        ClientNumber.whole(text, in: 0...maxSince)
    }

    func shouldAcceptStream(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        guard let id = Self.streamPattern.match(upgrade.path)?["id"] else {
            return .problem(.notFound("no WebSocket route for \(upgrade.path)"))
        }
        if let since = upgrade.queryValue("since"), Self.since(since) == nil {
            return .problem(.badRequest("since must be a whole number from 0 to \(Self.maxSince)", parameter: "since"))
        }
        guard PaymentURLHelper.isSafeID(id) else { return .problem(.notFound("no session \(id)")) }
        let token = Gateway.clientToken(upgrade.headers, query: upgrade.query)
        if let actor = registry.session(id) { return tokenRefusal(token, actor).map { HTTPResponse.problem(for: Gateway.unauthorized($0)) } }
        // Not in memory: a token that cannot be ours, or names another session, is refused now;
        // otherwise the store (or the token, for another node's session) decides once the stream is open.
        guard let token, let header = SessionToken.header(token), header.expiresAt > nowMs() / 1000 else {
            return tokenRefusal(token, nil).map { HTTPResponse.problem(for: Gateway.unauthorized($0)) }
        }
        if let claim = SessionToken.open(token, keys: tokenKeys), claim.sessionID != id { return .problem(.notFound("no session \(id)")) }
        return nil
    }

    func streamOpened(_ upgrade: WebSocketUpgrade) {
        let inbox = StreamInbox(connectionID: upgrade.connectionID)
        streamInboxes.withLock { $0[upgrade.connectionID] = inbox }
        deliver(.open(upgrade), to: inbox)
    }

    func streamReceived(_ connectionID: UInt64, text: String) {
        guard let edge, let inbox = streamInboxes.withLock({ $0[connectionID] }) else { return }
        // A ping with nothing queued before it is answered here and now: no answer can overtake another.
        // (Looked for in the bytes in place: see `containsBytes`.)
        if inbox.isIdle, text.utf8.count < 256, text.containsBytes(of: #""ping""#), let message = try? JSONValue.parse(text, maxDepth: 4),
           message["type"]?.stringValue == CommandType.ping.rawValue {
            edge.send(connectionID, json: Self.pong(message["id"]))
            return
        }
        deliver(.frame(text), to: inbox)
    }

    func streamClosed(_ connectionID: UInt64, code: UInt16?) {
        guard let inbox = streamInboxes.withLock({ $0.removeValue(forKey: connectionID) }) else { return }
        deliver(.close(code: code), to: inbox)
    }

    static func pong(_ re: JSONValue?) -> JSONValue { CommandAnswer.frame(re: re, type: "pong") }

    static func answer(_ re: JSONValue?, _ problem: Problem) -> JSONValue { CommandAnswer.frame(re: re, problem: problem.json) }

    // MARK: Carried out in order, off the service thread

    private func deliver(_ item: StreamInbox.Item, to inbox: StreamInbox) {
        guard inbox.append(item) else { return }
        Task {
            while let next = inbox.next() { await carryOut(next, inbox) }
        }
    }

    private func carryOut(_ item: StreamInbox.Item, _ inbox: StreamInbox) async {
        let connection = inbox.connectionID
        switch item {
        case .open(let upgrade):
            await subscribe(upgrade, inbox)
        case .frame(let text):
            guard let edge, let actor = inbox.session else { return }
            let message: JSONValue
            do { message = try JSONValue.parse(text, maxDepth: 16) } catch {
                edge.send(connection, json: Self.answer(nil, .badRequest("the frame is not JSON: \(error)", parameter: "frame")))
                return
            }
            let re = message["id"]
            guard case .object = message, let type = message["type"]?.stringValue else {
                edge.send(connection, json: Self.answer(re, .badRequest("a command is an object with a type", parameter: "type")))
                return
            }
            if type == CommandType.ping.rawValue {
                edge.send(connection, json: Self.pong(re))
                return
            }
            switch PaymentSessionMachine.Command.parse(type, message) {
            case .failure(let problem):
                edge.send(connection, json: Self.answer(re, problem))
            case .success(let command):
                let problem = await actor.command(command, source: "ws")
                edge.send(connection, json: problem.map { Self.answer(re, $0) } ?? CommandAnswer.frame(re: re))
            }
        case .close(let code):
            guard let id = registry.unfollow(connection: connection) else { return }
            record(LogEvent(atMs: nowMs(), sessionID: id, kind: "ws.close",
                                           summary: "closed\(code.map { " with \($0)" } ?? "")", traceID: inbox.session?.traceID,
                                           data: ["connection": .number(Double(connection)), "code": code.map { .number(Double($0)) } ?? .null]))
            await inbox.session?.unsubscribe(connection)
        }
    }

    /// Finds the session (in memory, in the store, or another node's, by its token), checks the
    /// token, and subscribes; a refusal is a problem frame, then a close (4404 or 4401).
    private func subscribe(_ upgrade: WebSocketUpgrade, _ inbox: StreamInbox) async {
        let connection = upgrade.connectionID
        guard let id = Self.streamPattern.match(upgrade.path)?["id"] else { return }
        let token = Gateway.clientToken(upgrade.headers, query: upgrade.query)
        let since = upgrade.queryValue("since").flatMap(Self.since) ?? 0
        // Follow first, then look up: a followed session is never dropped from memory, and one
        // dropped just before is read back here.
        registry.follow(connection: connection, session: id)
        guard let actor = session(id) ?? adopt(id, token: token, since: since) else {
            _ = registry.unfollow(connection: connection)
            refuseStream(connection, .notFound("no session \(id)"), code: WebSocketCloseCode.notFound)
            return
        }
        if let refusal = tokenRefusal(token, actor) {
            _ = registry.unfollow(connection: connection)
            refuseStream(connection, refusal, code: WebSocketCloseCode.unauthorized)
            return
        }
        inbox.session = actor
        record(LogEvent(atMs: nowMs(), sessionID: id, kind: "ws.open", summary: "subscribed since \(since)",
                                       traceID: actor.traceID,
                                       data: ["connection": .number(Double(connection)), "since": .number(Double(since)),
                                              "remote": .string(ClientAddress.network(upgrade.remoteAddress))]))
        await actor.subscribe(connection, since: since)
    }

    private func refuseStream(_ connection: UInt64, _ problem: Problem, code: UInt16) {
        edge?.send(connection, json: Self.answer(nil, problem))
        edge?.close(connection, code: code, reason: problem.title)
    }
}
