import Foundation
import KassaCore
import KassaEdge
import KassaStore

/// The Sessions API (`/v1/sessions`): create a PaymentSession, read it, and
/// send it commands over HTTP — the same commands the WebSocket takes.
extension Gateway {
    static let streamPattern = PathPattern("/v1/sessions/{id}/stream")

    static func unauthorized(_ detail: String) -> HTTPResponse {
        .problem(.kassa("unauthorized", "Unauthorized", 401, detail: detail), headers: [("www-authenticate", "Bearer")])
    }

    static func clientToken(_ headers: HTTPHeaders, query: [(name: String, value: String)]) -> String? {
        if let authorization = headers["authorization"], authorization.hasPrefix("Bearer ") {
            return String(authorization.dropFirst(7))
        }
        return query.first { $0.name == "token" }?.value
    }

    // MARK: Create

    func createSession(_ context: RequestContext) async -> HTTPResponse {
        guard hasValidAPIKey(context.request) else { return Self.unauthorized("the Your-Api-Key header is missing or holds no valid key") }
        let keyScope = "create:" + Hashing.sha256Hex(context.request.headers[MerchantAPI.apiKeyHeader] ?? "")
        return await idempotent(scope: keyScope, context) { [self] in await self.createSessionNow(context) }
    }

    private func createSessionNow(_ context: RequestContext) async -> HTTPResponse {
        if configuration.maxSessions > 0, sessions.count >= configuration.maxSessions {
            return .problem(.kassa("capacity", "Service Unavailable", 503,
                                   detail: "this node holds its maximum of \(configuration.maxSessions) sessions; try again later or another node"),
                            headers: [("retry-after", "5")])
        }
        if let failure = store.eventLog.lastWriteError {
            // A payment nobody could explain later is worse than one not started.
            return .problem(.serviceUnavailable("the event log cannot be written (\(failure)); no new sessions until it can"),
                            headers: [("retry-after", "5")])
        }
        var input: JSONInput
        switch JSONInput.parse(context.request.body) {
        case .success(let parsed): input = parsed
        case .failure(let problem): return .problem(.badRequest("the body \(problem.description)", parameter: problem.field))
        }
        let id = Self.newSessionID()
        var href: String
        var payeeReference: String?
        var paymentOrderID: String?
        if let given = input.string("viewPaymentSession", required: false, maxLength: 2048) {
            guard isAllowedUpstream(given) else {
                return .problem(.badRequest("viewPaymentSession must be an http(s) URL on an allowed upstream host", parameter: "viewPaymentSession"))
            }
            href = given
        } else if let order = input.object("paymentOrder", required: false) {
            switch await createPaymentOrder(JSONInput(["paymentorder": .object(order)]), traceID: context.traceID, sessionID: id) {
            case .failure(let refusal): return refusal.response
            case .success(let created):
                guard let view = Self.operation(created.document, rel: "view-paymentsession")?["href"]?.stringValue,
                      isAllowedUpstream(view) else {
                    return MerchantProblem.badGateway("the payment order has no usable view-paymentsession operation")
                }
                href = view
                payeeReference = created.payeeReference
                paymentOrderID = created.paymentOrderID
            }
        } else {
            if let first = input.problems.first { return .problem(.badRequest("\(first.field) \(first.description)", parameter: first.field)) }
            return .problem(.badRequest("send viewPaymentSession (a view-paymentsession href) or paymentOrder", parameter: "body"))
        }

        let now = Self.nowMs()
        let token = SessionToken.issue(sessionID: id, href: href, expiresAt: (now + 999) / 1000 + Int64(configuration.clientTokenMaxAgeSeconds),
                                       keys: tokenKeys)
        let record = Store.SessionRecord(id: id, clientTokenSHA256: Hashing.sha256Hex(token), viewHref: href, payeeReference: payeeReference,
                                         paymentOrderID: paymentOrderID, phase: PaymentSessionMachine.Phase.starting.rawValue,
                                         createdAtMs: now, updatedAtMs: now, traceID: context.traceID)
        do { try await store.insertSession(record) } catch {
            return .problem(.serviceUnavailable("the session cannot be stored: \(Store.reason(error))"))
        }
        let actor = SessionActor(id: id, clientTokenSHA256: record.clientTokenSHA256, traceID: context.traceID,
                                 machine: PaymentSessionMachine(sessionURL: href, pollIntervalMs: configuration.sessionPollIntervalMs),
                                 history: [], gateway: self)
        sessions.add(actor)
        store.eventLog.append(LogEvent(atMs: now, sessionID: id, kind: "session.created", summary: "session created",
                                       traceID: context.traceID,
                                       data: ["payeeReference": payeeReference.map { .string($0) } ?? .null,
                                              "paymentOrder": paymentOrderID.map { .string($0) } ?? .null,
                                              "viewPaymentSession": .string(Redaction.redactURLQuery(href))]))
        // The session starts on its first use (stream, command or read), on whichever node of a
        // cluster its id routes to: that node picks it up with the token if it did not create it.
        return .json(["id": .string(id), "clientToken": .string(token), "streamUrl": .string("/v1/sessions/\(id)/stream"),
                      "state": .string(await actor.phase.rawValue)], status: 201)
    }

    /// 32 hex digits: the creation time in milliseconds (10 digits), then 88 random bits.
    /// Time-ordered ids keep the event log's session index appending where the active
    /// sessions are, instead of touching pages all over it (see bench/RESULTS.md).
    static func newSessionID(nowMs: Int64 = nowMs()) -> String {
        String(String(nowMs, radix: 16).suffix(10)).leftPadded(to: 10) + String(Secrets.randomHex(bytes: 11).prefix(22))
    }

    // MARK: Read and command

    /// The session named in the path, if the request carries its client token.
    func authorizedSession(_ context: RequestContext) -> Result<SessionActor, Refusal> {
        let id = context.parameters["id"] ?? ""
        let token = Self.clientToken(context.request.headers, query: context.request.query)
        guard let actor = session(id) ?? adopt(id, token: token, since: 0) else {
            return .failure(Refusal(response: .problem(.notFound("no session \(id)"))))
        }
        if let refusal = clientTokenRefusal(token, actor) { return .failure(Refusal(response: refusal)) }
        return .success(actor)
    }

    /// Nil when `token` is this session's client token; else the 401 saying what is wrong with it.
    func clientTokenRefusal(_ token: String?, _ actor: SessionActor?) -> HTTPResponse? {
        let nowSeconds = Self.nowMs() / 1000
        if let actor, SessionRegistry.tokenMatches(token, actor, keys: tokenKeys, nowSeconds: nowSeconds) { return nil }
        if let token, let header = SessionToken.header(token), header.expiresAt <= nowSeconds {
            return Self.unauthorized("this client token expired at \(Timestamp.iso8601(ms: header.expiresAt * 1000)); create a new session")
        }
        return Self.unauthorized("this session's client token is required (Authorization: Bearer, or ?token=)")
    }

    func getSession(_ context: RequestContext) async -> HTTPResponse {
        switch authorizedSession(context) {
        case .failure(let refusal): return refusal.response
        case .success(let actor): return .json(await actor.snapshot())
        }
    }

    func sessionCommand(_ context: RequestContext, type: String) async -> HTTPResponse {
        let actor: SessionActor
        switch authorizedSession(context) {
        case .failure(let refusal): return refusal.response
        case .success(let found): actor = found
        }
        return await idempotent(scope: "session:\(actor.id):\(type)", context) {
            let body = context.request.body.isEmpty ? JSONValue.object([:]) : ((try? JSONValue.parse(context.request.body)) ?? .null)
            guard case .object = body else { return .problem(.badRequest("the body must be a JSON object", parameter: "body")) }
            let command: PaymentSessionMachine.Command
            switch Self.parseCommand(type, body) {
            case .failure(let problem): return .problem(problem)
            case .success(let parsed): command = parsed
            }
            if let problem = await actor.command(command, source: "http") { return .problem(problem) }
            return .json(["ok": true, "session": await actor.snapshot()], status: 202)
        }
    }

    /// A command from the wire (HTTP body or WebSocket frame).
    static func parseCommand(_ type: String, _ body: JSONValue) -> Result<PaymentSessionMachine.Command, Problem> {
        switch type {
        case "attempt":
            return Instrument.parse(body["instrument"]).map { .attempt($0) }
        case "abort": return .success(.abort)
        case "retry": return .success(.retry)
        case "fallback":
            let restrict = body["restrictToInstruments"]
            if let restrict, restrict != .null {
                guard let list = restrict.arrayValue?.compactMap(\.stringValue), list.count == restrict.arrayValue?.count, list.count <= 20 else {
                    return .failure(.badRequest("restrictToInstruments must be an array of payment method names", parameter: "restrictToInstruments"))
                }
                return .success(.fallback(restrictTo: list))
            }
            return .success(.fallback(restrictTo: nil))
        case "3ds":
            if let failure = body["loadFailed"]?.stringValue { return .success(.threeDSecureLoadFailed(reason: failure)) }
            guard let cres = body["cres"]?.stringValue else { return .failure(.badRequest("cres is required", parameter: "cres")) }
            return .success(.threeDSecureResult(cres: cres))
        case "appLaunchFailed":
            return .success(.appLaunchFailed)
        default:
            return .failure(.badRequest("unknown command type \(type.prefix(40)); use attempt, abort, retry, fallback, 3ds, appLaunchFailed or ping",
                                        parameter: "type"))
        }
    }

    // MARK: Finding sessions

    /// A session held here, or one this node stored before (after a restart).
    func session(_ id: String) -> SessionActor? {
        if let actor = sessions.session(id) { return actor }
        guard PaymentURLHelper.isSafeID(id), let record = try? store.session(id: id) else { return nil }
        let restored = restore(record)
        let actor = sessions.add(restored)
        if actor === restored, restored.initialPhaseIsTerminal {
            // Read back only to be shown: it leaves memory again like any ended session.
            sessions.ended(id, dueMs: Self.nowMs() + Int64(configuration.endedSessionMemorySeconds * 1000))
        } else if actor === restored {
            store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: id, kind: "session.restored",
                                           summary: "read back from the store in \(record.phase); re-read upstream when next used",
                                           traceID: actor.traceID))
        }
        return actor
    }

    func restore(_ record: Store.SessionRecord) -> SessionActor {
        let logged = (try? store.eventLog.pushedEvents(sessionID: record.id, afterSeq: 0)) ?? []
        let history = logged.map {
            SequencedPush(seq: $0.seq ?? 0, type: $0.summary, atMs: $0.atMs, data: $0.data ?? .object([:]), session: record.id)
        }
        let phase = PaymentSessionMachine.Phase(rawValue: record.phase) ?? .starting
        let machine = PaymentSessionMachine(restoring: record.viewHref, phase: phase, history: logged.map(\.summary),
                                            pollIntervalMs: configuration.sessionPollIntervalMs)
        return SessionActor(id: record.id, clientTokenSHA256: record.clientTokenSHA256,
                            traceID: record.traceID ?? TraceContext.newTraceID(), machine: machine, history: history, gateway: self)
    }

    /// A session this node has never held, vouched for by its client token (signed with the
    /// cluster secret): another node created it. It is picked up from upstream, which is the
    /// source of truth, and its pushes continue after `since`, the last seq the client saw.
    func adopt(_ id: String, token: String?, since: Int64) -> SessionActor? {
        let now = Self.nowMs()
        guard let token, let claim = SessionToken.open(token, keys: tokenKeys), claim.sessionID == id, claim.expiresAt > now / 1000,
              PaymentURLHelper.isSafeID(id), isAllowedUpstream(claim.href) else { return nil }
        let traceID = TraceContext.newTraceID()
        let record = Store.SessionRecord(id: id, clientTokenSHA256: Hashing.sha256Hex(token), viewHref: claim.href, payeeReference: nil,
                                         paymentOrderID: nil, phase: PaymentSessionMachine.Phase.starting.rawValue,
                                         createdAtMs: now, updatedAtMs: now, traceID: traceID)
        do { try store.insertSessionNow(record) } catch { return sessions.session(id) }
        let machine = PaymentSessionMachine(restoring: claim.href, phase: .starting,
                                            history: since > 0 ? ["PaymentSessionFetched"] : [],
                                            pollIntervalMs: configuration.sessionPollIntervalMs)
        let candidate = SessionActor(id: id, clientTokenSHA256: record.clientTokenSHA256, traceID: traceID, machine: machine,
                                     history: [], seqBase: since, gateway: self)
        let actor = sessions.add(candidate)
        guard actor === candidate else { return actor }
        store.eventLog.append(LogEvent(atMs: now, sessionID: id, kind: "session.adopted",
                                       summary: "picked up from another node, continuing after seq \(since)", traceID: traceID))
        logger.info("session adopted", metadata: ["session_id": "\(id)", "trace_id": "\(traceID)", "since": "\(since)"])
        Task { await actor.start() }
        return actor
    }

    /// Picks up the sessions a previous run left unfinished and re-reads them upstream.
    public func recoverSessions() {
        let terminal = [PaymentSessionMachine.Phase.completed, .canceled, .ended].map(\.rawValue)
        guard let records = try? store.unfinishedSessions(terminalPhases: terminal) else { return }
        for record in records where sessions.session(record.id) == nil {
            let actor = restore(record)
            sessions.add(actor)
            store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: record.id, kind: "session.recovered",
                                           summary: "picked up after restart in \(record.phase)"))
            Task { await actor.start() }
        }
    }

    // MARK: Idempotency-Key

    /// Runs `work` once per Idempotency-Key and scope; a repeat gets the first answer.
    func idempotent(scope: String, _ context: RequestContext, _ work: () async -> HTTPResponse) async -> HTTPResponse {
        guard let key = context.request.headers["idempotency-key"] else { return await work() }
        guard !key.isEmpty, key.utf8.count <= 200, key.utf8.allSatisfy({ $0 >= 0x21 && $0 < 0x7F }) else {
            return .problem(.badRequest("Idempotency-Key must be 1 to 200 visible ASCII characters", parameter: "Idempotency-Key"))
        }
        if let stored = try? store.idempotentAnswer(scope: scope, key: key) {
            return HTTPResponse(status: stored.status, contentType: stored.contentType, headers: [("idempotent-replayed", "true")], body: stored.body)
        }
        let claimed = idempotencyInFlight.withLock { $0.insert(scope + "\u{0}" + key).inserted }
        guard claimed else {
            return .problem(.kassa("idempotency-conflict", "Conflict", 409, detail: "a request with this Idempotency-Key is still running"))
        }
        defer { _ = idempotencyInFlight.withLock { $0.remove(scope + "\u{0}" + key) } }
        let response = await work()
        if response.status < 500 {
            try? await store.rememberAnswer(scope: scope, key: key,
                                            Store.StoredAnswer(status: response.status, contentType: response.contentType, body: response.body),
                                            atMs: Self.nowMs())
        }
        return response
    }
}

extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
