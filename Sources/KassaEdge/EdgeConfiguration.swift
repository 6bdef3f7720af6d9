/// Limits and addresses of the edge server.
public struct EdgeConfiguration: Sendable {
    public var host: String
    /// 0 lets the kernel pick a free port; read it back from `EdgeServer.port`.
    public var port: Int
    /// Largest accepted request body; larger ones are answered 413.
    public var maxBodyBytes: Int
    /// Largest accepted WebSocket message; larger ones close with 1009.
    public var maxFrameBytes: Int
    /// Bytes that may wait to be sent to one WebSocket before it is closed as a slow consumer.
    public var maxOutboundBytes: Int
    /// Seconds of silence before the server pings a WebSocket.
    public var pingIntervalSeconds: Int
    /// Seconds without a valid pong or frame before a WebSocket is dropped.
    public var idleTimeoutSeconds: Int
    /// Seconds an HTTP client may take to send its request (head and body).
    public var requestTimeoutSeconds: Int
    /// Seconds a handler may take to answer before its connection is dropped: a backstop only,
    /// the gateway's own upstream deadlines answer long before.
    public var responseTimeoutSeconds = 120
    /// How long a graceful stop waits for in-flight work before it closes everything.
    public var shutdownGraceSeconds: Double
    /// Header names libwebsockets does not know, which handlers need to read.
    public var customHeaderNames: [String]
    /// The WebSocket subprotocol the edge speaks.
    public var webSocketProtocol: String
    /// WebSockets open at once at most (0: no limit); more are refused with 503.
    public var maxWebSockets = 0
    /// Connections open at once from all addresses; more are closed as they arrive. It also
    /// sizes libwebsockets' descriptor table, which is walked on every close (`DescriptorTable`).
    public var maxConnections = EdgeConfiguration.defaultMaxConnections
    /// `--max-connections`' default; also what the WebSocket client's table is sized for unless told.
    public static let defaultMaxConnections = 16_384
    /// Descriptors the rest of the process may hold beside the connections (its files, its
    /// upstream connections): the soft limit on open files is raised to hold these too.
    public var reservedDescriptors = DescriptorTable.reserve
    /// Connections open at once from one client address; more are closed as they arrive.
    public var maxConnectionsPerAddress = 4_096
    /// Connections from one client address that have not yet sent a whole request (or sit idle
    /// between kept-alive requests); more are closed as they arrive.
    public var maxHalfOpenPerAddress = 256
    /// Half-open connections in all: past it, the one that has waited longest is closed.
    public var maxHalfOpen = 1_024
    /// Header tables: every half-open connection the cap allows, and 256 requests in flight.
    public var headerPoolSize: Int { min(maxHalfOpen + 256, Int(UInt16.max)) }
    /// PEM certificate (chain) and private key: with both, the port speaks only TLS (https, wss).
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?

    public init(host: String = "127.0.0.1", port: Int = 8080, maxBodyBytes: Int = 1 << 20,
                maxFrameBytes: Int = 64 << 10, maxOutboundBytes: Int = 1 << 20,
                pingIntervalSeconds: Int = 20, idleTimeoutSeconds: Int = 60,
                requestTimeoutSeconds: Int = 10, shutdownGraceSeconds: Double = 5,
                customHeaderNames: [String] = [], webSocketProtocol: String = "kassa.v1") {
        self.host = host
        self.port = port
        self.maxBodyBytes = maxBodyBytes
        self.maxFrameBytes = maxFrameBytes
        self.maxOutboundBytes = maxOutboundBytes
        self.pingIntervalSeconds = pingIntervalSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.requestTimeoutSeconds = requestTimeoutSeconds
        self.shutdownGraceSeconds = shutdownGraceSeconds
        self.customHeaderNames = customHeaderNames
        self.webSocketProtocol = webSocketProtocol
    }
}
