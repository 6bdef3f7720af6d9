/// Reads fields out of a request document by dotted path, collecting one
/// problem per missing or mistyped field, so an answer can name each one.
///
/// ```swift
/// var input = JSONInput(document)
/// let amount = input.integer("paymentorder.amount", minimum: 1)
/// if let first = input.problems.first { /* 400 naming first.field */ }
/// ```
public struct JSONInput: Sendable {
    public struct FieldProblem: Error, Sendable, Equatable {
        public var field: String
        public var description: String
    }

    public let document: JSONValue
    public private(set) var problems: [FieldProblem] = []

    public init(_ document: JSONValue) { self.document = document }

    /// Parses `bytes`; nil (with a problem naming the body) when it is not a JSON object.
    public static func parse(_ bytes: [UInt8]) -> Result<JSONInput, FieldProblem> {
        do {
            let value = try JSONValue.parse(bytes)
            guard case .object = value else { return .failure(FieldProblem(field: "body", description: "must be a JSON object")) }
            return .success(JSONInput(value))
        } catch {
            return .failure(FieldProblem(field: "body", description: "is not valid JSON: \(error)"))
        }
    }

    /// The value at a dotted path (`paymentorder.urls.hostUrls`), walked in place and by bytes:
    /// splitting the path into an array, or walking it by Character, on every lookup was a
    /// visible part of validating a payment order.
    public func value(_ path: String) -> JSONValue? {
        var current: JSONValue? = document
        let utf8 = path.utf8
        var start = utf8.startIndex
        while current != nil, start < utf8.endIndex {
            let end = utf8[start...].firstIndex(of: UInt8(ascii: ".")) ?? utf8.endIndex
            if start < end { current = current?[String(path[start..<end])] }
            start = end < utf8.endIndex ? utf8.index(after: end) : end
        }
        if case .null? = current { return nil }
        return current
    }

    public mutating func fail(_ field: String, _ description: String) {
        problems.append(FieldProblem(field: field, description: description))
    }

    // Each check reads the value at a path, or one given (a `JSONReader`'s, named `field`); a
    // null counts as missing.

    public mutating func string(_ path: String, required: Bool = true, maxLength: Int = 4096) -> String? {
        string(value(path), field: path, required: required, maxLength: maxLength)
    }

    public mutating func string(_ value: JSONValue?, field: String, required: Bool = true, maxLength: Int = 4096) -> String? {
        guard let value = present(value, field, required) else { return nil }
        guard case .string(let s) = value else { fail(field, "must be a string"); return nil }
        // A string has no more characters than UTF-8 bytes: most are let through without counting them.
        guard s.utf8.count <= maxLength || s.count <= maxLength else { fail(field, "must be at most \(maxLength) characters"); return nil }
        return s
    }

    public mutating func integer(_ path: String, required: Bool = true, minimum: Int = Int.min) -> Int? {
        integer(value(path), field: path, required: required, minimum: minimum)
    }

    public mutating func integer(_ value: JSONValue?, field: String, required: Bool = true, minimum: Int = Int.min) -> Int? {
        guard let value = present(value, field, required) else { return nil }
        guard let n = value.intValue else { fail(field, "must be a whole number"); return nil }
        guard n >= minimum else { fail(field, "must be at least \(minimum)"); return nil }
        return n
    }

    public mutating func bool(_ path: String, required: Bool = true) -> Bool? {
        guard let value = present(value(path), path, required) else { return nil }
        guard let b = value.boolValue else { fail(path, "must be true or false"); return nil }
        return b
    }

    public mutating func object(_ path: String, required: Bool = true) -> [String: JSONValue]? {
        object(value(path), field: path, required: required)
    }

    public mutating func object(_ value: JSONValue?, field: String, required: Bool = true) -> [String: JSONValue]? {
        guard let value = present(value, field, required) else { return nil }
        guard let o = value.objectValue else { fail(field, "must be an object"); return nil }
        return o
    }

    public mutating func strings(_ path: String, required: Bool = true) -> [String]? {
        strings(value(path), field: path, required: required)
    }

    public mutating func strings(_ value: JSONValue?, field: String, required: Bool = true) -> [String]? {
        guard let value = present(value, field, required) else { return nil }
        guard let a = value.arrayValue else { fail(field, "must be an array of strings"); return nil }
        let strings = a.compactMap(\.stringValue)
        guard strings.count == a.count else { fail(field, "must be an array of strings"); return nil }
        return strings
    }

    /// `value` unless it is missing or null, which fails a required field.
    private mutating func present(_ value: JSONValue?, _ field: String, _ required: Bool) -> JSONValue? {
        switch value {
        case nil, .null?:
            if required { fail(field, "is required") }
            return nil
        case let value?:
            return value
        }
    }
}
