/// A JSON document as a value: what Kassa parses from clients and upstream,
/// and what it writes back. Objects serialise with sorted keys so that the
/// same value always gives the same bytes.
public enum JSONValue: Sendable, Equatable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    public var doubleValue: Double? {
        if case .number(let n) = self { return n }
        return nil
    }
    public var intValue: Int? {
        if case .number(let n) = self, n.rounded() == n, abs(n) < 9.0e15 { return Int(n) }
        return nil
    }
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

// MARK: - Writing

extension JSONValue {
    /// The compact UTF-8 serialisation.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(into: &out)
        return out
    }

    public var text: String { String(decoding: bytes, as: UTF8.self) }

    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): JSONValue.writeNumber(n, into: &out)
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            JSONValue.writeObject(o, into: &out) { _, value, out in value.write(into: &out) }
        }
    }

    /// Writes `object` with its members in sorted order (stable output), each value by `write`
    /// (given the member's name): `JSONValue.write` and a writer that changes values on the way
    /// (the event log's redaction) share one order. The members' positions are sorted in a buffer
    /// on the stack, so writing an object allocates nothing and hashes no key again.
    public static func writeObject(_ object: [String: JSONValue], into out: inout [UInt8],
                                   _ write: (String, JSONValue, inout [UInt8]) -> Void) {
        out.append(UInt8(ascii: "{"))
        withUnsafeTemporaryAllocation(of: [String: JSONValue].Index.self, capacity: object.count) { order in
            var count = 0
            for position in object.indices {
                order.initializeElement(at: count, to: position)
                count += 1
            }
            var members = UnsafeMutableBufferPointer(rebasing: order[..<count])
            members.sort { object[$0].key < object[$1].key }
            for (i, position) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(object[position].key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(object[position].key, object[position].value, &out)
            }
            _ = members.deinitialize()
        }
        out.append(UInt8(ascii: "}"))
    }

    static func writeNumber(_ n: Double, into out: inout [UInt8]) {
        if !n.isFinite {
            out.append(contentsOf: "null".utf8)
        } else if n.rounded() == n, abs(n) < 1e15 {
            out.append(contentsOf: String(Int64(n)).utf8)
        } else {
            out.append(contentsOf: "\(n)".utf8)
        }
    }

    public static func writeString(_ s: String, into out: inout [UInt8]) {
        var s = s   // a native string's bytes are read in place
        s.withUTF8 { writeString(utf8: $0, into: &out) }
    }

    /// Whether `bytes` hold a quote, a backslash or a control character (what a JSON string
    /// escapes), looked at eight bytes at a time.
    static func holdsEscaped(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while i + 8 <= bytes.count {
                if endsPlainRun(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return true }
                i += 8
            }
        }
        while i < bytes.count {
            if bytes[i] < 0x20 || bytes[i] == 0x22 || bytes[i] == 0x5C { return true }
            i += 1
        }
        return false
    }

    /// Whether any of the eight bytes in `word` is a quote, a backslash or below 0x20: where a
    /// run of a string's bytes that are written as they are ends. (A byte that is zero after
    /// `x ^ c` is one equal to `c`; `(x - 0x01…) & ~x & 0x80…` is not zero exactly when `x` has a
    /// zero byte, and `(x - 0x20…) & ~x & 0x80…` when it has one below 0x20.)
    @inlinable package static func endsPlainRun(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ x: UInt64) -> Bool { (x &- ones) & ~x & highs != 0 }
        return hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C)) || (word &- ones &* 0x20) & ~word & highs != 0
    }

    /// A string given as its UTF-8 bytes, quoted and escaped.
    public static func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escaping: copy them whole.
        if !holdsEscaped(bytes) {
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            return
        }
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: - Parsing

/// Why a document could not be parsed; `offset` is the byte where it went wrong.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var offset: Int
    public var description: String { "\(reason) at byte \(offset)" }
}

extension JSONValue {
    /// Parses one JSON document (RFC 8259). Nesting is bounded so hostile
    /// input cannot exhaust the stack; invalid UTF-8 is refused.
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        // Parsed in place when the bytes are contiguous (an array, a native string's UTF-8),
        // copied once otherwise.
        let parsed = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
                return try parser.parseDocument()
            }
        }
        if let parsed { return try parsed.get() }
        return try parse(Array(bytes), maxDepth: maxDepth)
    }

    public static func parse(_ text: String, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        try parse(text.utf8, maxDepth: maxDepth)
    }
}

struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0
    /// The members and elements of the containers being read, innermost last: one stack for the
    /// whole document, so a container's own collection is allocated once at its final size
    /// (appending to a collection per container regrew it several times per object).
    var members: [(key: String, value: JSONValue, at: Int)] = []
    var elements: [JSONValue] = []
    /// The names of the objects being stepped over or read member by member (`MemberNames`).
    var names: [JSONName] = []
    /// What each stack takes at its first push: an answer's containers at once, where doubling
    /// from one took five or six allocations a document.
    static let firstStackCapacity = 32

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(reason: reason, offset: index) }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected data after the document") }
        return value
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw fail("unexpected end of input") }
        let start = literal.utf8Start
        for i in 0..<count where bytes[index + i] != start[i] { throw fail("invalid literal") }
        index += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > maxDepth { throw fail("nesting deeper than \(maxDepth)") }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        guard try enter(closing: UInt8(ascii: "}")) else { return .object([:]) }
        // Members are gathered on the stack first so the dictionary is sized once, never regrown.
        if members.capacity == 0 { members.reserveCapacity(Self.firstStackCapacity) }
        let base = members.count
        defer { members.removeSubrange(base...) }
        repeat {
            let (key, at) = try memberName()
            let value = try parseValue()
            members.append((key, value, at))
        } while try endMember()
        var object: [String: JSONValue] = [:]
        object.reserveCapacity(members.count - base)
        for member in members[base...] {
            if object.updateValue(member.value, forKey: member.key) != nil {
                index = member.at
                throw fail("duplicate member \"\(member.key)\"")
            }
        }
        return .object(object)
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        guard try enter(closing: UInt8(ascii: "]")) else { return .array([]) }
        if elements.capacity == 0 { elements.reserveCapacity(Self.firstStackCapacity) }
        let base = elements.count
        defer { elements.removeSubrange(base...) }
        repeat {
            let element = try parseValue()
            elements.append(element)
        } while try endElement()
        return .array(Array(elements[base...]))
    }

    // MARK: Steps through containers (shared by the tree, the skip and JSONReader)

    /// Enters the object or array at `index`, which `close` ends: true when it holds a member or
    /// an element (`index` is left at it).
    mutating func enter(closing close: UInt8) throws(JSONParseError) -> Bool {
        try enter()
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == close {
            index += 1; depth -= 1
            return false
        }
        return true
    }

    /// The next member's name, and the offset of its value (where `index` is left).
    mutating func memberName() throws(JSONParseError) -> (name: String, at: Int) {
        let (name, at) = try memberNameInPlace()
        return (name.string, at)
    }

    /// The next member's name as `memberName` reads it, but left in place when it is plain
    /// ASCII without escapes (most are): no String is made for a name that is only compared.
    mutating func memberNameInPlace() throws(JSONParseError) -> (name: JSONName, at: Int) {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
        var end = index + 1
        while end < bytes.count, bytes[end] != UInt8(ascii: "\""), (0x20..<0x80).contains(bytes[end]), bytes[end] != UInt8(ascii: "\\") {
            end += 1
        }
        let name: JSONName
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            name = JSONName(plain: UnsafeBufferPointer(rebasing: bytes[(index + 1)..<end]))
            index = end + 1
        } else {
            name = JSONName(decoded: try parseString())
        }
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
        index += 1
        skipWhitespace()
        return (name, index)
    }

    /// After a member's value: true when another member follows, false at the object's end.
    mutating func endMember() throws(JSONParseError) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        if bytes[index] == UInt8(ascii: ",") { index += 1; return true }
        if bytes[index] == UInt8(ascii: "}") { index += 1; depth -= 1; return false }
        throw fail("expected ',' or '}'")
    }

    /// After an element: true when another follows (`index` is left at it), false at the array's end.
    mutating func endElement() throws(JSONParseError) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        if bytes[index] == UInt8(ascii: ",") { index += 1; skipWhitespace(); return true }
        if bytes[index] == UInt8(ascii: "]") { index += 1; depth -= 1; return false }
        throw fail("expected ',' or ']'")
    }

    /// Steps over the value at `index`, checked as `parseValue` checks it, without building it.
    mutating func skipValue() throws(JSONParseError) {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            guard try enter(closing: UInt8(ascii: "}")) else { return }
            var names = MemberNames(self)
            repeat {
                let (name, at) = try memberNameInPlace()
                try names.insert(name, at: at, &self)
                try skipValue()
            } while try endMember()
            names.end(&self)
        case UInt8(ascii: "["):
            guard try enter(closing: UInt8(ascii: "]")) else { return }
            repeat { try skipValue() } while try endElement()
        case UInt8(ascii: "\""):
            try skipString()
        default:
            _ = try parseValue()   // a number or a literal: nothing to allocate
        }
    }

    /// Steps over the string at `index`: a plain ASCII one by a scan alone, any other as
    /// `parseString` reads it (its UTF-8 and escapes checked).
    mutating func skipString() throws(JSONParseError) {
        let start = index
        index += 1
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") { index += 1; return }
            if c < 0x20 || c >= 0x80 || c == UInt8(ascii: "\\") { break }
            index += 1
        }
        index = start
        _ = try parseString()
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.index
            while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) { p.index += 1 }
            return p.index - s
        }
        guard index < bytes.count else { throw fail("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits(&self) == 0 {
            throw fail("invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits(&self) > 0 else { throw fail("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw fail("invalid number") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw fail("number out of range") }
        return .number(value)
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw fail("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1 // opening quote
        // Most strings are short ASCII without escapes: made straight from the input bytes,
        // with no copy and no UTF-8 validation to do.
        let start = index
        var ascii = true
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if ascii { return String(decoding: run, as: UTF8.self) }
                guard let s = String(validating: run, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw fail("control character in string") }
            if c >= 0x80 { ascii = false }
            index += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        var runStart = index
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                index += 1
                break
            }
            if c < 0x20 { throw fail("control character in string") }
            if c == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("unpaired surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("invalid escape")
                }
                runStart = index
                continue
            }
            index += 1
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
        return s
    }
}

/// The member names of one object read without a dictionary, to refuse a duplicate as
/// `parseObject` does: kept on the parser's stack while few (no collection per object), in a
/// set past that.
struct MemberNames {
    private let base: Int
    private var set: Set<String>? = nil

    init(_ parser: JSONParser) { base = parser.names.count }

    mutating func insert(_ name: JSONName, at offset: Int, _ parser: inout JSONParser) throws(JSONParseError) {
        let isNew: Bool
        if set != nil {
            isNew = set!.insert(name.string).inserted
        } else {
            isNew = !parser.names[base...].contains { $0.isSame(as: name) }
            if parser.names.capacity == 0 { parser.names.reserveCapacity(JSONParser.firstStackCapacity) }
            parser.names.append(name)
            if parser.names.count - base == 16 { set = Set(parser.names[base...].map(\.string)) }
        }
        guard isNew else {
            parser.index = offset
            throw parser.fail("duplicate member \"\(name.string)\"")
        }
    }

    /// At the object's end: its names leave the stack.
    func end(_ parser: inout JSONParser) { parser.names.removeSubrange(base...) }
}

/// A member's name as `JSONReader.object` gives it: compared with a literal (`switch name {
/// case "id": … }`, `name == "id"`) byte by byte where it stands in the document, so most names
/// are never made into a String. Valid only inside the `object` call that gives it (it points
/// into the document); `string` is the name to keep.
public struct JSONName {
    /// A plain ASCII name without escapes: its bytes in the document.
    @usableFromInline let plain: UnsafeBufferPointer<UInt8>
    /// Any other name, decoded (`plain` is then empty).
    @usableFromInline let decoded: String?

    init(plain: UnsafeBufferPointer<UInt8>) { self.plain = plain; decoded = nil }
    init(decoded: String) { plain = UnsafeBufferPointer(start: nil, count: 0); self.decoded = decoded }

    public var string: String { decoded ?? String(decoding: plain, as: UTF8.self) }

    /// The name written as a JSON string: a plain one's bytes as they stand.
    public func write(into out: inout [UInt8]) {
        guard let decoded else {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: plain)
            out.append(UInt8(ascii: "\""))
            return
        }
        JSONValue.writeString(decoded, into: &out)
    }

    /// Equal as Strings are: by bytes when both are plain ASCII (whose Strings are equal exactly
    /// when their bytes are), as Strings otherwise (which counts canonical equivalents as equal).
    func isSame(as other: JSONName) -> Bool {
        if decoded == nil, other.decoded == nil {
            return Self.sameBytes(plain, other.plain)
        }
        return string == other.string
    }

    @inlinable
    public static func == (name: JSONName, literal: StaticString) -> Bool {
        literal.withUTF8Buffer { expected in
            if let decoded = name.decoded { return decoded == String(decoding: expected, as: UTF8.self) }
            return sameBytes(name.plain, expected)
        }
    }

    /// Byte by byte in a loop the compiler keeps inline (`elementsEqual` went through the
    /// generic iterator for each byte of each name a decoder's `switch` compared).
    @inlinable
    static func sameBytes(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        var k = 0
        while k < a.count {
            if a[k] != b[k] { return false }
            k += 1
        }
        return true
    }

    @inlinable
    public static func ~= (literal: StaticString, name: JSONName) -> Bool { name == literal }
}

/// Reads one JSON document value by value, building a tree only for what its caller takes whole
/// (`value()`): a reader that needs a few members of a large answer steps over the rest.
/// Checked as strictly as `JSONValue.parse` (nesting, strings, numbers, duplicate members), so a
/// document one refuses, the other refuses too.
///
/// ```swift
/// let id = try JSONReader.read(bytes) { r in
///     var id: String?
///     _ = try r.object { r, name in if name == "id" { id = try r.string() } }
///     return id
/// }
/// ```
public struct JSONReader {
    var parser: JSONParser
    /// Where the document's value starts (after leading whitespace).
    private let start: Int

    /// Reads `bytes` with `body`, which reads the document's one value. Inlinable, so that a
    /// reader in another module is specialised for its `T` (a decoded answer): unspecialised, its
    /// result went through the generic value witnesses.
    @inlinable
    public static func read<T>(_ bytes: [UInt8], maxDepth: Int = 64,
                               _ body: (inout JSONReader) throws(JSONParseError) -> T) throws(JSONParseError) -> T {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) -> T in
            var reader = JSONReader(buffer, maxDepth: maxDepth)
            let value = try body(&reader)
            try reader.finish()
            return value
        }
    }

    @usableFromInline
    init(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
        parser.skipWhitespace()
        start = parser.index
    }

    /// Steps over the value when `body` read none, and checks that nothing follows it.
    @usableFromInline
    mutating func finish() throws(JSONParseError) {
        if parser.index == start { try parser.skipValue() }
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw parser.fail("unexpected data after the document") }
    }

    private func isAt(_ byte: UInt8) -> Bool { parser.index < parser.bytes.count && parser.bytes[parser.index] == byte }

    /// Calls `member` with each member name of the object here; `member` reads that member's
    /// value, or leaves it, and then it is stepped over. False, the value stepped over, when it
    /// is no object.
    public mutating func object(_ member: (inout JSONReader, JSONName) throws(JSONParseError) -> Void) throws(JSONParseError) -> Bool {
        guard isAt(UInt8(ascii: "{")) else { try parser.skipValue(); return false }
        guard try parser.enter(closing: UInt8(ascii: "}")) else { return true }
        var names = MemberNames(parser)
        repeat {
            let (name, at) = try parser.memberNameInPlace()
            try names.insert(name, at: at, &parser)
            try member(&self, name)
            if parser.index == at { try parser.skipValue() }
        } while try parser.endMember()
        names.end(&parser)
        return true
    }

    /// Calls `element` for each element of the array here, as `object` does for members. False,
    /// the value stepped over, when it is no array.
    public mutating func array(_ element: (inout JSONReader) throws(JSONParseError) -> Void) throws(JSONParseError) -> Bool {
        guard isAt(UInt8(ascii: "[")) else { try parser.skipValue(); return false }
        guard try parser.enter(closing: UInt8(ascii: "]")) else { return true }
        repeat {
            let at = parser.index
            try element(&self)
            if parser.index == at { try parser.skipValue() }
        } while try parser.endElement()
        return true
    }

    /// The string here; nil, the value stepped over, for any other value.
    public mutating func string() throws(JSONParseError) -> String? {
        guard isAt(UInt8(ascii: "\"")) else { try parser.skipValue(); return nil }
        return try parser.parseString()
    }

    /// The boolean here; nil, the value stepped over, for any other value.
    public mutating func bool() throws(JSONParseError) -> Bool? {
        guard isAt(UInt8(ascii: "t")) || isAt(UInt8(ascii: "f")) else { try parser.skipValue(); return nil }
        return try parser.parseValue().boolValue
    }

    /// The value here, whole, as a tree.
    public mutating func value() throws(JSONParseError) -> JSONValue { try parser.parseValue() }

    /// Steps over the value here.
    public mutating func skip() throws(JSONParseError) { try parser.skipValue() }

    /// The array here as its bytes in the document, checked as `skip` checks it, for a reader
    /// that may parse it later (`JSONValue.parse`); nil, the value stepped over, for any other value.
    public mutating func rawArray() throws(JSONParseError) -> [UInt8]? {
        let isArray = isAt(UInt8(ascii: "["))
        let (_, raw) = try spanning { _ throws(JSONParseError) in }
        return isArray ? Array(raw) : nil
    }

    /// The value here read by `body` (stepped over when `body` reads none), and the bytes it
    /// spans in the document: for a writer that passes a value on as it came. The bytes are valid
    /// only inside `read`, as a `JSONName` is.
    public mutating func spanning<T>(_ body: (inout JSONReader) throws(JSONParseError) -> T)
        throws(JSONParseError) -> (T, UnsafeBufferPointer<UInt8>) {
        let start = parser.index
        let value = try body(&self)
        if parser.index == start { try parser.skipValue() }
        return (value, UnsafeBufferPointer(rebasing: parser.bytes[start..<parser.index]))
    }
}

// MARK: - Writing without a tree

/// Writes one JSON object member by member, in the order they are given, with no tree: for a
/// body Kassa makes many of and only sends (a beacon). Names are literals Kassa chose, so they
/// are written unescaped.
public struct JSONObjectWriter {
    private var bytes: [UInt8]
    private var empty = true

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    private mutating func name(_ name: StaticString) {
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(contentsOf: #"":"#.utf8)
    }

    public mutating func member(_ name: StaticString, _ value: String) {
        self.name(name)
        JSONValue.writeString(value, into: &bytes)
    }

    /// An integer, or null.
    public mutating func member(_ name: StaticString, _ value: Int?) {
        self.name(name)
        if let value { bytes.append(contentsOf: String(value).utf8) } else { bytes.append(contentsOf: "null".utf8) }
    }

    public mutating func member(_ name: StaticString, _ value: Bool) {
        self.name(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// A nested object, its members written by `members`.
    public mutating func member(_ name: StaticString, object members: (inout JSONObjectWriter) -> Void) {
        self.name(name)
        bytes.append(UInt8(ascii: "{"))
        empty = true
        members(&self)
        bytes.append(UInt8(ascii: "}"))
        empty = false
    }

    /// The object, closed.
    public mutating func finished() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
