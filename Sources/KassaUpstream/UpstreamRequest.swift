/// One HTTP exchange with an upstream server.
public struct UpstreamRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]?
    /// Milliseconds allowed to establish the connection.
    public var connectTimeoutMs: Int
    /// Milliseconds allowed for the whole exchange, connection included.
    public var totalTimeoutMs: Int
    /// PEM file of the certificate authorities to trust instead of the system's (a private CA, a test certificate).
    public var caCertificatePath: String?

    public init(method: String = "GET", url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                connectTimeoutMs: Int = 2_000, totalTimeoutMs: Int = 10_000, caCertificatePath: String? = nil) {
        self.caCertificatePath = caCertificatePath
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTimeoutMs = connectTimeoutMs
        self.totalTimeoutMs = totalTimeoutMs
    }
}

public struct UpstreamResponse: Sendable {
    public var status: Int
    /// Header names lower-cased, in the order received.
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Seconds from start to the last byte.
    public var duration: Double
    /// True when the exchange used a connection kept from an earlier one.
    public var reusedConnection: Bool

    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first(where: { $0.0 == lower })?.1
    }

    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Why an exchange produced no response.
public enum UpstreamError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The deadline passed (connect or total).
    case timeout
    /// No connection could be made (refused, unresolvable, unreachable).
    case connectFailed(String)
    /// The connection broke or closed before a whole response arrived.
    case connectionLost(String)
    /// The response was larger than the client accepts.
    case responseTooLarge(limit: Int)
    /// The request itself was unusable (bad URL, bad method).
    case invalidRequest(String)
    /// The caller's task was cancelled.
    case cancelled
    /// Any other transport failure, with curl's code and message.
    case transport(code: Int, message: String)

    public var description: String {
        switch self {
        case .timeout: return "upstream timed out"
        case .connectFailed(let m): return "cannot connect upstream: \(m)"
        case .connectionLost(let m): return "upstream connection lost: \(m)"
        case .responseTooLarge(let limit): return "upstream response larger than \(limit) bytes"
        case .invalidRequest(let m): return "invalid upstream request: \(m)"
        case .cancelled: return "upstream request cancelled"
        case .transport(let code, let m): return "upstream transport error \(code): \(m)"
        }
    }
}
