/// The one place that decides what must never reach a log line or the event
/// log: secrets are replaced, personal data is cut to a searchable suffix.
///
/// ```swift
/// Redaction.redact(["msisdn": "+46739000001", "token": "abc"])
/// // ["msisdn": "…0001", "token": "[redacted]"]
/// ```
public enum Redaction {
    public static let placeholder = "[redacted]"

    /// Member names (compared lower-cased) whose values are secrets, or single out a payer's
    /// device (a user agent is a fingerprint; the session's platform is logged instead).
    static let secretKeys: Set<String> = [
        "token", "clienttoken", "accesstoken", "paymenttoken", "authorization", "apikey", "api-key",
        "your-api-key", "x-api-key", "admintoken", "password", "secret", "cvc", "cvv", "cardnumber", "pan",
        "expirydate", "expirymonth", "expiryyear", "recurrencetoken", "unscheduledtoken", "useragent",
        "pin", "securitycode", "email", "emailaddress", "e-mail", "socialsecuritynumber", "ssn",
        "nationalidentifier", "nationalidentitynumber", "personalnumber", "personalidentitynumber",
        // A payer's name and address, as a payment order's `payer` and `riskIndicator` carry them
        // (swedbank-pay-sdk-mobile-example-merchant, paymentOrderRequest.json): an address object
        // goes whole, so its `name` does too without every product's and problem's `name`.
        "firstname", "lastname", "fullname", "first_name", "last_name", "full_name", "middlename", "payername",
        "cardholdername", "addressee", "streetaddress", "coaddress", "zipcode", "postalcode", "city",
        "pickupaddress", "shippingaddress", "billingaddress", "deliveryemailaddress", "ipaddress",
        "consumerprofileref", "dateofbirth", "birthdate",
    ]
    /// Parts of member names that make any name a secret's: `upstreamToken`, `client_secret`,
    /// `db-password`, `card_cvc`. (Their boolean values stay: `generatePaymentToken: true`.)
    static let secretNameParts: [[UInt8]] = ["token", "secret", "passw", "apikey", "api_key", "api-key",
                                             "cvc", "cvv", "securitycode", "security_code", "privatekey", "private_key"]
        .map { Array($0.utf8) }
    /// Member names whose values are personal data kept only as a suffix.
    /// A merchant's reference for its payer is one too: support is told it and searches by its end.
    static let suffixKeys: Set<String> = ["msisdn", "phone", "phonenumber", "mobilenumber", "mobilephonenumber",
                                          "homephonenumber", "workphonenumber", "payerreference"]

    public static func isSecretKey(_ key: String) -> Bool { rule(forKey: key) == .secret }

    /// What a member name asks of its value.
    enum KeyRule { case secret, suffix }

    /// The names and name parts above as bytes, back to back: a member name is matched byte by
    /// byte against the names of its length, then against the parts that begin with each of its
    /// letters, without lower-casing or hashing it (every member of every logged body is looked up
    /// here). Built once into buffers kept for the process's life, so a lookup retains nothing.
    private struct NameTable: @unchecked Sendable {   // its buffers are written only by init
        struct Entry { var start: Int; var count: Int; var rule: KeyRule }
        let bytes: UnsafeBufferPointer<UInt8>
        /// Whole names, by length: `names[byLength[n]..<byLength[n + 1]]` are the names n bytes long.
        let names: UnsafeBufferPointer<Entry>
        let byLength: UnsafeBufferPointer<Int>
        /// For each length, the first letters of the names that long, as bits: most member names
        /// share a length with some name but begin with none of their letters.
        let firstLetters: UnsafeBufferPointer<UInt32>
        /// Parts, by first letter: `parts[byLetter[l]..<byLetter[l + 1]]` begin with letter l (0 is `a`).
        let parts: UnsafeBufferPointer<Entry>
        let byLetter: UnsafeBufferPointer<Int>
        /// For each first letter, the second letters of the parts that begin with it, as bits: most
        /// places in a name begin no part, and one look rules them out.
        let secondLetters: UnsafeBufferPointer<UInt32>

        init() {
            var bytes: [UInt8] = []
            func entry(_ name: [UInt8], _ rule: KeyRule) -> Entry {
                defer { bytes += name }
                return Entry(start: bytes.count, count: name.count, rule: rule)
            }
            let names = (secretKeys.map { (Array($0.utf8), KeyRule.secret) } + suffixKeys.map { (Array($0.utf8), KeyRule.suffix) })
                .sorted { $0.0.count < $1.0.count }.map { entry($0.0, $0.1) }
            let byLength = (0...(names.last?.count ?? 0) + 1).map { n in names.firstIndex { $0.count >= n } ?? names.count }
            precondition(names.allSatisfy { (0x61...0x7A).contains(bytes[$0.start]) })
            let firstLetters = byLength.indices.map { n in
                names.filter { $0.count == n }.reduce(UInt32(0)) { $0 | 1 << UInt32(bytes[$1.start] - 0x61) }
            }
            precondition(secretNameParts.allSatisfy { $0.count >= 3 && (0x61...0x7A).contains($0[0]) && (0x61...0x7A).contains($0[1]) })
            let parts = secretNameParts.sorted { $0[0] < $1[0] }.map { entry($0, .secret) }
            let byLetter = (0...26).map { l in parts.firstIndex { Int(bytes[$0.start]) - 0x61 >= l } ?? parts.count }
            func kept<T>(_ array: [T]) -> UnsafeBufferPointer<T> {
                let buffer = UnsafeMutableBufferPointer<T>.allocate(capacity: array.count)
                _ = buffer.initialize(from: array)
                return UnsafeBufferPointer(buffer)
            }
            let secondLetters = (0..<26).map { l in
                secretNameParts.filter { Int($0[0]) - 0x61 == l }.reduce(UInt32(0)) { $0 | 1 << UInt32($1[1] - 0x61) }
            }
            (self.bytes, self.names, self.byLength, self.parts, self.byLetter) = (kept(bytes), kept(names), kept(byLength), kept(parts), kept(byLetter))
            self.secondLetters = kept(secondLetters)
            self.firstLetters = kept(firstLetters)
        }
    }
    private static let nameTable = NameTable()

    /// The rule for a member name, compared case-insensitively.
    static func rule(forKey key: String) -> KeyRule? {
        // A native string's bytes are read in place; another is copied once.
        if let inPlace = key.utf8.withContiguousStorageIfAvailable({ rule(forName: $0) }) { return inPlace }
        var copy = key
        return copy.withUTF8 { rule(forName: $0) }
    }

    /// The rule for a name's UTF-8 bytes.
    static func rule(forName b: UnsafeBufferPointer<UInt8>) -> KeyRule? {
        // Unicode lower-casing can map a non-ASCII name onto an ASCII one (the Kelvin sign onto "k").
        guard b.allSatisfy({ $0 < 0x80 }) else {
            let lower = String(decoding: b, as: UTF8.self).lowercased()
            if secretKeys.contains(lower) || secretNameParts.contains(where: { lower.utf8.contains($0) }) { return .secret }
            return suffixKeys.contains(lower) ? .suffix : nil
        }
        return rule(forASCIIName: b)
    }

    /// `rule(forName:)` for a name whose bytes are known to be ASCII (a body's copy learns that
    /// while it scans the name).
    static func rule(forASCIIName b: UnsafeBufferPointer<UInt8>) -> KeyRule? {
        let table = nameTable
        func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }
        func matches(_ entry: NameTable.Entry, at offset: Int) -> Bool {
            var k = 0
            while k < entry.count {
                if lower(b[offset + k]) != table.bytes[entry.start + k] { return false }
                k += 1
            }
            return true
        }
        if b.count > 0, b.count + 1 < table.byLength.count,
           case let first = Int(lower(b[0])) &- 0x61, first >= 0, first < 26, table.firstLetters[b.count] & (1 << UInt32(first)) != 0 {
            for n in table.byLength[b.count]..<table.byLength[b.count + 1] where matches(table.names[n], at: 0) {
                return table.names[n].rule
            }
        }
        guard b.count >= 3 else { return nil }
        for offset in 0..<(b.count - 2) {
            let letter = Int(lower(b[offset])) - 0x61, second = Int(lower(b[offset + 1])) - 0x61
            guard letter >= 0, letter < 26, second >= 0, second < 26, table.secondLetters[letter] & (1 << UInt32(second)) != 0 else { continue }
            for n in table.byLetter[letter]..<table.byLetter[letter + 1] {
                let part = table.parts[n]
                if part.count <= b.count - offset && matches(part, at: offset) { return .secret }
            }
        }
        return nil
    }

    /// Keeps the last four characters of a personal value so support can still search for it.
    public static func suffix(_ value: String, keep: Int = 4) -> String {
        // Already cut (a second pass over redacted text changes nothing).
        if value == placeholder || value.hasPrefix("…") { return value }
        guard value.count > keep else { return placeholder }
        return "…" + value.suffix(keep)
    }

    public static func redact(_ value: JSONValue) -> JSONValue {
        redactedIfChanged(value) ?? value
    }

    /// `redact(value).bytes`, written in one pass: no redacted tree is built and walked again
    /// (whatever Kassa keeps of a tree as bytes goes this way: event data, idempotent answers,
    /// cut bodies).
    public static func redactedBytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        writeRedacted(value, into: &out)
        return out
    }

    /// Writes `value` as `redact` would leave it, by the same rules as `redactedIfChanged`.
    static func writeRedacted(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .object(let object):
            JSONValue.writeObject(object, into: &out) { key, member, out in
                switch (rule(forKey: key), member) {
                case (.secret?, .bool), (.secret?, .null): member.write(into: &out)
                case (.secret?, _): JSONValue.writeString(placeholder, into: &out)
                case (.suffix?, .string(let s)): JSONValue.writeString(suffix(s), into: &out)
                default: writeRedacted(member, into: &out)
                }
            }
        case .array(let array):
            out.append(UInt8(ascii: "["))
            for (i, element) in array.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeRedacted(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .string(var s):
            s.withUTF8 { text in
                if let redacted = redactedText(text) {
                    redacted.withUnsafeBufferPointer { JSONValue.writeString(utf8: $0, into: &out) }
                } else {
                    JSONValue.writeString(utf8: text, into: &out)
                }
            }
        case .number(let n):
            (redactedNumber(n) ?? value).write(into: &out)
        case .null, .bool:
            value.write(into: &out)
        }
    }

    /// The redacted value, or nil when redaction changes nothing: most of a logged
    /// body has nothing to redact, and rebuilding its dictionaries was the costliest
    /// part of logging an upstream answer.
    static func redactedIfChanged(_ value: JSONValue) -> JSONValue? {
        switch value {
        case .object(let object):
            var out: [String: JSONValue]? = nil
            for (key, member) in object {
                let replacement: JSONValue?
                let rule = rule(forKey: key)
                if rule == .secret {
                    switch member {
                    case .bool, .null: replacement = nil
                    case .string(placeholder): replacement = nil
                    default: replacement = .string(placeholder)
                    }
                } else if rule == .suffix, case .string(let s) = member {
                    replacement = .string(suffix(s))
                } else {
                    replacement = redactedIfChanged(member)
                }
                if let replacement {
                    if out == nil { out = object }
                    out![key] = replacement
                }
            }
            return out.map { .object($0) }
        case .array(let array):
            var out: [JSONValue]? = nil
            for (i, element) in array.enumerated() {
                if let replacement = redactedIfChanged(element) {
                    if out == nil { out = array }
                    out![i] = replacement
                }
            }
            return out.map { .array($0) }
        case .string(let s):
            let redacted = redactText(s)
            return redacted == s ? nil : .string(redacted)
        case .number(let n):
            return redactedNumber(n)
        default:
            return nil
        }
    }

    /// Free text (a summary, a URL, a message): secret query parameters, long tokens, and
    /// personal data found by its value.
    public static func redactText(_ s: String) -> String { onUTF8(s) { redactedText($0) } }

    /// `redactText` with every stage run, whatever `textHints` says: what the hints must not change.
    package static func redactTextInFull(_ s: String) -> String { onUTF8(s) { redactedText($0, hints: .all) } }

    /// `text` redacted as `redactText` redacts it, or nil when nothing changes (most text). Works
    /// on the bytes where they lie: every string of a logged body that could hold something
    /// comes here, and a `String` for each was most of what logging a body cost.
    ///
    /// `hints` (`textHints` of `text` unless given) skips the stages that surely change nothing
    /// in `text`: one pass instead of one for each stage, and most text needs none. A stage after
    /// one that changed it looks for itself.
    static func redactedText(_ text: UnsafeBufferPointer<UInt8>, hints: TextHints? = nil) -> [UInt8]? {
        let hints = hints ?? textHints(rawString: text)
        guard !hints.isEmpty else { return nil }
        var redacted: [UInt8]? = nil
        func apply(_ hint: TextHints, _ stage: (UnsafeBufferPointer<UInt8>) -> [UInt8]?) {
            guard redacted != nil || hints.contains(hint) else { return }
            let next = if let redacted { redacted.withUnsafeBufferPointer(stage) } else { stage(text) }
            if let next { redacted = next }
        }
        apply(.query, redactedURLQuery)
        apply(.tokens, redactedTokens)
        apply(.values, redactedValues)
        return redacted
    }

    /// Which of `redactText`'s stages could change a string, as `textHints` finds them.
    struct TextHints: OptionSet {
        let rawValue: UInt8
        /// A `?` or `&`: `redactedURLQuery`'s guard.
        static let query = TextHints(rawValue: 1)
        /// A run of 40 hex digits, or a `/` ending `sessionPathSegment`: where `redactedTokens` cuts.
        static let tokens = TextHints(rawValue: 2)
        /// `@`, `%`, or a `DigitStretch` long enough: `redactedValues`'s guard.
        static let values = TextHints(rawValue: 4)
        static let all: TextHints = [.query, .tokens, .values]
    }

    /// `s` through a stage that works on bytes; `s` itself when the stage changes nothing.
    static func onUTF8(_ s: String, _ stage: (UnsafeBufferPointer<UInt8>) -> [UInt8]?) -> String {
        var s = s   // a native string's bytes are read in place; another is made native once
        return s.withUTF8(stage).map { String(decoding: $0, as: UTF8.self) } ?? s
    }

    /// Secrets also travel inside URLs (`?token=…`): their values are replaced.
    public static func redactURLQuery(_ s: String) -> String { onUTF8(s, redactedURLQuery) }

    /// `redactURLQuery` on bytes; nil when there is no query or nothing in it is redacted.
    static func redactedURLQuery(_ b: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard b.contains(where: { $0 == 0x3F || $0 == 0x26 }) else { return nil }   // ? &
        func isSeparator(_ c: UInt8) -> Bool { c == 0x3F || c == 0x26 || c == 0x3B }   // ? & ;
        func bytes(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: b[range]) }
        var out: [UInt8] = []
        out.reserveCapacity(b.count)
        var i = 0
        var changed = false
        while i < b.count {
            guard let eq = b[i...].firstIndex(of: 0x3D) else { break }   // =
            let nameStart = b[i..<eq].lastIndex(where: isSeparator).map { $0 + 1 }
            out.append(contentsOf: bytes(i..<(eq + 1)))
            let valueStart = eq + 1
            let valueEnd = b[valueStart...].firstIndex(where: { $0 == 0x26 || $0 == 0x23 || $0 == 0x3B }) ?? b.count   // & # ;
            let value = bytes(valueStart..<valueEnd)
            switch nameStart.flatMap({ rule(forName: bytes($0..<eq)) }) {
            case .secret?:
                out.append(contentsOf: placeholder.utf8)
                changed = true
            case .suffix?:
                out.append(contentsOf: suffix(String(decoding: value, as: UTF8.self)).utf8)
                changed = true
            case nil:
                out.append(contentsOf: value)
            }
            i = valueEnd
        }
        guard changed else { return nil }
        out.append(contentsOf: bytes(i..<b.count))
        return out
    }

    /// Runs of 40 or more hex digits are tokens (client tokens are 48), and so is the GUID that
    /// names a payment session in a path (`/psp/paymentsessions/5a17c24e-d459-…`, seed 002; the
    /// same value is the payment menu's `token=` in seed 000): only their last 6 digits stay.
    /// Kassa's own ids (32 digits) and payment order ids (GUIDs elsewhere) stay searchable.
    public static func redactTokens(_ s: String) -> String { onUTF8(s, redactedTokens) }

    /// `redactTokens` on bytes; nil when there is no token.
    static func redactedTokens(_ b: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard let first = nextToken(b, from: 0) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(b.count)
        writeTokensRedacted(b, first: first, into: &out)
        return out
    }

    /// `b` with its tokens cut, appended to `out`; `first` is its first token (`nextToken`).
    static func writeTokensRedacted(_ b: UnsafeBufferPointer<UInt8>, first: Range<Int>, into out: inout [UInt8]) {
        var token: Range<Int>? = first, copied = 0
        while let t = token {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: b[copied..<t.lowerBound]))
            out.append(contentsOf: "…".utf8)
            out.append(contentsOf: UnsafeBufferPointer(rebasing: b[(t.upperBound - 6)..<t.upperBound]))
            copied = t.upperBound
            token = nextToken(b, from: copied)
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: b[copied...]))
    }

    /// The first token in `b` at or after `start`: a run of 40 hex digits or more, or a session's GUID.
    static func nextToken(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> Range<Int>? {
        var i = start
        while i < b.count {
            guard isHex(b[i]) else { i += 1; continue }
            var j = i
            while j < b.count && isHex(b[j]) { j += 1 }
            if j - i >= 40 { return i..<j }
            if let end = sessionGUIDEnd(b, from: i) { return i..<end }
            i = j
        }
        return nil
    }

    static func isHex(_ c: UInt8) -> Bool { c &- 0x30 < 10 || (c | 0x20) &- 0x61 < 6 }

    /// The path segment before a payment session's token.
    static let sessionPathSegment: StaticString = "paymentsessions/"

    /// Whether `b` has `sessionPathSegment` just before `index`. (Asked at every `/` of every
    /// logged string: compared in place, with no lazily made constant to check first.)
    static func followsSessionPath(_ b: UnsafeBufferPointer<UInt8>, _ index: Int) -> Bool {
        let segment = sessionPathSegment, n = segment.utf8CodeUnitCount
        guard index >= n, index <= b.count else { return false }
        var k = 0
        while k < n {
            if b[index - n + k] != segment.utf8Start[k] { return false }
            k += 1
        }
        return true
    }

    /// The end of a GUID (8-4-4-4-12 hex digits) that starts at `start` right after
    /// `sessionPathSegment` and is not part of a longer run, or nil.
    static func sessionGUIDEnd(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        let end = start + 36
        guard end <= b.count, followsSessionPath(b, start) else { return nil }
        for k in 0..<36 {
            let c = b[start + k]
            guard k == 8 || k == 13 || k == 18 || k == 23 ? c == 0x2D : isHex(c) else { return nil }
        }
        return end == b.count || !(isHex(b[end]) || b[end] == 0x2D) ? end : nil
    }

    /// Header values that are credentials.
    public static func redactHeader(name: String, value: String) -> String {
        let lower = name.lowercased()
        if lower == "authorization" || lower == "cookie" || lower == "set-cookie" || isSecretKey(name) {
            return placeholder
        }
        return value
    }
}
