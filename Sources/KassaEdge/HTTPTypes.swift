import KassaCore

public enum HTTPMethod: String, Sendable, CaseIterable {
    case GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS
}

/// Request or response headers. Names are kept lower-cased, as HTTP/1.1
/// header names are case-insensitive.
public struct HTTPHeaders: Sendable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init(_ fields: [(String, String)] = []) {
        for (n, v) in fields { add(n, v) }
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name.lowercased(), value))
    }

    /// Room for `count` fields, so a request's headers are not copied as they grow.
    mutating func reserveCapacity(_ count: Int) { fields.reserveCapacity(count) }

    /// `add` for a name known to be lower-case already (the edge's own tables).
    mutating func appendLowercased(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    public subscript(name: String) -> String? {
        // Every field's name is lower-case (`add`, `appendLowercased`). Only a name of the asked one's
        // length is compared: as given first (callers mostly ask in lower case), then ignoring
        // ASCII case. A miss, the usual answer, reads no name's bytes.
        let length = name.utf8.count
        for field in fields where field.name.utf8.count == length {
            if field.name == name || Self.isLowercased(name, field.name) { return field.value }
        }
        return nil
    }

    /// Whether `lower` is `name` with its ASCII capitals made small (the two of one length).
    private static func isLowercased(_ name: String, _ lower: String) -> Bool {
        zip(name.utf8, lower.utf8).allSatisfy { a, b in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(a) ? a | 0x20 == b : a == b
        }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }
}

/// One HTTP request as the edge received it. The path is percent-decoded by
/// libwebsockets; query parameters come decoded and in order.
public struct HTTPRequest: Sendable {
    public let connectionID: UInt64
    public let method: HTTPMethod
    public let path: String
    public let query: [(name: String, value: String)]
    public let headers: HTTPHeaders
    public let body: [UInt8]
    public let remoteAddress: String

    public init(connectionID: UInt64 = 0, method: HTTPMethod, path: String, query: [(String, String)] = [],
                headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], remoteAddress: String = "") {
        self.connectionID = connectionID
        self.method = method
        self.path = path
        self.query = query.map { (name: $0.0, value: $0.1) }
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    public func queryValue(_ name: String) -> String? { query.first(where: { $0.name == name })?.value }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Close the connection after this answer (used when the request body was not read).
    public var closeConnection: Bool
    /// Drop the connection without answering (the simulator's "connection reset" fault).
    public var abortConnection = false

    public init(status: Int, contentType: String = "application/json", headers: [(String, String)] = [],
                body: [UInt8] = [], closeConnection: Bool = false) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
        self.closeConnection = closeConnection
    }

    public static func json(_ value: JSONValue, status: Int = 200, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", headers: headers, body: value.bytes)
    }

    public static func problem(_ problem: Problem, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: problem.status, contentType: Problem.contentType, headers: headers, body: problem.json.bytes)
    }

    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> HTTPResponse {
        HTTPResponse(status: status, contentType: contentType, body: Array(text.utf8))
    }
}

/// What a WebSocket client asked for when it upgraded.
public struct WebSocketUpgrade: Sendable {
    public let connectionID: UInt64
    public let path: String
    public let query: [(name: String, value: String)]
    public let headers: HTTPHeaders
    public let remoteAddress: String

    public func queryValue(_ name: String) -> String? { query.first(where: { $0.name == name })?.value }
}

/// Close codes Kassa sends (RFC 6455 §7.4 plus private codes 4000–4999).
public enum WebSocketCloseCode {
    public static let normal: UInt16 = 1000
    public static let goingAway: UInt16 = 1001
    public static let unsupportedData: UInt16 = 1003
    public static let invalidPayload: UInt16 = 1007
    public static let policyViolation: UInt16 = 1008
    public static let messageTooBig: UInt16 = 1009
    public static let internalError: UInt16 = 1011
    /// The outbound queue passed its bound; the client resumes with `since`.
    public static let slowConsumer: UInt16 = 4008
    /// A stream refused once open (the session had to be read from the store to decide): the
    /// problem arrives in a frame first. 4000 + the HTTP status the upgrade would have had.
    public static let unauthorized: UInt16 = 4401
    public static let notFound: UInt16 = 4404
}

/// A problem with headers of its own (`Retry-After`, `WWW-Authenticate`, `Allow`), thrown by a handler.
public struct ProblemError: Error, Sendable {
    public var problem: Problem
    public var headers: [(String, String)]

    public init(_ problem: Problem, headers: [(String, String)]) {
        self.problem = problem
        self.headers = headers
    }

    /// What a handler's error is answered with: its problem, or a 500 that says nothing of the cause.
    public init(answering error: any Error) {
        switch error {
        case let problem as Problem: self.init(problem, headers: [])
        case let thrown as ProblemError: self = thrown
        default: self.init(.internalError("the request failed inside the gateway"), headers: [])
        }
    }

    /// False for an error that is not a problem: a fault to log, answered with a 500.
    public static func isProblem(_ error: any Error) -> Bool { error is Problem || error is ProblemError }
}

extension HTTPResponse {
    /// The reason phrase of a status (RFC 9110 §15); clients read the code, people the phrase.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: status < 400 ? "OK" : "Error"
        }
    }

    /// The answer for an error a handler threw (see `ProblemError(answering:)`).
    public static func problem(for error: any Error) -> HTTPResponse {
        let answer = ProblemError(answering: error)
        return .problem(answer.problem, headers: answer.headers)
    }

    /// The whole answer as HTTP/1.1 puts it on the wire, after `reserved` bytes left free (the room
    /// libwebsockets writes in front of what it sends): status line, type, length (none for a 1xx
    /// or 204, RFC 9110 §8.6), the headers, `connection: close` when the answer closes, then the body.
    /// Written by hand rather than by libwebsockets' header calls, which format each line with `snprintf`.
    func wireBytes(reserved: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: wireSize(reserved: reserved)) { buffer, initialized in
            initialized = writeWire(into: buffer, reserved: reserved)
        }
    }

    /// At least the bytes `writeWire` writes (a header's name may bring its own colon).
    func wireSize(reserved: Int) -> Int {
        var size = reserved + 9 + String(status).utf8.count + 1 + Self.reasonPhrase(status).utf8.count + 2 + Self.fieldSize("content-type", contentType) + 2 + body.count
        if status >= 200, status != 204 { size += Self.fieldSize("content-length", "") + 20 }
        for (name, value) in headers { size += Self.fieldSize(name, value) }
        if closeConnection { size += Self.fieldSize("connection", "close") }
        return size
    }

    /// `wireBytes` into the start of `buffer` (of at least `wireSize` bytes), one copy a piece;
    /// how many bytes it wrote. The edge writes every answer that fits into one buffer it keeps:
    /// appending the pieces to a new array grew and checked it piece by piece, and was ≈ 3.6 % of
    /// the edge's time on a cached `GET`.
    func writeWire(into buffer: UnsafeMutableBufferPointer<UInt8>, reserved: Int) -> Int {
        var out = WireWriter(buffer)
        out.zeros(reserved)
        out.write("HTTP/1.1 "); out.write(String(status)); out.write(" "); out.write(Self.reasonPhrase(status)); out.write("\r\n")
        out.field("content-type", contentType)
        if status >= 200, status != 204 { out.field("content-length", String(body.count)) }
        for (name, value) in headers { out.field(name, value) }
        if closeConnection { out.field("connection", "close") }
        out.write("\r\n")
        body.withUnsafeBytes { out.write($0) }
        return out.count
    }

    /// "name: value\r\n", the colon counted whether or not the name brings it.
    private static func fieldSize(_ name: String, _ value: String) -> Int { name.utf8.count + 2 + value.utf8.count + 2 }
}

/// Bytes written one after another into a buffer sized for them beforehand; a write past its end
/// stops the process rather than overwriting the memory after it.
private struct WireWriter {
    let buffer: UnsafeMutableBufferPointer<UInt8>
    private(set) var count = 0

    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    mutating func zeros(_ n: Int) {
        precondition(n <= buffer.count - count)
        (buffer.baseAddress! + count).initialize(repeating: 0, count: n)
        count += n
    }

    mutating func write(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count <= buffer.count - count)
        if let source = bytes.baseAddress { UnsafeMutableRawPointer(buffer.baseAddress! + count).copyMemory(from: source, byteCount: bytes.count) }
        count += bytes.count
    }

    mutating func write(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ write(UnsafeRawBufferPointer($0)) }) == nil {
            for byte in text.utf8 { withUnsafeBytes(of: byte) { write($0) } }
        }
    }

    mutating func field(_ name: String, _ value: String) {
        write(name)
        write(count > 0 && buffer[count - 1] == UInt8(ascii: ":") ? " " : ": ")
        write(value)
        write("\r\n")
    }
}
