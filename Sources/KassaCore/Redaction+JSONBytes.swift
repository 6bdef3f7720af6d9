/// Redaction of a JSON document as text, for bodies the event log keeps as they came: the same
/// rules as `redact(_:)` on the parsed tree, applied while copying the bytes, so no tree is built,
/// walked, sorted and written again for each logged body.
extension Redaction {
    /// `document` redacted as `redact(_:)` redacts its tree, written compactly: members keep their
    /// order, and numbers and unchanged strings their text. Nil when the bytes are not one JSON
    /// document it can walk (the caller then redacts the parsed tree).
    public static func redactJSON(_ document: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        return appendRedactedJSON(document, to: &out) ? out : nil
    }

    /// `redactJSON(document)` written at the end of `out`, which then needs no copy of its own
    /// (an event's data and its body in one buffer). False, with `out` as it was, when
    /// `redactJSON` gives nil.
    public static func appendRedactedJSON(_ document: [UInt8], to out: inout [UInt8]) -> Bool {
        let kept = out.count
        let done = document.withUnsafeBufferPointer { bytes in
            var walk = RedactingCopy(input: bytes)
            swap(&walk.out, &out)   // the walk appends to this buffer, not to a copy of it
            defer { swap(&walk.out, &out) }
            return walk.document()
        }
        if !done { out.removeSubrange(kept...) }
        return done
    }

    /// The stages of `redactText` that could change a string, from one pass over its bytes (the
    /// guards of `redactURLQuery`, `redactTokens` and `redactValues`): none for most strings of an
    /// answer (ids, URLs, dates and words), only `.tokens` for a payment session's href. All of
    /// them for any byte past ASCII, which this look does not judge. The bytes are a text's UTF-8,
    /// or a JSON string's between its quotes when it holds no escapes (the same bytes).
    static func textHints(rawString b: UnsafeBufferPointer<UInt8>) -> TextHints {
        var stretch = DigitStretch(), hexRun = 0, hints: TextHints = []
        func isLetterPastF(_ c: UInt8) -> Bool { c &- 0x67 < 20 }   // g…z
        var k = 0
        while k < b.count {
            let c = b[k]
            k += 1
            // A lower-case letter past `f` (most of an id's or a URL's bytes) is no hex digit and
            // none of the bytes below: only the digit stretch has to see it, and the letters after
            // it leave the stretch as it left it, so a run of them is taken as one.
            if isLetterPastF(c) {
                hexRun = 0
                _ = stretch.take(c)
                while k < b.count, isLetterPastF(b[k]) { k += 1 }
                continue
            }
            if isHex(c) {
                hexRun += 1
                if hexRun >= 40 { hints.insert(.tokens) }
            } else {
                hexRun = 0
                switch c {
                case 0x3F, 0x26: hints.insert(.query)   // ? &
                case 0x40, 0x25: hints.insert(.values)   // @ %
                case 0x2F where Redaction.followsSessionPath(b, k): hints.insert(.tokens)
                case 0x80...: return .all
                default: break
                }
            }
            if stretch.take(c) { hints.insert(.values) }
        }
        return hints
    }
}

/// One pass over a document, writing its redacted copy. What stays as it was is not copied piece
/// by piece: `copiedTo` marks how far the input is accounted for, and a run of unchanged bytes
/// reaches `out` in one copy when something changes (a redacted value, a space dropped) or at the
/// end. A compact answer with a few tokens in it is a handful of copies, not one for each string,
/// bracket and comma.
private struct RedactingCopy {
    let input: UnsafeBufferPointer<UInt8>
    var i = 0
    var depth = 0
    var out: [UInt8] = []
    /// The input before this index is in `out`, or was left out on purpose.
    var copiedTo = 0
    /// As deep as `JSONValue.parse` reads by default.
    static let maxDepth = 64

    init(input: UnsafeBufferPointer<UInt8>) { self.input = input }

    /// Whether the input was one document, all of it now copied to the end of `out`.
    mutating func document() -> Bool {
        out.reserveCapacity(out.count + input.count)
        skipSpace()
        guard value() else { return false }
        skipSpace()
        guard i == input.count else { return false }
        flush(to: i)
        return true
    }

    /// Copies the input from `copiedTo` up to `end` into `out`.
    private mutating func flush(to end: Int) {
        guard end > copiedTo else { return }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: input[copiedTo..<end]))
        copiedTo = end
    }

    /// Writes what `write` writes in place of the input's `range`.
    private mutating func replace(_ range: Range<Int>, _ write: (inout [UInt8]) -> Void) {
        flush(to: range.lowerBound)
        write(&out)
        copiedTo = range.upperBound
    }

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }

    /// Steps over white space, which the copy leaves out (it is written compactly).
    private mutating func skipSpace() {
        guard i < input.count, Self.isSpace(input[i]) else { return }
        flush(to: i)
        while i < input.count, Self.isSpace(input[i]) { i += 1 }
        copiedTo = i
    }

    private mutating func value() -> Bool {
        guard i < input.count else { return false }
        switch input[i] {
        case UInt8(ascii: "{"): return container(closing: UInt8(ascii: "}")) { $0.member() }
        case UInt8(ascii: "["): return container(closing: UInt8(ascii: "]")) { $0.value() }
        case UInt8(ascii: "\""): return string()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return false
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard input.count - i >= n else { return false }
        for k in 0..<n where input[i + k] != word.utf8Start[k] { return false }
        i += n
        return true
    }

    /// An object or an array: `item` reads one member or element; nesting is bounded.
    private mutating func container(closing close: UInt8, _ item: (inout RedactingCopy) -> Bool) -> Bool {
        depth += 1
        guard depth <= Self.maxDepth else { return false }
        defer { depth -= 1 }
        i += 1
        skipSpace()
        if i < input.count, input[i] == close { i += 1; return true }
        while true {
            skipSpace()
            guard item(&self) else { return false }
            skipSpace()
            guard i < input.count else { return false }
            if input[i] == UInt8(ascii: ",") { i += 1; continue }
            guard input[i] == close else { return false }
            i += 1
            return true
        }
    }

    /// One member: its name picks the rule for its value.
    private mutating func member() -> Bool {
        guard i < input.count, input[i] == UInt8(ascii: "\""), let name = scanString() else { return false }
        let rule: Redaction.KeyRule?
        if name.escaped || !name.ascii {
            guard let key = decode(name) else { return false }
            rule = Redaction.rule(forKey: key)
        } else {
            rule = Redaction.rule(forASCIIName: contents(of: name))
        }
        skipSpace()
        guard i < input.count, input[i] == UInt8(ascii: ":") else { return false }
        i += 1
        skipSpace()
        guard i < input.count else { return false }
        switch rule {
        case .secret?:
            return secret()
        case .suffix? where input[i] == UInt8(ascii: "\""):
            guard let raw = scanString(), let text = decode(raw) else { return false }
            replace(raw.range) { JSONValue.writeString(Redaction.suffix(text), into: &$0) }
            return true
        default:
            return value()
        }
    }

    /// A secret's value: a boolean, null or the placeholder stays; anything else becomes the placeholder.
    private mutating func secret() -> Bool {
        let start = i
        switch input[i] {
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            return value()
        case UInt8(ascii: "\""):
            guard let raw = scanString(), let text = decode(raw) else { return false }
            if text == Redaction.placeholder { return true }
        default:
            // Read through (it must be well formed), then dropped with whatever of it was written.
            flush(to: start)
            let mark = out.count
            guard value() else { return false }
            out.removeSubrange(mark...)
        }
        replace(start..<i) { JSONValue.writeString(Redaction.placeholder, into: &$0) }
        return true
    }

    /// A string value: kept as it is unless `redactText` changes it.
    private mutating func string() -> Bool {
        guard let raw = scanString() else { return false }
        // ASCII without escapes (most strings; hrefs with a token): one look picks the stages that
        // could change it, and it is redacted where it lies and written back as it comes out, since
        // neither it nor what redaction puts in holds anything JSON escapes.
        if !raw.escaped, raw.ascii {
            let text = contents(of: raw)
            let hints = Redaction.textHints(rawString: text)
            if hints == .tokens {
                // A session's href (most strings redaction changes): cut as it is copied.
                guard let first = Redaction.nextToken(text, from: 0) else { return true }
                replace(raw.range) { out in
                    out.append(UInt8(ascii: "\""))
                    let cut = out.count
                    Redaction.writeTokensRedacted(text, first: first, into: &out)
                    // A token cut out can leave a number standing apart that was glued to it (a
                    // national id right after a long hex run): the values stage looks at what is
                    // left, as `redactedText` runs it after any stage that changed the text.
                    if let valued = out.withUnsafeBufferPointer({ Redaction.redactedValues(UnsafeBufferPointer(rebasing: $0[cut...])) }) {
                        out.replaceSubrange(cut..., with: valued)
                    }
                    out.append(UInt8(ascii: "\""))
                }
                return true
            }
            guard let redacted = Redaction.redactedText(text, hints: hints) else { return true }
            replace(raw.range) { out in
                out.append(UInt8(ascii: "\""))
                out.append(contentsOf: redacted)
                out.append(UInt8(ascii: "\""))
            }
            return true
        }
        guard let decoded = decode(raw) else { return false }
        let redacted = Redaction.redactText(decoded)
        if redacted != decoded { replace(raw.range) { JSONValue.writeString(redacted, into: &$0) } }
        return true
    }

    /// A number: its text, unless it could be a card number or an identity number (ten digits or
    /// more, a fraction or an exponent), which `redactedNumber` judges as the tree's redaction does.
    private mutating func number() -> Bool {
        let start = i
        if input[i] == UInt8(ascii: "-") { i += 1 }
        func digits(_ walk: inout RedactingCopy) -> Int {
            let s = walk.i
            while walk.i < walk.input.count, walk.input[walk.i] >= 0x30, walk.input[walk.i] <= 0x39 { walk.i += 1 }
            return walk.i - s
        }
        let whole = digits(&self)
        guard whole > 0 else { return false }
        if whole > 1, input[i - whole] == UInt8(ascii: "0") { return false }   // no leading zero
        var plain = true
        if i < input.count, input[i] == UInt8(ascii: ".") {
            i += 1; plain = false
            guard digits(&self) > 0 else { return false }
        }
        if i < input.count, input[i] == UInt8(ascii: "e") || input[i] == UInt8(ascii: "E") {
            i += 1; plain = false
            if i < input.count, input[i] == UInt8(ascii: "+") || input[i] == UInt8(ascii: "-") { i += 1 }
            guard digits(&self) > 0 else { return false }
        }
        // Read as the parser reads it (a finite double) unless it is a short whole number.
        guard !plain || whole >= 10 else { return true }
        let text = UnsafeBufferPointer(rebasing: input[start..<i])
        guard let n = Double(String(decoding: text, as: UTF8.self)), n.isFinite else { return false }
        if let replaced = Redaction.redactedNumber(n) { replace(start..<i) { replaced.write(into: &$0) } }
        return true
    }

    /// The string at `i` (its quotes included), whether it holds escapes and whether its bytes
    /// outside them are all ASCII (so its name rule and text hints need no second look for
    /// them); checked for termination and control characters, its escapes later by `decode` when
    /// they matter. Eight bytes are taken at a time while none of them is a quote, a backslash or
    /// a control character (most of a string).
    private mutating func scanString() -> ScannedString? {
        let start = i
        i += 1
        var escaped = false, bits: UInt64 = 0
        let base = UnsafeRawPointer(input.baseAddress!)   // not empty: a quote is at `start`
        while true {
            while i + 8 <= input.count {
                let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                guard !JSONValue.endsPlainRun(word) else { break }
                bits |= word
                i += 8
            }
            guard i < input.count else { return nil }
            let c = input[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                return ScannedString(range: start..<i, escaped: escaped, ascii: bits & 0x8080_8080_8080_8080 == 0)
            }
            if c < 0x20 { return nil }
            if c == UInt8(ascii: "\\") { escaped = true; i += 2; continue }
            bits |= UInt64(c)
            i += 1
        }
    }

    struct ScannedString { var range: Range<Int>; var escaped: Bool; var ascii: Bool }

    /// A scanned string's bytes between its quotes, as written (escapes not undone).
    private func contents(of raw: ScannedString) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: input[(raw.range.lowerBound + 1)..<(raw.range.upperBound - 1)])
    }

    /// A scanned string's value (escapes undone, UTF-8 checked), by the parser for escaped ones.
    private func decode(_ raw: ScannedString) -> String? {
        guard raw.escaped else { return String(validating: contents(of: raw), as: UTF8.self) }
        return (try? JSONValue.parse(UnsafeBufferPointer(rebasing: input[raw.range])))?.stringValue
    }
}
