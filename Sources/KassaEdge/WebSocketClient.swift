import CLibWebSockets
import Foundation
import KassaCore
import Synchronization

/// What a client connection delivers.
public enum WebSocketClientEvent: Sendable, Equatable {
    /// A text message, and when its last byte arrived (wall clock, ns since 1970):
    /// stamped on the service thread so a busy consumer does not inflate latencies.
    case text(String, receivedAtNs: UInt64)
    /// The connection ended; the close code the server sent, if any.
    case closed(UInt16?)
}

/// Why a client connection could not be made.
public struct WebSocketClientError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// No answer came within the time allowed.
    public var timedOut = false
}

/// A libwebsockets WebSocket client: one client context and one service
/// thread for any number of connections (the tests' thin client, and the
/// load generator's), and plain HTTP/1.1 requests on the same thread
/// (`request`, in WebSocketClient+HTTP). Like the server, only the service thread touches lws;
/// other threads post to an outbox and wake it with `lws_cancel_service`.
///
/// ```swift
/// let client = try WebSocketClient()
/// let ws = try await client.connect(port: 8080, path: "/v1/sessions/\(id)/stream?token=\(t)")
/// ws.send("{\"id\":\"1\",\"type\":\"ping\"}")
/// for await event in ws.events { … }
/// ```
public final class WebSocketClient: @unchecked Sendable {
    enum Command {
        case connect(WebSocketClientConnection, host: String, port: Int, path: String, headers: [(String, String)], source: String?)
        case send(UInt64, [UInt8])
        case close(UInt64)
        case abandonIfNotOpen(UInt64)
        case request(HTTPExchange)
        case stop
    }

    let loop = ServiceLoop<Command>()
    var context: OpaquePointer? { loop.context }
    private var protocols: UnsafeMutablePointer<lws_protocols>?
    private var protocolName: UnsafeMutablePointer<CChar>?
    /// The method of a raw connection (`request`'s), as libwebsockets takes it.
    private let rawMethod = strdup("RAW")
    private let stopped = DispatchSemaphore(value: 0)

    /// Service-thread confined.
    var connections: [UInt64: WebSocketClientConnection] = [:]
    /// `request`'s connections, by id, and those idle, by where they go (service-thread confined).
    var httpConnections: [UInt64: HTTPConnection] = [:]
    var idleHTTP: [HTTPEndpoint: [HTTPConnection]] = [:]
    /// Connections `request` has opened so far (the rest of its requests went on kept ones).
    let httpConnectionsOpened = Atomic<Int>(0)
    /// Masking keys for client frames (service-thread confined).
    private var masks = WebSocketFraming.MaskKeys()
    static let nextID = Atomic<UInt64>(1)

    /// `descriptors`: what the process may hold open at once, which sizes libwebsockets'
    /// descriptor table (`DescriptorTable`: it is walked on every close).
    public init(protocol name: String = "kassa.v1", descriptors: Int = EdgeConfiguration.defaultMaxConnections) throws {
        protocolName = strdup(name)
        let table = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        table.initialize(repeating: lws_protocols(), count: 2)
        table[0].name = UnsafePointer(protocolName)
        table[0].callback = kassaClientCallback
        table[0].rx_buffer_size = 16 * 1024
        protocols = table
        setLibWebSocketsLogLevel()
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(table)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.count_threads = 1
        loop.configure(&info)
        guard let context = DescriptorTable.sized(for: descriptors, { lws_create_context(&info) }).0 else {
            throw WebSocketClientError(description: "cannot create the libwebsockets client context")
        }
        loop.start(context, name: "kassa-ws-client") { [self] in
            for connection in connections.values { connection.finish(code: nil) }
            connections.removeAll()
            failAllHTTP()
            stopped.signal()
        }
    }

    deinit {
        shutdown()
        protocols?.deallocate()
        free(protocolName)
        free(rawMethod)
    }

    /// Closes every connection and stops the service thread.
    public func shutdown() {
        if loop.post(.stop) { stopped.wait() }
    }

    func post(_ command: Command) { loop.post(command) }

    /// Opens a WebSocket to `host:port` at `path` with the client's subprotocol;
    /// `sourceAddress` binds the local end (several loopback addresses give more ports).
    /// An open that takes longer than `timeout` fails (the half-open connection is dropped).
    public func connect(host: String = "127.0.0.1", port: Int, path: String, headers: [(String, String)] = [],
                        sourceAddress: String? = nil, timeout: Duration = .seconds(20)) async throws(WebSocketClientError) -> WebSocketClientConnection {
        let connection = WebSocketClientConnection(id: Self.nextID.add(1, ordering: .relaxed).oldValue, client: self)
        let watchdog = Task { [weak self] in
            try await Task.sleep(for: timeout)
            self?.post(.abandonIfNotOpen(connection.id))
        }
        defer { watchdog.cancel() }
        let opened = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            connection.opened = c
            post(.connect(connection, host: host, port: port, path: path, headers: headers, source: sourceAddress))
        }
        guard opened else { throw WebSocketClientError(description: connection.failure ?? "connection failed") }
        return connection
    }

    // MARK: Service thread

    func drain() {
        loop.drain { command in
            switch command {
            case .connect(let connection, let host, let port, let path, let headers, let source):
                connection.handshakeHeaders = headers
                connections[connection.id] = connection
                let (ok, wsi) = openConnection(id: connection.id, host: host, port: port, path: path, source: source)
                if ok, connections[connection.id] != nil { connection.pendingWsi = wsi }
                if !ok {
                    connections[connection.id] = nil
                    connection.failOpen("cannot start a connection to \(host):\(port)")
                }
            case .send(let id, let frame):
                guard let connection = connections[id], let wsi = connection.wsi else { return }
                connection.outbound.append(frame)
                lws_callback_on_writable(wsi)
            case .abandonIfNotOpen(let id):
                guard let connection = connections[id], connection.opened != nil else { return }
                connections[id] = nil
                connection.failOpen("no handshake within the connect timeout")
                connection.finish(code: nil)
                if let wsi = connection.pendingWsi { lws_set_timeout(wsi, PENDING_TIMEOUT_AWAITING_SERVER_RESPONSE, LWS_TO_KILL_ASYNC) }
            case .close(let id):
                guard let connection = connections[id], let wsi = connection.wsi else { return }
                connection.closing = true
                lws_callback_on_writable(wsi)
            case .request(let exchange):
                start(exchange)
            case .stop:
                loop.requestExit()
            }
        }
    }

    /// Starts a client connection whose callbacks carry `id`: a WebSocket to `path` with the
    /// client's subprotocol, or a raw one (for `request`) when `path` is nil. False when
    /// libwebsockets could not start it; the wsi is set once it has.
    func openConnection(id: UInt64, host: String, port: Int, path: String?, source: String?) -> (started: Bool, wsi: OpaquePointer?) {
        var wsi: OpaquePointer?
        let sourceC = source.map { strdup($0) } ?? nil
        let pathC = path.map { strdup($0) } ?? nil
        defer { free(sourceC); free(pathC) }
        let ok = host.withCString { h in
            withUnsafeMutablePointer(to: &wsi) { pwsi -> Bool in
                var info = lws_client_connect_info()
                info.context = context
                info.address = h
                info.host = h
                info.port = Int32(port)
                if let pathC {
                    info.origin = h
                    info.path = UnsafePointer(pathC)
                    info.protocol = UnsafePointer(protocolName)
                } else {
                    info.method = UnsafePointer(rawMethod)
                }
                info.local_protocol_name = UnsafePointer(protocolName)
                info.userdata = UnsafeMutableRawPointer(bitPattern: UInt(id))
                info.pwsi = pwsi
                info.iface = UnsafePointer(sourceC)
                return lws_client_connect_via_info(&info) != nil
            }
        }
        return (ok, wsi)
    }

    static func wallClockNs() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    func handle(wsi: OpaquePointer, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
                input: UnsafeMutableRawPointer?, len: Int) -> Int32 {
        if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED {
            drain()
            return 0
        }
        let id = UInt64(UInt(bitPattern: user))
        guard id != 0, let connection = connections[id] else {
            if id != 0, let answer = handleHTTP(wsi: wsi, reason: reason, id: id, input: input, len: len) { return answer }
            // A connection given up on (connect timeout) that got somewhere after all: drop it.
            if id != 0, reason == LWS_CALLBACK_CLIENT_ESTABLISHED { return -1 }
            return lws_callback_http_dummy(wsi, reason, user, input, len)
        }
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let input else { return 0 }
            let p = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
            guard let start = p.pointee else { return 0 }
            let end = start + len
            for (name, value) in connection.handshakeHeaders {
                if lws_add_http_header_by_name(wsi, name.lowercased() + ":", value, Int32(value.utf8.count), p, end) != 0 { return -1 }
            }
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            connection.markOpened(at: Self.wallClockNs())
            connection.wsi = wsi
            connection.pendingWsi = nil
            connection.resolveOpen(true)
            return 0
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            connection.pendingWsi = nil
            let why = input.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: len).prefix(while: { $0 != 0 }), as: UTF8.self) }
            connections[id] = nil
            connection.failOpen(why ?? "connection error")
            connection.finish(code: nil)
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            if let input, len > 0 { connection.message.append(contentsOf: UnsafeRawBufferPointer(start: input, count: len)) }
            if lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0 {
                connection.deliver(.text(String(decoding: connection.message, as: UTF8.self), receivedAtNs: Self.wallClockNs()))
                connection.message = []
            }
            return 0
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            if !connection.outbound.isEmpty {
                // Kassa frames and masks the queued messages itself (see `WebSocketFraming`),
                // as many as fit in one write, each with its own mask.
                let pre = kassa_lws_pre
                var frame = [UInt8](repeating: 0, count: pre)
                var taken = 0
                while taken < connection.outbound.count, frame.count - pre < WebSocketFraming.batchLimit {
                    WebSocketFraming.appendText(connection.outbound[taken][pre...], to: &frame, mask: masks.next())
                    taken += 1
                }
                connection.outbound.removeSubrange(0..<taken)
                let n = frame.withUnsafeMutableBufferPointer { lws_write(wsi, $0.baseAddress! + pre, $0.count - pre, kassa_lws_write_raw) }
                if n < 0 { return -1 }
                if !connection.outbound.isEmpty || connection.closing { lws_callback_on_writable(wsi) }
                return 0
            }
            if connection.closing {
                lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, nil, 0)
                return -1
            }
            return 0
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            if let input, len >= 2 {
                let b = input.assumingMemoryBound(to: UInt8.self)
                connection.closeCode = UInt16(b[0]) << 8 | UInt16(b[1])
            }
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            // Freed without a close callback (it never opened): nothing may point at it any more.
            connections[id] = nil
            connection.pendingWsi = nil
            connection.wsi = nil
            connection.failOpen("connection dropped")
            connection.finish(code: connection.closeCode)
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED:
            connections[id] = nil
            connection.wsi = nil
            connection.finish(code: connection.closeCode)
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, len)
        }
    }
}

/// One client WebSocket. `events` yields each text message, then `.closed`.
public final class WebSocketClientConnection: @unchecked Sendable {
    public let id: UInt64
    public let events = WebSocketClientEvents()
    private weak var client: WebSocketClient?
    /// Wall-clock nanoseconds when the stream opened (set before `connect` returns): anything
    /// made before it reached this connection as a replay, not live.
    public private(set) var openedAtNs: UInt64 = 0

    // Service-thread confined.
    var wsi: OpaquePointer?
    /// The connection's wsi while it is being opened (for the connect timeout).
    var pendingWsi: OpaquePointer?
    var opened: CheckedContinuation<Bool, Never>?
    var failure: String?
    var handshakeHeaders: [(String, String)] = []
    var message: [UInt8] = []
    var outbound: [[UInt8]] = []
    var closing = false
    var closeCode: UInt16?

    init(id: UInt64, client: WebSocketClient) {
        self.id = id
        self.client = client
    }

    public func send(_ text: String) {
        var frame = [UInt8](repeating: 0, count: kassa_lws_pre)
        frame.append(contentsOf: text.utf8)
        client?.post(.send(id, frame))
    }

    public func send(_ json: JSONValue) { send(json.text) }

    /// Closes with 1000 after what is queued.
    public func close() { client?.post(.close(id)) }

    func markOpened(at ns: UInt64) { openedAtNs = ns }

    func resolveOpen(_ ok: Bool) {
        opened?.resume(returning: ok)
        opened = nil
    }

    func failOpen(_ why: String) {
        failure = why
        resolveOpen(false)
    }

    func deliver(_ event: WebSocketClientEvent) { events.yield(event) }

    func finish(code: UInt16?) {
        resolveOpen(false)
        // Once finished, the mailbox takes nothing more: a second call adds no second `.closed`.
        events.yield(.closed(code))
        events.finish()
    }
}

func kassaClientCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons,
                         _ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
    guard let wsi, let client = contextOwner(wsi, as: WebSocketClient.self) else { return lws_callback_http_dummy(wsi, reason, user, input, len) }
    return client.handle(wsi: wsi, reason: reason, user: user, input: input, len: len)
}
