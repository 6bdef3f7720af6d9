/// An RFC 7807 problem: the one error shape every Kassa answer uses.
///
/// ```swift
/// let p = Problem.notFound(detail: "no route for /nope")
/// // {"type":"urn:kassa:problem:not-found","title":"Not Found","status":404,…}
/// ```
public struct Problem: Error, Sendable, Equatable {
    public var type: String
    public var title: String
    public var status: Int
    public var detail: String?
    public var instance: String?
    /// Extension members (RFC 7807 §3.2), e.g. `parameter`, `retryable`.
    public var extensions: [String: JSONValue]

    public init(type: String, title: String, status: Int, detail: String? = nil,
                instance: String? = nil, extensions: [String: JSONValue] = [:]) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.instance = instance
        self.extensions = extensions
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = extensions
        object["type"] = .string(type)
        object["title"] = .string(title)
        object["status"] = .number(Double(status))
        if let detail { object["detail"] = .string(detail) }
        if let instance { object["instance"] = .string(instance) }
        return .object(object)
    }

    public static let contentType = "application/problem+json"

    /// Another service's RFC 7807 document as a problem, every member kept; nil when it is not one.
    public init?(forwarding document: JSONValue, status: Int) {
        guard case .object(var members) = document, let type = members.removeValue(forKey: "type")?.stringValue,
              members.removeValue(forKey: "status")?.intValue != nil else { return nil }
        let title = members.removeValue(forKey: "title")?.stringValue ?? ""
        let detail = members.removeValue(forKey: "detail")?.stringValue
        let instance = members.removeValue(forKey: "instance")?.stringValue
        self.init(type: type, title: title, status: status, detail: detail, instance: instance, extensions: members)
    }
}

/// Kassa's own problem types live under `urn:kassa:problem:`; a URN because
/// Kassa runs under each merchant's own host name, and the type must stay
/// stable wherever it runs. Swedbank Pay and Merchant Backend problem types
/// keep their own URLs.
extension Problem {
    public static let kassaPrefix = "urn:kassa:problem:"

    public static func kassa(_ name: String, _ title: String, _ status: Int,
                             detail: String? = nil, extensions: [String: JSONValue] = [:]) -> Problem {
        Problem(type: kassaPrefix + name, title: title, status: status, detail: detail, extensions: extensions)
    }

    public static func unauthorized(_ detail: String) -> Problem {
        .kassa("unauthorized", "Unauthorized", 401, detail: detail)
    }
    public static func notFound(_ detail: String) -> Problem {
        .kassa("not-found", "Not Found", 404, detail: detail)
    }
    public static func methodNotAllowed(_ detail: String) -> Problem {
        .kassa("method-not-allowed", "Method Not Allowed", 405, detail: detail)
    }
    public static func payloadTooLarge(limit: Int) -> Problem {
        .kassa("payload-too-large", "Payload Too Large", 413,
               detail: "the request body exceeds the limit of \(limit) bytes",
               extensions: ["limit": .number(Double(limit))])
    }
    public static func badRequest(_ detail: String, parameter: String? = nil) -> Problem {
        .kassa("bad-request", "Bad Request", 400, detail: detail,
               extensions: parameter.map { ["parameter": .string($0)] } ?? [:])
    }
    public static func serviceUnavailable(_ detail: String) -> Problem {
        .kassa("service-unavailable", "Service Unavailable", 503, detail: detail)
    }
    public static func internalError(_ detail: String) -> Problem {
        .kassa("internal-error", "Internal Server Error", 500, detail: detail)
    }
}
