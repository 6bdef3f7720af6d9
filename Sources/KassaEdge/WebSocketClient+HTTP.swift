import CLibWebSockets
import Foundation
import KassaCore

/// An HTTP/1.1 answer the client read.
public struct HTTPClientResponse: Sendable, Equatable {
    public let status: Int
    public let body: [UInt8]
}

/// Plain HTTP/1.1 requests on the WebSocket client's own thread and context: the load client's
/// `POST /v1/sessions` and its attempts over HTTP. Each request is one write on a kept
/// connection (raw sockets under libwebsockets, so the request and answer are Kassa's own bytes),
/// and the answer is read by its `Content-Length`; no second thread, no second event loop.
extension WebSocketClient {
    /// Where a kept connection goes: an idle one is reused only for the same place.
    struct HTTPEndpoint: Hashable {
        let host: String
        let port: Int
        let source: String?
    }

    /// One request, from its post to its answer.
    final class HTTPExchange: @unchecked Sendable {
        let endpoint: HTTPEndpoint
        /// The request as written, after `LWS_PRE` bytes of room (written in place: `var`).
        var message: [UInt8]
        /// When the whole answer must be in.
        let deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<Result<HTTPClientResponse, WebSocketClientError>, Never>?
        /// Sent once more on a new connection when a kept one turns out closed before any answer.
        var retried = false

        init(endpoint: HTTPEndpoint, message: [UInt8], deadline: ContinuousClock.Instant) {
            self.endpoint = endpoint
            self.message = message
            self.deadline = deadline
        }

        /// The time left, in whole seconds (libwebsockets' timeouts), at least one.
        func secondsLeft(now: ContinuousClock.Instant) -> Int32 {
            Int32(clamping: max(Int64((now.duration(to: deadline).inSeconds).rounded(.up)), 1))
        }

        func resolve(_ result: Result<HTTPClientResponse, WebSocketClientError>) {
            continuation?.resume(returning: result)
            continuation = nil
        }
    }

    /// A raw connection carrying requests one after another. Service-thread confined.
    final class HTTPConnection {
        let id: UInt64
        let endpoint: HTTPEndpoint
        var wsi: OpaquePointer?
        var exchange: HTTPExchange?
        var written = false
        var received: [UInt8] = []
        /// Requests answered on it so far: a reused connection may have been closed by the
        /// server while idle, which a new one cannot have been.
        var answered = 0
        var idleSince = ContinuousClock.now

        init(id: UInt64, endpoint: HTTPEndpoint) {
            self.id = id
            self.endpoint = endpoint
        }
    }

    /// An idle connection is not reused after this long: the server's keep-alive (Kassa's
    /// request timeout, 10 s by default) may be about to close it.
    static let httpIdleReuse = Duration.seconds(4)

    /// Sends `method path` with `headers` and `body` to `host:port` and reads the answer; fails
    /// when no whole answer came within `timeout` (to the second), or the connection failed.
    /// `Host` and `Content-Length` are written here.
    public func request(_ method: String, host: String = "127.0.0.1", port: Int, path: String,
                        headers: [(String, String)] = [], body: [UInt8] = [], sourceAddress: String? = nil,
                        timeout: Duration = .seconds(20)) async throws(WebSocketClientError) -> HTTPClientResponse {
        var message = [UInt8](repeating: 0, count: Int(kassa_lws_pre))
        message.reserveCapacity(Int(kassa_lws_pre) + 256 + body.count)
        message.append(contentsOf: "\(method) \(path) HTTP/1.1\r\nHost: \(URLAuthority.of(host: host, port: port))\r\nContent-Length: \(body.count)\r\n".utf8)
        for (name, value) in headers { message.append(contentsOf: "\(name): \(value)\r\n".utf8) }
        message.append(contentsOf: "\r\n".utf8)
        message.append(contentsOf: body)
        let exchange = HTTPExchange(endpoint: HTTPEndpoint(host: host, port: port, source: sourceAddress), message: message,
                                    deadline: .now + timeout)
        let result = await withCheckedContinuation { c in
            exchange.continuation = c
            if !loop.post(.request(exchange)) { exchange.resolve(.failure(WebSocketClientError(description: "the client has stopped"))) }
        }
        return try result.get()
    }

    // MARK: Service thread

    /// Puts `exchange` on an idle kept connection to its endpoint, or on a new one.
    func start(_ exchange: HTTPExchange) {
        let now = ContinuousClock.now
        while let connection = idleHTTP[exchange.endpoint]?.popLast() {
            guard let wsi = connection.wsi, connection.idleSince.duration(to: now) < Self.httpIdleReuse else {
                if let wsi = connection.wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
                continue
            }
            connection.exchange = exchange
            connection.written = false
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, exchange.secondsLeft(now: now))
            lws_callback_on_writable(wsi)
            return
        }
        let connection = HTTPConnection(id: Self.nextID.add(1, ordering: .relaxed).oldValue, endpoint: exchange.endpoint)
        connection.exchange = exchange
        httpConnections[connection.id] = connection
        httpConnectionsOpened.add(1, ordering: .relaxed)
        let (ok, wsi) = openConnection(id: connection.id, host: exchange.endpoint.host, port: exchange.endpoint.port,
                                       path: nil, source: exchange.endpoint.source)
        if ok, let wsi, httpConnections[connection.id] != nil {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, exchange.secondsLeft(now: now))
        } else if !ok {
            httpConnections[connection.id] = nil
            exchange.resolve(.failure(WebSocketClientError(description: "cannot start a connection to \(exchange.endpoint.host):\(exchange.endpoint.port)")))
        }
    }

    /// The raw connections' callbacks; nil for any other reason or connection.
    func handleHTTP(wsi: OpaquePointer, reason: lws_callback_reasons, id: UInt64,
                    input: UnsafeMutableRawPointer?, len: Int) -> Int32? {
        guard let connection = httpConnections[id] else {
            // Given up on while connecting: drop it.
            return reason == LWS_CALLBACK_RAW_CONNECTED ? -1 : nil
        }
        switch reason {
        case LWS_CALLBACK_RAW_CONNECTED:
            connection.wsi = wsi
            // Connecting ran on libwebsockets' own timeout; the request's applies again from here.
            if let exchange = connection.exchange { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, exchange.secondsLeft(now: .now)) }
            lws_callback_on_writable(wsi)
            return 0
        case LWS_CALLBACK_RAW_WRITEABLE:
            guard let exchange = connection.exchange, !connection.written else { return 0 }
            connection.written = true
            let pre = Int(kassa_lws_pre)
            let n = exchange.message.withUnsafeMutableBufferPointer { lws_write(wsi, $0.baseAddress! + pre, $0.count - pre, kassa_lws_write_raw) }
            return n < 0 ? -1 : 0
        case LWS_CALLBACK_RAW_RX:
            guard connection.exchange != nil, let input, len > 0 else { return connection.exchange == nil ? -1 : 0 }   // bytes nobody asked for
            connection.received.append(contentsOf: UnsafeRawBufferPointer(start: input, count: len))
            switch HTTPResponseReader.read(connection.received, atClose: false) {
            case .incomplete:
                return 0
            case .malformed(let why):
                finishExchange(connection, .failure(WebSocketClientError(description: why)))
                return -1
            case .complete(let response, let keepAlive):
                finishExchange(connection, .success(response))
                guard keepAlive else { return -1 }
                connection.answered += 1
                connection.idleSince = .now
                lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
                idleHTTP[connection.endpoint, default: []].append(connection)
                return 0
            }
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let why = input.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: len).prefix(while: { $0 != 0 }), as: UTF8.self) }
            dropHTTP(connection, why: why ?? "connection error")
            return 0
        case LWS_CALLBACK_RAW_CLOSE, LWS_CALLBACK_WSI_DESTROY:
            dropHTTP(connection, why: "the connection closed before the whole answer")
            return 0
        default:
            return nil
        }
    }

    /// A connection ended: forget it, and end its request. An answer that runs to the close is
    /// whole now; a request that got no byte back on a reused connection goes once more on a
    /// new one (the server may have closed it while idle, before reading the request).
    private func dropHTTP(_ connection: HTTPConnection, why: String) {
        httpConnections[connection.id] = nil
        connection.wsi = nil
        if let idle = idleHTTP[connection.endpoint], let k = idle.firstIndex(where: { $0 === connection }) {
            idleHTTP[connection.endpoint]!.remove(at: k)
        }
        guard let exchange = connection.exchange else { return }
        connection.exchange = nil
        let now = ContinuousClock.now
        if connection.received.isEmpty, connection.answered > 0, !exchange.retried, now < exchange.deadline {
            exchange.retried = true
            start(exchange)
            return
        }
        if case .complete(let response, _) = HTTPResponseReader.read(connection.received, atClose: true) {
            exchange.resolve(.success(response))
        } else if now >= exchange.deadline {
            exchange.resolve(.failure(WebSocketClientError(description: "no answer within the timeout", timedOut: true)))
        } else {
            exchange.resolve(.failure(WebSocketClientError(description: why)))
        }
    }

    private func finishExchange(_ connection: HTTPConnection, _ result: Result<HTTPClientResponse, WebSocketClientError>) {
        connection.exchange?.resolve(result)
        connection.exchange = nil
        connection.received.removeAll(keepingCapacity: true)
    }

    /// Fails every request still waiting (the client is stopping).
    func failAllHTTP() {
        for connection in httpConnections.values {
            connection.exchange?.resolve(.failure(WebSocketClientError(description: "the client has stopped")))
        }
        httpConnections.removeAll()
        idleHTTP.removeAll()
    }
}

/// Reads an HTTP/1.1 answer from the bytes received so far: its status, and its body by
/// `Content-Length` (or up to the close, without one). Chunked bodies are refused: Kassa's
/// edge always sends a length. Not for answers to HEAD (the client sends none).
package enum HTTPResponseReader {
    package enum Outcome: Equatable {
        case incomplete
        case complete(HTTPClientResponse, keepAlive: Bool)
        case malformed(String)
    }

    package static func read(_ b: [UInt8], atClose: Bool) -> Outcome {
        guard let headEnd = ByteSearch.firstIndex(of: [0x0D, 0x0A, 0x0D, 0x0A], in: b) else {
            return atClose ? .malformed("the connection closed inside the answer's head") : b.count > 64 * 1024 ? .malformed("an answer head over 64 KiB") : .incomplete
        }
        // "HTTP/1.x NNN", a status from 100 to 599 (RFC 9110 §15)
        guard headEnd >= 12, b[0..<7].elementsEqual("HTTP/1.".utf8), b[8] == 0x20,
              (0x31...0x35).contains(b[9]), (0x30...0x39).contains(b[10]), (0x30...0x39).contains(b[11]) else {
            return .malformed("not an HTTP/1 status line")
        }
        let status = Int(b[9] - 0x30) * 100 + Int(b[10] - 0x30) * 10 + Int(b[11] - 0x30)
        var length: Int?
        var keepAlive = b[7] == UInt8(ascii: "1")   // HTTP/1.1 keeps the connection unless it says otherwise
        var line = (ByteSearch.firstIndex(of: [0x0D, 0x0A], in: b) ?? headEnd) + 2
        while line < headEnd {
            let end = ByteSearch.firstIndex(of: [0x0D, 0x0A], in: b, from: line) ?? headEnd
            if let colon = b[line..<end].firstIndex(of: UInt8(ascii: ":")) {
                // Decoded only for the headers read here, not for every one.
                func value() -> Substring { Substring(String(decoding: b[(colon + 1)..<end], as: UTF8.self)).trimmingHTTPSpace() }
                if named(b[line..<colon], "content-length") {
                    // Digits only, as the edge reads a request's length.
                    guard let n = EdgeServer.contentLength(String(value())), n <= 64 << 20 else {
                        return .malformed("a Content-Length that is not a length")
                    }
                    length = n
                } else if named(b[line..<colon], "transfer-encoding") {
                    return .malformed("a chunked answer (not read here)")
                } else if named(b[line..<colon], "connection") {
                    let v = value().lowercased()
                    if v.contains("close") { keepAlive = false } else if v.contains("keep-alive") { keepAlive = true }
                }
            }
            line = end + 2
        }
        let bodyStart = headEnd + 4
        if status / 100 == 1 || status == 204 || status == 304 { length = 0 }
        guard let length else {
            // No length: the body runs to the close.
            return atClose ? .complete(HTTPClientResponse(status: status, body: Array(b[bodyStart...])), keepAlive: false) : .incomplete
        }
        guard b.count - bodyStart >= length else {
            return atClose ? .malformed("the connection closed inside the answer's body") : .incomplete
        }
        guard b.count - bodyStart == length else { return .malformed("bytes after the answer") }
        return .complete(HTTPClientResponse(status: status, body: Array(b[bodyStart..<(bodyStart + length)])), keepAlive: keepAlive)
    }

    private static func named(_ name: ArraySlice<UInt8>, _ lower: StaticString) -> Bool {
        guard name.count == lower.utf8CodeUnitCount else { return false }
        var k = 0
        for c in name {
            if (c >= 0x41 && c <= 0x5A ? c | 0x20 : c) != lower.utf8Start[k] { return false }
            k += 1
        }
        return true
    }
}
