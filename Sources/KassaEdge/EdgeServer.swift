import CLibWebSockets
import Foundation
import KassaCore
import Synchronization

/// Why the edge could not start.
public struct EdgeStartError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// The HTTP/1.1 + WebSocket server: one libwebsockets context serviced by one
/// thread of its own.
///
/// Threading: everything in `EdgeServer.Confined` is touched only by the
/// service thread (`ServiceLoop`); other threads post commands to it.
///
/// ```swift
/// let edge = EdgeServer(configuration: .init(port: 0), handler: gateway)
/// try edge.start()
/// print(edge.port)
/// await edge.stop()
/// ```
public final class EdgeServer: @unchecked Sendable {
    public let configuration: EdgeConfiguration
    let handler: EdgeHandler
    /// Each custom header's name as requests carry it, and as libwebsockets looks it up ("name:", lower-case,
    /// a C string made once).
    let customHeaderKeys: [(name: String, key: ContiguousArray<CChar>)]

    enum Command {
        case response(UInt64, HTTPResponse)
        case send(UInt64, [UInt8], ContinuousClock.Instant?)
        case close(UInt64, UInt16, String)
        case shutdown
        case forceExit
    }

    let loop = ServiceLoop<Command>()
    let openWebSocketCount = Atomic<Int>(0)
    /// Connections closed at once for their address's caps, and half-open ones closed to make room.
    let refusedConnectionCount = Atomic<Int>(0)
    let evictedHalfOpenCount = Atomic<Int>(0)
    public var refusedConnections: Int { refusedConnectionCount.load(ordering: .relaxed) }
    public var evictedHalfOpenConnections: Int { evictedHalfOpenCount.load(ordering: .relaxed) }
    let trackedConnectionCount = Atomic<Int>(0)
    private let stopped = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// lws-thread confined state.
    var confined = Confined()
    var context: OpaquePointer? { loop.context }
    public private(set) var port: Int = 0
    /// Connections open at once at most: `maxConnections`, or fewer when the hard file limit
    /// cannot hold that many (set by `start`).
    public private(set) var connectionCap: Int

    // C-owned memory that must outlive the context.
    private var protocols: UnsafeMutablePointer<lws_protocols>?
    private var protocolName: UnsafeMutablePointer<CChar>?
    private var retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>?
    private var tlsPaths: (UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<CChar>?)?
    private var alpn: UnsafeMutablePointer<CChar>?
    /// Where the edge thread writes each HTTP answer that fits before `lws_write` (which keeps a
    /// copy of what the socket does not take): one buffer for all of them, not an array an answer.
    /// Memory, not a property the callbacks could reach while it is written.
    let wireBuffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 16 * 1024)

    public init(configuration: EdgeConfiguration, handler: EdgeHandler) {
        self.configuration = configuration
        self.handler = handler
        connectionCap = configuration.maxConnections
        customHeaderKeys = configuration.customHeaderNames.map { ($0.lowercased(), ($0.lowercased() + ":").utf8CString) }
    }

    deinit {
        protocols?.deallocate()
        free(protocolName)
        retryPolicy?.deallocate()
        free(tlsPaths?.0)
        free(tlsPaths?.1)
        free(alpn)
        wireBuffer.deallocate()
    }

    /// The libwebsockets release linked in ("4.1.6-…"): what it checks before Kassa sees a request
    /// or a frame depends on it (SECURITY.md).
    public static var libWebSocketsVersion: String { String(cString: lws_get_library_version()) }

    /// Number of WebSockets currently open.
    public var openWebSockets: Int { openWebSocketCount.load(ordering: .relaxed) }
    /// Blocking calls (the store) made on the service thread; debug builds count them, and must find none.
    public var blockingCallsOnServiceThread: Int { loop.nonBlocking.violations.load(ordering: .relaxed) }

    /// Connections (HTTP transactions and WebSockets) the edge keeps state for.
    public var trackedConnections: Int { trackedConnectionCount.load(ordering: .relaxed) }

    /// Binds the port and starts the service thread.
    public func start() throws(EdgeStartError) {
        setLibWebSocketsLogLevel()

        protocolName = strdup(configuration.webSocketProtocol)
        let table = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        table.initialize(repeating: lws_protocols(), count: 2)
        table[0].name = UnsafePointer(protocolName)
        table[0].callback = kassaEdgeCallback
        table[0].per_session_data_size = MemoryLayout<UInt64>.size
        // Small: larger messages arrive in pieces and are joined; every idle WebSocket holds this buffer.
        table[0].rx_buffer_size = 2 * 1024
        protocols = table

        // No validity policy: pings and idle hang-ups are the edge's own heartbeat (EdgeServer+Callback).
        let retry = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        retry.initialize(to: lws_retry_bo_t())
        retryPolicy = retry

        var info = lws_context_creation_info()
        info.port = Int32(configuration.port)
        info.protocols = UnsafePointer(table)
        info.options = UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8) | UInt64(LWS_SERVER_OPTION_DISABLE_IPV6)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.retry_and_idle_policy = UnsafePointer(retry)
        // libwebsockets arms this after every request head and body piece, and keeps it while the
        // handler works: a GET still unanswered after it lost its connection with no answer. The
        // request deadline is the edge's own (heartbeat); this is only the handler's backstop.
        info.timeout_secs = UInt32(max(configuration.responseTimeoutSeconds, configuration.requestTimeoutSeconds))
        info.keepalive_timeout = Int32(configuration.requestTimeoutSeconds)
        info.max_http_header_data = 8192
        info.count_threads = 1
        loop.configure(&info)
        // Each half-open connection and each request in flight holds a header table until it is
        // answered: room for every half-open one the cap allows, and requests in flight beside them.
        info.max_http_header_pool = UInt16(clamping: configuration.headerPoolSize)

        if configuration.tlsCertificatePath != nil || configuration.tlsKeyPath != nil {
            guard let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath,
                  FileManager.default.isReadableFile(atPath: certificate), FileManager.default.isReadableFile(atPath: key) else {
                throw EdgeStartError(description: "TLS needs both a readable certificate and a readable private key")
            }
            info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
            tlsPaths = (strdup(certificate), strdup(key))
            // HTTP/1.1 only: the edge reads headers (custom ones included) the HTTP/1.1 way.
            alpn = strdup("http/1.1")
            info.alpn = UnsafePointer(alpn)
            info.ssl_cert_filepath = UnsafePointer(tlsPaths?.0)
            info.ssl_private_key_filepath = UnsafePointer(tlsPaths?.1)
        }
        let (created, cap) = DescriptorTable.sized(for: configuration.maxConnections, reserve: configuration.reservedDescriptors) { () -> OpaquePointer? in
            configuration.host.withCString { iface in
                info.iface = iface
                return lws_create_context(&info)
            }
        }
        connectionCap = cap
        guard let context = created else {
            throw EdgeStartError(description: "cannot listen on \(configuration.host):\(configuration.port) (address in use or not available, or the TLS certificate and key do not load)")
        }
        if let vhost = lws_get_vhost_by_name(context, "default") {
            port = Int(lws_get_vhost_listen_port(vhost))
        }
        loop.start(context, name: "kassa-edge", beforePoll: { [self] in finishPass() }) { [self] in
            let waiters = stopped.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.done = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Stops gracefully: refuses new requests, closes WebSockets with 1001,
    /// lets in-flight requests finish (up to the grace period), then closes all.
    public func stop() async {
        guard context != nil else { return }
        post(.shutdown)
        let grace = configuration.shutdownGraceSeconds
        let deadline = Task { [weak self] in
            guard (try? await Task.sleep(for: .seconds(grace))) != nil else { return }
            self?.post(.forceExit)
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let alreadyDone = stopped.withLock { state -> Bool in
                if state.done { return true }
                state.waiters.append(c)
                return false
            }
            if alreadyDone { c.resume() }
        }
        deadline.cancel()
    }

    // MARK: Posting work to the service thread

    func post(_ command: Command) {
        switch command {
        case .send, .response, .close: loop.postOrRun(command) { apply($0) }
        case .shutdown, .forceExit: loop.post(command)
        }
    }

    /// Queues one text message for a WebSocket. Safe from any thread.
    public func send(_ connectionID: UInt64, text: String) {
        send(connectionID, bytes: Array(text.utf8))
    }

    /// Queues a JSON message; with a `stamp`, the handler hears how long after it the frame was written.
    public func send(_ connectionID: UInt64, json: JSONValue, stamp: ContinuousClock.Instant? = nil) {
        var frame = [UInt8](repeating: 0, count: kassa_lws_pre)
        json.write(into: &frame)
        post(.send(connectionID, frame, stamp))
    }

    /// Queues a message already serialised (UTF-8 text).
    public func send(_ connectionID: UInt64, bytes: [UInt8], stamp: ContinuousClock.Instant? = nil) {
        var frame = [UInt8]()
        frame.reserveCapacity(kassa_lws_pre + bytes.count)
        frame.append(contentsOf: repeatElement(0, count: kassa_lws_pre))
        frame.append(contentsOf: bytes)
        post(.send(connectionID, frame, stamp))
    }

    /// Closes a WebSocket after what is already queued for it. Safe from any thread.
    public func close(_ connectionID: UInt64, code: UInt16, reason: String) {
        post(.close(connectionID, code, reason))
    }
}
