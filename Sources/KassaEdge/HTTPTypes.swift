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
        // Callers mostly ask in lower case already: the name as given first, lower-cased (a copy)
        // only when it has a capital.
        if let field = fields.first(where: { $0.name == name }) { return field.value }
        guard name.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else { return nil }
        let lower = name.lowercased()
        return fields.first(where: { $0.name == lower })?.value
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
        var bytes = [UInt8]()
        bytes.reserveCapacity(reserved + 96 + contentType.utf8.count + headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 } + body.count)
        bytes.append(contentsOf: repeatElement(0, count: reserved))
        func field(_ name: String, _ value: String) {
            bytes.append(contentsOf: name.utf8)
            if name.utf8.last != UInt8(ascii: ":") { bytes.append(UInt8(ascii: ":")) }
            bytes.append(UInt8(ascii: " "))
            bytes.append(contentsOf: value.utf8)
            bytes.append(contentsOf: [13, 10])
        }
        bytes.append(contentsOf: "HTTP/1.1 ".utf8)
        bytes.append(contentsOf: String(status).utf8)
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: Self.reasonPhrase(status).utf8)
        bytes.append(contentsOf: [13, 10])
        field("content-type", contentType)
        if status >= 200, status != 204 { field("content-length", String(body.count)) }
        for (name, value) in headers { field(name, value) }
        if closeConnection { field("connection", "close") }
        bytes.append(contentsOf: [13, 10])
        bytes.append(contentsOf: body)
        return bytes
    }
}
