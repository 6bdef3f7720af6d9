import CLibWebSockets
import Foundation
import KassaCore

/// One connection as the service thread sees it.
final class EdgeConnection {
    enum Kind { case http, webSocket }

    let id: UInt64
    let wsi: OpaquePointer
    var kind: Kind

    // HTTP: the request being read, and the answer waiting to be written.
    var method: HTTPMethod = .GET
    var path = ""
    var query: [(String, String)] = []
    var headers = HTTPHeaders()
    var body: [UInt8] = []
    var awaitingBody = false
    var bodyOverflow = false
    var pendingResponse: HTTPResponse?
    /// Listed in `Confined.connections` by its id.
    var published = false

    // WebSocket: the upgrade, the message being assembled, and what waits to be sent.
    var upgrade: WebSocketUpgrade?
    var message: [UInt8] = []
    var messageOverflow = false
    var outbox: OutboundQueue
    var heartbeat: Heartbeat
    var closeCode: UInt16?

    /// An open WebSocket with no frame, ping or close waiting for a writeable callback.
    var hasNothingToWrite: Bool { kind == .webSocket && outbox.isIdle }

    init(id: UInt64, wsi: OpaquePointer, kind: Kind, outbox: OutboundQueue, heartbeat: Heartbeat) {
        self.id = id
        self.wsi = wsi
        self.kind = kind
        self.outbox = outbox
        self.heartbeat = heartbeat
    }
}

/// A client address and its open and half-open connections, shared by those connections: a
/// request's start and end count it without hashing the address.
final class ClientAddress {
    let text: String
    var open = 0
    var halfOpen = 0

    init(_ text: String) { self.text = text }
}

/// An accepted socket while it is open, across its keep-alive transactions and an upgrade: its
/// client address, and since when it waits for a request. It is reached from its wsi through
/// libwebsockets' opaque user data, so a request's bookkeeping hashes nothing.
final class EdgeSocket {
    let wsi: OpaquePointer
    let client: ClientAddress
    /// Since when (`monotonicMs`) the socket waits for a request's head and body; nil while it
    /// does not (a request is being answered, or it is a WebSocket).
    var waitingSinceMs: Int64?
    /// The transaction under way on it, or its WebSocket.
    var connection: EdgeConnection?
    /// Its neighbours in `WaitingSockets` while it waits.
    fileprivate var newerWaiting: EdgeSocket?
    fileprivate unowned(unsafe) var olderWaiting: EdgeSocket?

    init(wsi: OpaquePointer, client: ClientAddress) {
        self.wsi = wsi
        self.client = client
    }
}

/// The sockets waiting for a request, longest first. A socket joins at the newest end when it
/// starts waiting and the clock only goes forward, so the list is in order of `waitingSinceMs`
/// without sorting: the one to evict is the oldest, and the overdue ones lead. Joining and leaving
/// are O(1), with no hashing.
struct WaitingSockets {
    private(set) var oldest: EdgeSocket?
    private unowned(unsafe) var newest: EdgeSocket?
    private(set) var count = 0

    mutating func append(_ socket: EdgeSocket) {
        socket.olderWaiting = newest
        if let newest { newest.newerWaiting = socket } else { oldest = socket }
        newest = socket
        count += 1
    }

    mutating func remove(_ socket: EdgeSocket) {
        let newer = socket.newerWaiting, older = socket.olderWaiting
        if let older { older.newerWaiting = newer } else { oldest = newer }
        if let newer { newer.olderWaiting = older } else { newest = older }
        socket.newerWaiting = nil
        socket.olderWaiting = nil
        count -= 1
    }

    /// From the oldest, while `each` returns true.
    func forEachOldest(_ each: (EdgeSocket) -> Bool) {
        var next = oldest
        while let socket = next, each(socket) { next = socket.newerWaiting }
    }
}

extension EdgeServer {
    /// State touched only on the service thread.
    struct Confined {
        var connections: [UInt64: EdgeConnection] = [:]
        var nextID: UInt64 = 1
        var draining = false
        var httpInFlight = 0
        var lastHeartbeatMs: Int64 = 0
        /// The open sockets (each also in its wsi's opaque user data, which does not hold it), and
        /// the addresses that have sockets by their text.
        var sockets: [OpaquePointer: EdgeSocket] = [:]
        var clients: [String: ClientAddress] = [:]
        /// Sockets whose request (head and body) is not complete yet: half-open ones, each holding
        /// (or waiting for) a header table.
        var waiting = WaitingSockets()
        /// The address the accept filter read for the descriptor it admitted last, so the
        /// connection it becomes need not ask the kernel again.
        var admitted: (fd: Int32, address: String)?
        /// Connections with an answer to write before the loop polls, and keep-alive connections
        /// whose transaction ended in this pass of the loop (`finishPass`).
        var answersDue: [OpaquePointer] = []
        var endedTransactions: [OpaquePointer] = []
    }
}

/// The libwebsockets protocol callback. A C function pointer cannot capture,
/// so the server is found through the context's user pointer and each
/// connection through the id kept in its per-session data.
func kassaEdgeCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons,
                       _ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
    guard let wsi, let server = contextOwner(wsi, as: EdgeServer.self) else { return lws_callback_http_dummy(wsi, reason, user, input, len) }
    return server.handle(wsi: wsi, reason: reason, user: user, input: input, len: len)
}

extension EdgeServer {
    func handle(wsi: OpaquePointer, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
                input: UnsafeMutableRawPointer?, len: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainOutbox()
            return 0

        case LWS_CALLBACK_HTTP:
            // The request deadline runs on until the body is in too (dispatch, answerNow).
            guard let user else { return -1 }
            let path = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/"
            return httpRequestStarted(wsi: wsi, user: user, path: path)

        case LWS_CALLBACK_HTTP_BODY:
            guard let conn = connection(wsi, user), conn.awaitingBody else { return 0 }
            // Past its deadline the connection goes now: lws renews its own content timeout on
            // each piece of body, which can undo the heartbeat's asynchronous kill.
            if isOverdue(wsi) { return -1 }
            // libwebsockets 4.1.6 gives a request that came in one read behind the one before it
            // (pipelined) its own request line as its body, then loops on the rest for ever. No body
            // Kassa reads starts with a method and a space: such a connection is closed unanswered,
            // as HTTP lets a server close on a pipelining client (RFC 9112 §9.3.2; it retries).
            if conn.body.isEmpty, !conn.bodyOverflow, let input, Self.startsWithMethod(conn.method, input, len) { return -1 }
            if conn.body.count + len > configuration.maxBodyBytes {
                conn.bodyOverflow = true
                conn.body = []
            } else if !conn.bodyOverflow, let input, len > 0 {
                conn.body.append(contentsOf: UnsafeRawBufferPointer(start: input, count: len))
            }
            return 0

        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            guard let conn = connection(wsi, user), conn.awaitingBody else { return 0 }
            conn.awaitingBody = false
            if conn.bodyOverflow {
                return answerNow(conn, .problem(.payloadTooLarge(limit: configuration.maxBodyBytes)))
            }
            return dispatch(conn)

        case LWS_CALLBACK_HTTP_WRITEABLE:
            guard let conn = connection(wsi, user), let response = conn.pendingResponse else { return 0 }
            conn.pendingResponse = nil
            conn.body = []
            return answer(wsi: wsi, response)

        case LWS_CALLBACK_CLOSED_HTTP:
            if let user { forget(wsi, user) }
            return 0

        case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
            // lws frees and renews the per-connection data after each keep-alive transaction
            // (without CLOSED_HTTP): the transaction's state goes with it.
            if let conn = connection(wsi, user), conn.kind == .http { forget(wsi, user!) }
            return 0

        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            // A new connection, before libwebsockets gives it anything: `input` is its descriptor.
            return admits(descriptor: Int32(truncatingIfNeeded: Int(bitPattern: input))) ? 0 : 1

        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            requestDone(wsi)
            guard let user else { return 1 }
            return webSocketFilter(wsi: wsi, user: user)

        case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
            // The request (head and body) must be complete within the request timeout however
            // slowly it trickles in (libwebsockets re-arms its own timeout as bytes arrive: slowloris).
            connectionOpened(wsi)
            return 0

        case LWS_CALLBACK_WSI_DESTROY:
            // The last word on a connection (its data is still there): nothing outlives it. Its
            // transaction or WebSocket goes first, while its socket still leads to it.
            if let conn = connection(wsi, user) {
                // An established WebSocket (its upgrade consumed) that lws never reported closed is closed here.
                if conn.kind == .webSocket, conn.upgrade == nil {
                    _ = handle(wsi: wsi, reason: LWS_CALLBACK_CLOSED, user: user, input: nil, len: 0)
                } else {
                    forget(wsi, user!)
                }
            }
            connectionClosed(wsi)
            return 0

        case LWS_CALLBACK_ESTABLISHED:
            guard let conn = connection(wsi, user), let upgrade = conn.upgrade else { return -1 }
            openWebSocketCount.add(1, ordering: .relaxed)
            conn.heartbeat.heard(atMs: Self.monotonicMs())
            // The upgrade's headers are not needed once the handler has seen them.
            conn.upgrade = nil
            handler.webSocketOpened(upgrade)
            return 0

        case LWS_CALLBACK_RECEIVE:
            guard let conn = connection(wsi, user) else { return -1 }
            conn.heartbeat.heard(atMs: Self.monotonicMs())
            return webSocketReceive(conn, input: input, len: len)

        case LWS_CALLBACK_RECEIVE_PONG:
            connection(wsi, user)?.heartbeat.heard(atMs: Self.monotonicMs())
            return 0

        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let conn = connection(wsi, user) else { return -1 }
            return webSocketWriteable(conn)

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            if let conn = connection(wsi, user), let input, len >= 2 {
                let bytes = input.assumingMemoryBound(to: UInt8.self)
                conn.closeCode = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
            }
            return 0

        case LWS_CALLBACK_CLOSED:
            if let conn = connection(wsi, user), conn.kind == .webSocket {
                openWebSocketCount.subtract(1, ordering: .relaxed)
                forget(wsi, user!)
                handler.webSocketClosed(conn.id, code: conn.closeCode ?? conn.outbox.pendingClose?.code)
                finishShutdownIfIdle()
            }
            return 0

        default:
            return lws_callback_http_dummy(wsi, reason, user, input, len)
        }
    }

    // MARK: Connections by id

    /// The transaction or WebSocket whose id `user` (the per-session data) holds: the one its
    /// socket holds, else the one listed by id.
    private func connection(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer?) -> EdgeConnection? {
        guard let user else { return nil }
        let id = user.load(as: UInt64.self)
        guard id != 0 else { return nil }
        if let held = socket(wsi)?.connection, held.id == id { return held }
        return confined.connections[id]
    }

    /// Its socket holds the connection; it is listed by id (`publish`) only once something off
    /// the service thread may name it: a task's answer, a WebSocket's frames. A request answered
    /// in its own callback, as most are, is never listed.
    private func register(wsi: OpaquePointer, user: UnsafeMutableRawPointer, kind: EdgeConnection.Kind) -> EdgeConnection {
        if let existing = connection(wsi, user) {
            existing.kind = kind
            if kind == .webSocket { publish(existing) }
            return existing
        }
        let id = confined.nextID
        confined.nextID += 1
        user.storeBytes(of: id, as: UInt64.self)
        let conn = EdgeConnection(id: id, wsi: wsi, kind: kind, outbox: OutboundQueue(maxBytes: configuration.maxOutboundBytes),
                                  heartbeat: Heartbeat(pingAfterSeconds: configuration.pingIntervalSeconds,
                                                       hangUpAfterSeconds: configuration.idleTimeoutSeconds))
        let socket = socket(wsi)
        socket?.connection = conn
        if kind == .webSocket || socket == nil { publish(conn) }
        trackedConnectionCount.add(1, ordering: .relaxed)
        return conn
    }

    /// Lists the connection by its id, for the commands that name it (`drainOutbox`) and the heartbeat.
    private func publish(_ conn: EdgeConnection) {
        guard !conn.published else { return }
        conn.published = true
        confined.connections[conn.id] = conn
    }

    private func forget(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer) {
        let id = user.load(as: UInt64.self)
        guard id != 0 else { return }
        user.storeBytes(of: UInt64(0), as: UInt64.self)
        var known = confined.connections.removeValue(forKey: id) != nil
        if let socket = socket(wsi), socket.connection?.id == id {
            socket.connection = nil
            known = true
        }
        if known { trackedConnectionCount.subtract(1, ordering: .relaxed) }
    }

    // MARK: HTTP

    private func httpRequestStarted(wsi: OpaquePointer, user: UnsafeMutableRawPointer, path: String) -> Int32 {
        let conn = register(wsi: wsi, user: user, kind: .http)
        conn.body = []
        conn.bodyOverflow = false
        conn.pendingResponse = nil
        conn.path = path
        conn.query = Self.queryArguments(wsi)
        conn.headers = readHeaders(wsi)
        guard let method = Self.method(wsi) else {
            return answerNow(conn, .problem(.methodNotAllowed("method not supported"), headers: [("allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")]))
        }
        conn.method = method

        if confined.draining {
            var response = HTTPResponse.problem(.serviceUnavailable("the server is shutting down"))
            response.closeConnection = true
            return answerNow(conn, response)
        }

        // Headers that must come once: two lengths, hosts or credentials are ambiguous (and
        // the way requests are smuggled past a proxy that reads the other one).
        if let repeated = Self.repeatedSingleHeader(wsi) {
            var response = HTTPResponse.problem(repeated)
            response.closeConnection = true
            return answerNow(conn, response)
        }
        var contentLength = 0
        if let raw = conn.headers["content-length"] {
            guard let length = Self.contentLength(raw) else {
                var response = HTTPResponse.problem(.badRequest("Content-Length must be a whole number of bytes", parameter: "Content-Length"))
                response.closeConnection = true
                return answerNow(conn, response)
            }
            contentLength = length
        }
        let chunked = conn.headers["transfer-encoding"]?.lowercased().contains("chunked") ?? false
        if chunked {
            // Bodies must say their length, so the limit is checked before reading.
            var response = HTTPResponse.problem(.kassa("length-required", "Length Required", 411,
                                                       detail: "send the request body with a Content-Length header"))
            response.closeConnection = true
            return answerNow(conn, response)
        }
        if contentLength > configuration.maxBodyBytes {
            // The body is not read: answer and close, so it is not taken for the next request.
            var response = HTTPResponse.problem(.payloadTooLarge(limit: configuration.maxBodyBytes))
            response.closeConnection = true
            return answerNow(conn, response)
        }
        if contentLength > 0 {
            conn.awaitingBody = true
            conn.body.reserveCapacity(min(contentLength, configuration.maxBodyBytes))
            return 0
        }
        return dispatch(conn)
    }

    /// Hands a whole request to the handler: answered now when it can (see `answerNow`), else by a task.
    private func dispatch(_ conn: EdgeConnection) -> Int32 {
        let request = HTTPRequest(connectionID: conn.id, method: conn.method, path: conn.path, query: conn.query,
                                  headers: conn.headers, body: conn.body, remoteAddress: remoteAddress(conn.wsi))
        conn.body = []
        if let answer = handler.respondNow(to: request) { return answerNow(conn, answer) }
        publish(conn)
        requestDone(conn.wsi)
        confined.httpInFlight += 1
        let handler = self.handler
        let id = conn.id
        Task { [self] in
            let response = await handler.respond(to: request)
            post(.response(id, response))
        }
        return 0
    }

    /// Answers from the connection's own callback, on the service thread: the callback's result.
    /// An answer that keeps the connection is written at the end of the loop's pass (`finishPass`),
    /// once the pass has read every request that was ready. One that closes or drops the
    /// connection, or follows an answer the socket has not all taken yet, waits for the socket's
    /// writeable callback, so the close follows the whole answer.
    private func answerNow(_ conn: EdgeConnection, _ response: HTTPResponse) -> Int32 {
        requestDone(conn.wsi)
        conn.awaitingBody = false
        answerLater(conn, response)
        return 0
    }

    /// Holds an answer for the connection: written at the end of the pass when it keeps the
    /// connection (no `epoll_ctl`, no wake-up for a writeable socket), else in its writeable callback.
    private func answerLater(_ conn: EdgeConnection, _ response: HTTPResponse) {
        conn.pendingResponse = response
        if !response.closeConnection, !response.abortConnection, lws_partial_buffered(conn.wsi) == 0 {
            confined.answersDue.append(conn.wsi)
            // libwebsockets armed a timeout for the request it handed over, in its one sorted list;
            // the answer goes before the loop polls, so the entry is taken out (O(1)) rather than
            // left to lengthen every insertion while a pass's answers wait.
            lws_set_timeout(conn.wsi, NO_PENDING_TIMEOUT, 0)
        } else {
            lws_callback_on_writable(conn.wsi)
        }
    }

    /// Writes an answer and ends its transaction: -1 when the connection goes.
    private func answer(wsi: OpaquePointer, _ response: HTTPResponse) -> Int32 {
        if response.abortConnection { return -1 }
        if !writeHTTP(wsi: wsi, response) || response.closeConnection { return -1 }
        if lws_http_transaction_completed(wsi) != 0 { return -1 }
        if lws_partial_buffered(wsi) == 0 { confined.endedTransactions.append(wsi) }
        // Kept alive: the next request's head has the same deadline, which the heartbeat enforces.
        // libwebsockets has just armed its own keep-alive timeout for the same span, in the one
        // sorted list that holds every connection's timeout: each insertion walks it, so with
        // those of idle connections in it a request cost O(idle connections). Taken out (O(1)),
        // the list holds only requests under way.
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
        requestPending(wsi)
        return 0
    }

    /// Before the loop polls. First the answers held in this pass (`answerLater`) are written,
    /// together: a client reading many of them (a proxy, a load balancer's pool) is woken once for
    /// the lot rather than once an answer, the costliest part of a `send` on loopback. Then the
    /// writeable pass libwebsockets asks for at the end of each keep-alive transaction
    /// (`lws_http_transaction_completed` arms POLLOUT) is served. It only disarms POLLOUT again
    /// (no header is parsed yet, so no callback runs), and made here, before libev hands the pass's
    /// changes to epoll, it costs no `epoll_ctl`: without it, each request took two, and a wake-up
    /// for the writeable socket.
    func finishPass() {
        guard let context else { return }
        takeEach(\.answersDue) { wsi in
            // Still waiting (a connection closed in between is forgotten).
            guard let conn = connection(wsi, lws_wsi_user(wsi)), let response = conn.pendingResponse else { return }
            conn.pendingResponse = nil
            // A connection that must go (the client asked to close it, or the write failed) is
            // closed here and now, as libwebsockets allows outside the connection's callbacks.
            if answer(wsi: wsi, response) != 0 { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC) }
        }
        takeEach(\.endedTransactions) { wsi in
            // Still open (one served before it may have been closed).
            if confined.sockets[wsi] != nil { _ = kassa_lws_service_writeable(context, wsi) }
        }
    }

    /// Runs `each` on the connections in one of `confined`'s lists, taken whole: those added
    /// meanwhile wait for the next pass. The list and this trade buffers, so neither allocates.
    private func takeEach(_ list: WritableKeyPath<Confined, [OpaquePointer]>, _ each: (OpaquePointer) -> Void) {
        guard !confined[keyPath: list].isEmpty else { return }
        var taken: [OpaquePointer] = []
        swap(&taken, &confined[keyPath: list])
        for wsi in taken { each(wsi) }
        taken.removeAll(keepingCapacity: true)
        if confined[keyPath: list].isEmpty { swap(&taken, &confined[keyPath: list]) }
    }

    /// Writes the answer in one `lws_write`, so one `send` (HTTP/1.1 only: ALPN offers nothing
    /// else, and h1 writes raw). libwebsockets keeps what the socket does not take.
    private func writeHTTP(wsi: OpaquePointer, _ response: HTTPResponse, as kind: lws_write_protocol = LWS_WRITE_HTTP_FINAL) -> Bool {
        let pre = kassa_lws_pre
        if response.wireSize(reserved: pre) <= wireBuffer.count {
            let count = response.writeWire(into: wireBuffer, reserved: pre) - pre
            return lws_write(wsi, wireBuffer.baseAddress! + pre, count, kind) >= 0
        }
        var bytes = response.wireBytes(reserved: pre)
        let count = bytes.count - pre
        return bytes.withUnsafeMutableBufferPointer { lws_write(wsi, $0.baseAddress! + pre, count, kind) } >= 0
    }

    // MARK: WebSocket

    private func webSocketFilter(wsi: OpaquePointer, user: UnsafeMutableRawPointer) -> Int32 {
        let conn = register(wsi: wsi, user: user, kind: .webSocket)
        let path = Self.header(wsi, WSI_TOKEN_GET_URI) ?? "/"
        let upgrade = WebSocketUpgrade(connectionID: conn.id, path: path, query: Self.queryArguments(wsi).map { (name: $0.0, value: $0.1) },
                                       headers: readHeaders(wsi), remoteAddress: remoteAddress(wsi))
        if confined.draining {
            refuse(wsi: wsi, user: user, .problem(.serviceUnavailable("the server is shutting down")))
            return 1
        }
        if let repeated = Self.repeatedSingleHeader(wsi) {
            refuse(wsi: wsi, user: user, .problem(repeated))
            return 1
        }
        if configuration.maxWebSockets > 0, openWebSocketCount.load(ordering: .relaxed) >= configuration.maxWebSockets {
            refuse(wsi: wsi, user: user, .problem(.kassa("capacity", "Service Unavailable", 503,
                                                         detail: "this node holds its maximum of \(configuration.maxWebSockets) WebSockets"),
                                                  headers: [("retry-after", "5")]))
            return 1
        }
        if let refusal = handler.shouldAcceptWebSocket(upgrade) {
            refuse(wsi: wsi, user: user, refusal)
            return 1
        }
        conn.upgrade = upgrade
        return 0
    }

    /// Answers a refused upgrade with a whole HTTP/1.1 response (status line, length, problem
    /// body) before the connection is dropped. Written as bytes: at this stage libwebsockets
    /// would head it `HTTP/1.0`, the version it assumes before a request is routed.
    private func refuse(wsi: OpaquePointer, user: UnsafeMutableRawPointer, _ response: HTTPResponse) {
        var closing = response
        closing.closeConnection = true
        _ = writeHTTP(wsi: wsi, closing, as: LWS_WRITE_HTTP)
        forget(wsi, user)
    }

    private func webSocketReceive(_ conn: EdgeConnection, input: UnsafeMutableRawPointer?, len: Int) -> Int32 {
        let wsi = conn.wsi
        if lws_frame_is_binary(wsi) != 0 {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_UNACCEPTABLE_OPCODE, nil, 0)
            conn.closeCode = WebSocketCloseCode.unsupportedData
            return -1
        }
        if conn.message.count + len > configuration.maxFrameBytes {
            let reason = "message larger than \(configuration.maxFrameBytes) bytes"
            closeNow(conn, code: WebSocketCloseCode.messageTooBig, reason: reason)
            return -1
        }
        if let input, len > 0 {
            conn.message.append(contentsOf: UnsafeRawBufferPointer(start: input, count: len))
        }
        guard lws_is_final_fragment(wsi) != 0, lws_remaining_packet_payload(wsi) == 0 else { return 0 }
        let bytes = conn.message
        conn.message = []
        guard let text = String(validating: bytes, as: UTF8.self) else {
            closeNow(conn, code: WebSocketCloseCode.invalidPayload, reason: "invalid UTF-8")
            return -1
        }
        handler.webSocketReceived(conn.id, text: text)
        return 0
    }

    private func closeNow(_ conn: EdgeConnection, code: UInt16, reason: String) {
        var bytes = Array(reason.utf8.prefix(120))
        lws_close_reason(conn.wsi, lws_close_status(rawValue: UInt32(code)), &bytes, bytes.count)
        conn.closeCode = code
    }

    /// Carries out the queue's next step (see `OutboundQueue.nextStep`).
    private func webSocketWriteable(_ conn: EdgeConnection) -> Int32 {
        switch conn.outbox.nextStep() {
        case .ping:
            // With a payload: libwebsockets reports only pongs that carry one.
            var ping = [UInt8](repeating: 0, count: kassa_lws_pre) + Array("kassa".utf8)
            let n = ping.withUnsafeMutableBufferPointer {
                lws_write(conn.wsi, $0.baseAddress! + kassa_lws_pre, $0.count - kassa_lws_pre, LWS_WRITE_PING)
            }
            if n < 0 { return -1 }
            if conn.outbox.wantsWriteable { lws_callback_on_writable(conn.wsi) }
            return 0
        case .frames:
            return writeFrames(conn)
        case .close(let code, let reason):
            closeNow(conn, code: code, reason: reason)
            return -1
        case .nothing:
            return 0
        }
    }

    /// Writes the queued frames (several in one write when more than one waits); asks for
    /// another writeable callback when something still waits.
    private func writeFrames(_ conn: EdgeConnection) -> Int32 {
        let pre = kassa_lws_pre
        if conn.outbox.frameCount > 1 {
            // Several queued messages leave in one write (see `WebSocketFraming`).
            let items = conn.outbox.takeBatch(byteLimit: WebSocketFraming.batchLimit)
            var batch = [UInt8](repeating: 0, count: pre)
            batch.reserveCapacity(pre + items.reduce(0) { $0 + $1.frame.count - pre + 10 })
            for item in items { WebSocketFraming.appendText(item.frame[pre...], to: &batch) }
            let n = batch.withUnsafeMutableBufferPointer { buf in
                lws_write(conn.wsi, buf.baseAddress! + pre, buf.count - pre, kassa_lws_write_raw)
            }
            if n < 0 { return -1 }
            let now = ContinuousClock.now
            for case let stamp? in items.map(\.stamp) { handler.frameWritten(after: stamp.duration(to: now)) }
        } else {
            var (frame, stamp) = conn.outbox.takeFirst()
            let n = frame.withUnsafeMutableBufferPointer { buf in
                lws_write(conn.wsi, buf.baseAddress! + pre, buf.count - pre, LWS_WRITE_TEXT)
            }
            if n < 0 { return -1 }
            if let stamp { handler.frameWritten(after: stamp.duration(to: .now)) }
        }
        if conn.outbox.wantsWriteable { lws_callback_on_writable(conn.wsi) }
        return 0
    }

    // MARK: Connection caps

    /// Whether a new connection may stay: the edge is under its cap on connections, and its
    /// address under its caps on open and half-open ones. Refused ones are closed before they
    /// hold anything.
    private func admits(descriptor fd: Int32) -> Bool {
        confined.admitted = nil
        guard confined.sockets.count < connectionCap else {
            refusedConnectionCount.add(1, ordering: .relaxed)
            return false
        }
        guard let address = Self.peerAddress(fd) else { return true }
        let client = confined.clients[address]
        guard client?.open ?? 0 < configuration.maxConnectionsPerAddress, client?.halfOpen ?? 0 < configuration.maxHalfOpenPerAddress else {
            refusedConnectionCount.add(1, ordering: .relaxed)
            return false
        }
        confined.admitted = (fd, address)
        return true
    }

    /// A connection libwebsockets accepted: counted for its address, and half-open until its
    /// request is in. At the cap on half-open connections the one that has waited longest goes,
    /// so the header tables (sized above that cap) are never all held by slow senders.
    private func connectionOpened(_ wsi: OpaquePointer) {
        let fd = lws_get_socket_fd(wsi)
        let address = confined.admitted.flatMap { $0.fd == fd ? $0.address : nil } ?? Self.peer(wsi)
        confined.admitted = nil
        let client = confined.clients[address] ?? ClientAddress(address)
        client.open += 1
        confined.clients[address] = client
        let socket = EdgeSocket(wsi: wsi, client: client)
        confined.sockets[wsi] = socket
        lws_set_opaque_user_data(wsi, Unmanaged.passUnretained(socket).toOpaque())
        if confined.waiting.count >= configuration.maxHalfOpen, let oldest = confined.waiting.oldest?.wsi {
            requestDone(oldest)
            lws_set_timeout(oldest, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            evictedHalfOpenCount.add(1, ordering: .relaxed)
        }
        requestPending(wsi)
    }

    private func connectionClosed(_ wsi: OpaquePointer) {
        requestDone(wsi)
        confined.endedTransactions.removeAll { $0 == wsi }
        confined.answersDue.removeAll { $0 == wsi }
        guard let client = confined.sockets.removeValue(forKey: wsi)?.client else { return }
        lws_set_opaque_user_data(wsi, nil)
        client.open -= 1
        if client.open <= 0 { confined.clients[client.text] = nil }
    }

    /// The open socket of `wsi` (`confined.sockets` holds it), from the pointer its wsi keeps.
    private func socket(_ wsi: OpaquePointer) -> EdgeSocket? {
        lws_get_opaque_user_data(wsi).map { Unmanaged<EdgeSocket>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The client's address as recorded when the connection was accepted (no system call).
    private func remoteAddress(_ wsi: OpaquePointer) -> String { socket(wsi)?.client.text ?? Self.peer(wsi) }

    /// How long a request (head and body) may take to arrive.
    private var requestDeadlineMs: Int64 { Int64(configuration.requestTimeoutSeconds) * 1000 }

    /// The request on `wsi` has had its whole timeout and is not in yet.
    private func isOverdue(_ wsi: OpaquePointer) -> Bool {
        guard let since = socket(wsi)?.waitingSinceMs else { return false }
        return Self.monotonicMs() - since >= requestDeadlineMs
    }

    /// The connection waits for a request (head and body), from now.
    private func requestPending(_ wsi: OpaquePointer) {
        guard let socket = socket(wsi), socket.waitingSinceMs == nil else { return }
        socket.waitingSinceMs = Self.monotonicMs()
        socket.client.halfOpen += 1
        confined.waiting.append(socket)
    }

    /// Its request is in (or it is gone).
    private func requestDone(_ wsi: OpaquePointer) {
        guard let socket = socket(wsi), socket.waitingSinceMs != nil else { return }
        socket.waitingSinceMs = nil
        socket.client.halfOpen -= 1
        confined.waiting.remove(socket)
    }

    /// The client address of an accepted descriptor, as `lws_get_peer_simple` writes it.
    static func peerAddress(_ fd: Int32) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard got == 0, storage.ss_family == sa_family_t(AF_INET) else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        let text = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address -> UnsafePointer<CChar>? in
                var inAddress = address.pointee.sin_addr
                return inet_ntop(AF_INET, &inAddress, &buffer, socklen_t(buffer.count))
            }
        }
        return text.map { String(cString: $0) }
    }

    // MARK: Outbox

    /// The service thread's clock for deadlines counted in seconds (requests, heartbeats). It is
    /// read on every request and every message, so it is the kernel's coarse clock (its last tick,
    /// a few ms old), which costs a load rather than a read of the time source.
    static func monotonicMs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Once a second (the loop wakes every 100 ms): pings WebSockets silent for the ping
    /// interval and drops those silent for the idle timeout. One pass over the connections
    /// a second, instead of libwebsockets' per-connection timers, whose sorted list costs
    /// O(connections) on every frame.
    private func heartbeat() {
        let now = Self.monotonicMs()
        guard now - confined.lastHeartbeatMs >= 1_000 else { return }
        confined.lastHeartbeatMs = now
        let requestDeadline = requestDeadlineMs
        // An overdue request's socket keeps waiting, and is asked to go again each second, until it
        // closes (`connectionClosed` drops it): one asynchronous kill can be undone.
        confined.waiting.forEachOldest { socket in
            guard let since = socket.waitingSinceMs, now - since >= requestDeadline else { return false }
            lws_set_timeout(socket.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            return true
        }
        for conn in confined.connections.values where conn.kind == .webSocket {
            switch conn.heartbeat.check(nowMs: now) {
            case .hangUp:
                lws_set_timeout(conn.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            case .ping:
                conn.outbox.pingDue = true
                lws_callback_on_writable(conn.wsi)
            case .wait:
                break
            }
        }
    }

    private func drainOutbox() {
        heartbeat()
        // Frames for a WebSocket with nothing else waiting to be written are written at the end
        // of this pass rather than one loop pass later, on its writeable callback: a push reaches
        // its subscribers sooner, and no poll change is made for it. lws keeps what the socket
        // does not take and sends it first, so the order holds.
        var writeNow: [UInt64: EdgeConnection] = [:]
        loop.drain { command in
            if case .send(let id, _, _) = command, let conn = confined.connections[id],
               writeNow[id] != nil || conn.hasNothingToWrite {
                apply(command, armWriteable: false)
                writeNow[id] = conn
            } else {
                apply(command)
            }
        }
        for conn in writeNow.values {
            guard conn.outbox.pendingClose == nil, conn.outbox.frameCount > 0, lws_partial_buffered(conn.wsi) == 0 else {
                lws_callback_on_writable(conn.wsi)
                continue
            }
            // A failed write leaves the socket unusable; outside its own callback the connection
            // is closed the way lws allows from anywhere on this thread.
            if writeFrames(conn) < 0 { lws_set_timeout(conn.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
        }
    }

    /// Applies one command on the service thread; `armWriteable` false: the caller writes the frame itself.
    func apply(_ command: Command, armWriteable: Bool = true) {
        switch command {
        case .response(let id, let response):
            confined.httpInFlight -= 1
            if let conn = confined.connections[id] { answerLater(conn, response) }
            finishShutdownIfIdle()
        case .send(let id, let frame, let stamp):
            guard let conn = confined.connections[id], conn.kind == .webSocket else { return }
            switch conn.outbox.enqueue(frame, stamp: stamp) {
            case .queued: if armWriteable { lws_callback_on_writable(conn.wsi) }
            case .slowConsumer: lws_callback_on_writable(conn.wsi)
            case .closing: break
            }
        case .close(let id, let code, let reason):
            guard let conn = confined.connections[id], conn.kind == .webSocket, conn.outbox.close(code: code, reason: reason) else { return }
            lws_callback_on_writable(conn.wsi)
        case .shutdown:
            confined.draining = true
            for conn in confined.connections.values where conn.kind == .webSocket {
                guard conn.outbox.close(code: WebSocketCloseCode.goingAway, reason: "server shutting down") else { continue }
                lws_callback_on_writable(conn.wsi)
            }
            finishShutdownIfIdle()
        case .forceExit:
            loop.requestExit()
        }
    }

    private func finishShutdownIfIdle() {
        guard confined.draining, confined.httpInFlight == 0, openWebSocketCount.load(ordering: .relaxed) == 0 else { return }
        // Let pending answers be written before the context goes.
        let writing = confined.connections.values.contains { $0.pendingResponse != nil }
            || confined.sockets.values.contains { $0.connection?.pendingResponse != nil }
        if !writing { loop.requestExit() }
    }

    // MARK: Reading the request

    static func method(_ wsi: OpaquePointer) -> HTTPMethod? {
        let candidates: [(lws_token_indexes, HTTPMethod)] = [
            (WSI_TOKEN_GET_URI, .GET), (WSI_TOKEN_POST_URI, .POST), (WSI_TOKEN_PUT_URI, .PUT),
            (WSI_TOKEN_PATCH_URI, .PATCH), (WSI_TOKEN_DELETE_URI, .DELETE), (WSI_TOKEN_OPTIONS_URI, .OPTIONS),
            (WSI_TOKEN_HEAD_URI, .HEAD),
        ]
        for (token, method) in candidates where lws_hdr_total_length(wsi, token) > 0 { return method }
        return nil
    }

    static let singleHeaders: [(lws_token_indexes, String)] = [
        (WSI_TOKEN_HTTP_CONTENT_LENGTH, "Content-Length"), (WSI_TOKEN_HOST, "Host"), (WSI_TOKEN_HTTP_AUTHORIZATION, "Authorization"),
        (WSI_TOKEN_HTTP_TRANSFER_ENCODING, "Transfer-Encoding"),
    ]

    /// The 400 for a request that carries one of `singleHeaders` twice, or nil.
    static func repeatedSingleHeader(_ wsi: OpaquePointer) -> Problem? {
        guard let name = singleHeaders.first(where: { lws_hdr_fragment_length(wsi, $0.0, 1) > 0 })?.1 else { return nil }
        return .badRequest("the \(name) header must appear once", parameter: name)
    }

    /// 1 to 18 ASCII digits (no sign, no list, no space): anything else is refused, not guessed at.
    public static func contentLength(_ raw: String) -> Int? {
        guard !raw.isEmpty, raw.utf8.count <= 18, raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(raw)
    }

    static func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = Int(lws_hdr_total_length(wsi, token))
        guard length > 0 else { return nil }
        return copied(capacity: length + 1) { lws_hdr_copy(wsi, $0, $1, token) }
    }

    /// Whether `len` bytes at `input` begin as a request line of `method` would ("POST ").
    static func startsWithMethod(_ method: HTTPMethod, _ input: UnsafeMutableRawPointer, _ len: Int) -> Bool {
        let line = Array(method.rawValue.utf8) + [UInt8(ascii: " ")]
        guard len > 0 else { return false }
        return UnsafeRawBufferPointer(start: input, count: min(len, line.count)).elementsEqual(line.prefix(len))
    }

    /// A string libwebsockets copies into a buffer of `capacity` bytes (its NUL included) and
    /// whose length `copy` returns (negative: it failed), read up to its first NUL. The buffer is
    /// a temporary one (on the stack at header sizes): one allocation a value, for its `String`.
    static func copied(capacity: Int, _ copy: (UnsafeMutablePointer<CChar>, Int32) -> Int32) -> String? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer -> String? in
            guard let base = buffer.baseAddress else { return nil }
            let length = copy(base, Int32(capacity))
            guard length >= 0 else { return nil }
            let count = strnlen(base, min(Int(length), capacity - 1))
            return String(decoding: UnsafeRawBufferPointer(start: base, count: count), as: UTF8.self)
        }
    }

    /// Query arguments, one lws fragment each, already percent-decoded by lws.
    static func queryArguments(_ wsi: OpaquePointer) -> [(String, String)] {
        var result: [(String, String)] = []
        var index: Int32 = 0
        while true {
            let length = Int(lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, index))
            guard length > 0 else { break }
            guard let fragment = copied(capacity: length + 1, { lws_hdr_copy_fragment(wsi, $0, $1, WSI_TOKEN_HTTP_URI_ARGS, index) }) else { break }
            index += 1
            // A bare "?" reaches us from lws as an argument "/": it is no argument.
            if fragment.isEmpty || fragment == "/" { continue }
            if let eq = fragment.firstIndex(of: "=") {
                result.append((String(fragment[..<eq]), String(fragment[fragment.index(after: eq)...])))
            } else {
                result.append((fragment, ""))
            }
        }
        return result
    }

    /// The request's header tokens worth reading: every one libwebsockets knows, less the request
    /// line's (method and URI), with its lower-case name. Built once.
    static let headerTokens: [(token: lws_token_indexes, name: String)] = {
        let requestLine: Set<UInt32> = [WSI_TOKEN_GET_URI, WSI_TOKEN_POST_URI, WSI_TOKEN_PUT_URI, WSI_TOKEN_PATCH_URI,
                                        WSI_TOKEN_DELETE_URI, WSI_TOKEN_OPTIONS_URI, WSI_TOKEN_HEAD_URI,
                                        WSI_TOKEN_HTTP_URI_ARGS, WSI_TOKEN_HTTP].reduce(into: []) { $0.insert($1.rawValue) }
        return (0..<WSI_TOKEN_COUNT.rawValue).compactMap { raw in
            let token = lws_token_indexes(rawValue: raw)
            guard !requestLine.contains(raw), let pointer = lws_token_to_string(token) else { return nil }
            var name = String(cString: pointer).lowercased()
            if name.hasSuffix(":") { name.removeLast() }
            return name.isEmpty || name.hasPrefix(":") ? nil : (token, name)
        }
    }()

    /// The known headers lws parsed, plus the configured custom ones.
    func readHeaders(_ wsi: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(12)   // a request seldom carries more; each growth was a copy
        // By index: most tokens are absent (`header` asks their length once and stops), and their
        // names are not touched (nor retained) for them.
        let known = Self.headerTokens
        for i in known.indices {
            guard let value = Self.header(wsi, known[i].token) else { continue }
            headers.appendLowercased(known[i].name, value)
        }
        for custom in customHeaderKeys {
            let value = custom.key.withUnsafeBufferPointer { key -> String? in
                guard let base = key.baseAddress else { return nil }
                let keyLength = Int32(key.count - 1)   // without its NUL
                let length = Int(lws_hdr_custom_length(wsi, base, keyLength))
                guard length >= 0 else { return nil }
                return Self.copied(capacity: length + 1) { lws_hdr_custom_copy(wsi, $0, $1, base, keyLength) }
            }
            if let value { headers.appendLowercased(custom.name, value) }
        }
        return headers
    }

    static func peer(_ wsi: OpaquePointer) -> String {
        copied(capacity: 64) { lws_get_peer_simple(wsi, $0, Int($1)) == nil ? -1 : $1 - 1 } ?? ""
    }
}
