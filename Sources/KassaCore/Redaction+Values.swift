/// Personal data found by its value, wherever it sits: in a free-text summary, inside a URL's
/// path or query, or in a body member whose name says nothing. Works on UTF-8 bytes.
///
/// - card numbers: 13 to 19 digits starting 2 to 6 (the card schemes' ranges), Luhn-valid,
///   keep their last four;
/// - phone numbers in international form (`+` and 8 to 15 digits) keep their last four;
/// - e-mail addresses become the placeholder;
/// - the Nordic national identity numbers (Swedish personnummer, Norwegian fødselsnummer,
///   Danish CPR, Finnish henkilötunnus), each checked by its date and check digits,
///   become the placeholder.
///
/// Digits that touch a letter are part of something else (a hex id, a word) and stay.
extension Redaction {
    /// What a run of digits was found to be.
    enum Finding { case card, phone, nationalID }

    /// `s` with every value above replaced; `s` itself when there is none (most strings).
    public static func redactValues(_ s: String) -> String { onUTF8(s, redactedValues) }

    /// `redactValues` on bytes; nil when nothing is found.
    static func redactedValues(_ b: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        // Looked at in place first: most strings hold nothing to find.
        // Nothing found is outside a long enough `DigitStretch`, unless it is an e-mail address (@, or %40 in a URL).
        var stretch = DigitStretch()
        guard b.contains(where: { stretch.take($0) || $0 == 0x40 || $0 == 0x25 }) else { return nil }   // @ %
        return scannedValues(b)
    }

    /// `redactValues` without its shortcut: every string scanned (the tests hold the shortcut to it).
    package static func scanValues(_ s: String) -> String { onUTF8(s, scannedValues) }

    static func scannedValues(_ b: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var bytes = Array(b)
        var changed = false
        // Until nothing changes: a replacement can split a group of digits into ones that are
        // numbers of their own (a second pass over the result must find nothing more).
        for _ in 0..<4 {
            var changedNow = redactEmails(&bytes)
            changedNow = redactDigitGroups(&bytes) || changedNow
            guard changedNow else { break }
            changed = true
        }
        return changed ? bytes : nil
    }

    /// A number's digits, when they would be redacted as text: a card number or national id
    /// sent as a JSON number. Numbers beyond 2^53 that could be card numbers are unreadable as
    /// doubles, so they go too.
    static func redactedNumber(_ n: Double) -> JSONValue? {
        guard n.isFinite, n >= 1e9, n.rounded() == n else { return nil }
        if n >= 9_007_199_254_740_992 {
            guard n < 1e19 else { return nil }
            var lead = n
            while lead >= 10 { lead /= 10 }
            return lead >= 2 && lead < 7 ? .string(placeholder) : nil
        }
        let digits = Array(String(Int64(n)).utf8)
        switch classify(digits, plus: false, separators: [], runs: [digits.count]) {
        case .card?: return .string("…" + String(decoding: digits.suffix(4), as: UTF8.self))
        case .nationalID?: return .string(placeholder)
        default: return nil
        }
    }

    // MARK: E-mail

    private static func isLocalPart(_ c: UInt8) -> Bool {
        isAlphanumeric(c) || c == 0x2E || c == 0x5F || c == 0x25 || c == 0x2B || c == 0x2D   // . _ % + -
    }
    private static func isDomain(_ c: UInt8) -> Bool { isAlphanumeric(c) || c == 0x2D || c == 0x2E }

    /// `local@domain.tld`, the `@` also percent-encoded (`%40`, in URLs).
    private static func redactEmails(_ b: inout [UInt8]) -> Bool {
        var changed = false
        var i = 0
        while i < b.count {
            let atWidth: Int
            if b[i] == 0x40 { atWidth = 1 }
            else if b[i] == 0x25, i + 2 < b.count, b[i + 1] == 0x34, b[i + 2] == 0x30 { atWidth = 3 }   // %40
            else { i += 1; continue }
            var start = i
            while start > 0, isLocalPart(b[start - 1]) { start -= 1 }
            var end = i + atWidth
            var lastDot = -1
            while end < b.count, isDomain(b[end]) {
                if b[end] == 0x2E { lastDot = end }
                end += 1
            }
            // The domain ends at its last label; a sentence's full stop is not part of it.
            while end > i + atWidth, b[end - 1] == 0x2E || b[end - 1] == 0x2D {
                end -= 1
                if lastDot >= end { lastDot = b[(i + atWidth)..<end].lastIndex(of: 0x2E) ?? -1 }
            }
            let tld = lastDot >= 0 ? b[(lastDot + 1)..<end] : []
            guard start < i, lastDot > i + atWidth, tld.count >= 2, tld.allSatisfy(isLetter) else { i += atWidth; continue }
            b.replaceSubrange(start..<end, with: placeholder.utf8)
            i = start + placeholder.utf8.count
            changed = true
        }
        return changed
    }

    // MARK: Digit groups

    /// Digits, with single spaces or hyphens between runs of them ("4111 1111 1111 1111",
    /// "+46 70 123 45 67", "811218-9876"), standing apart from letters and digits around them.
    private static func redactDigitGroups(_ b: inout [UInt8]) -> Bool {
        var changed = false
        var i = 0
        // Where the last replacement ended: a boundary, as its placeholder would be on a second pass.
        var replacedUpTo = -1
        while i < b.count {
            // A leading + (or %2B, in URLs) makes a phone number possible.
            var plus = false
            var digitsStart = i
            if b[i] == 0x2B, i + 1 < b.count, isDigit(b[i + 1]) {
                plus = true; digitsStart = i + 1
            } else if b[i] == 0x25, i + 3 < b.count, b[i + 1] == 0x32, b[i + 2] | 0x20 == 0x62, isDigit(b[i + 3]) {   // %2B
                plus = true; digitsStart = i + 3
            } else if !isDigit(b[i]) {
                i += 1; continue
            }
            if !plus, isKeptSuffix(b, at: i) {
                // "…1234", what a cut number keeps: already redacted.
                i += 4
                continue
            }
            if i > 0, i != replacedUpTo, isAlphanumeric(b[i - 1]) {
                // Part of a word or an id: skip the whole run of digits.
                i = digitsStart
                while i < b.count, isDigit(b[i]) { i += 1 }
                continue
            }
            if !plus, let end = finnishIDEnd(b, at: digitsStart) {
                b.replaceSubrange(i..<end, with: placeholder.utf8)
                i += placeholder.utf8.count
                replacedUpTo = i
                changed = true
                continue
            }
            // Runs of digits and what separates them: counted first, and kept only when the group
            // is long enough to be anything (most are amounts, dates and times).
            func group(_ keep: (Range<Int>) -> Void) -> (end: Int, digits: Int, runs: Int, firstRunEnd: Int) {
                var j = digitsStart, digits = 0, runs = 0, firstRunEnd = digitsStart
                while true {
                    let runStart = j
                    while j < b.count, isDigit(b[j]) { j += 1 }
                    keep(runStart..<j)
                    digits += j - runStart
                    runs += 1
                    if runs == 1 { firstRunEnd = j }
                    guard j + 1 < b.count, b[j] == 0x20 || b[j] == 0x2D, isDigit(b[j + 1]), runs < 8 else { break }
                    j += 1
                }
                return (j, digits, runs, firstRunEnd)
            }
            let counted = group { _ in }
            let end = counted.end
            if end < b.count, isLetter(b[end]) { i = end; continue }
            // Nothing `classify` finds is shorter (a phone number has 8 digits, the rest 10 or more).
            guard counted.digits >= (plus ? 8 : 10) else {
                i = counted.runs == 1 ? end : counted.firstRunEnd
                continue
            }
            var runs: [Range<Int>] = []
            _ = group { runs.append($0) }
            // The whole group; else its first run alone, and the scan goes on after that run, so
            // the rest is judged as a group of its own (as a second pass over the result would).
            let (found, taken) = classifyGroup(b, runs: runs, plus: plus).map { ($0, runs) }
                ?? (classifyGroup(b, runs: [runs[0]], plus: plus).map { ($0, [runs[0]]) } ?? (nil, [runs[0]]))
            let upTo = taken.last!.upperBound
            if let found {
                let text = replacement(found, taken.flatMap { b[$0] })
                b.replaceSubrange((plus ? i : digitsStart)..<upTo, with: text)
                i = (plus ? i : digitsStart) + text.count
                replacedUpTo = i
                changed = true
            } else {
                i = taken.count == runs.count ? end : upTo
            }
        }
        return changed
    }

    /// Exactly four digits right after "…", then no digit: the suffix a redacted number keeps.
    private static func isKeptSuffix(_ b: [UInt8], at i: Int) -> Bool {
        guard i >= 3, b[i - 3] == 0xE2, b[i - 2] == 0x80, b[i - 1] == 0xA6, i + 4 <= b.count,
              b[i..<(i + 4)].allSatisfy(isDigit) else { return false }
        return i + 4 == b.count || !isDigit(b[i + 4])
    }

    private static func replacement(_ found: Finding, _ digits: [UInt8]) -> [UInt8] {
        switch found {
        case .card, .phone: return Array("…".utf8) + digits.suffix(4)
        case .nationalID: return Array(placeholder.utf8)
        }
    }

    private static func classifyGroup(_ b: [UInt8], runs: [Range<Int>], plus: Bool) -> Finding? {
        // Nothing `classify` finds is shorter (a phone number has 8 digits, the rest 10 or more):
        // amounts, dates and ids end here without building arrays.
        guard runs.reduce(0, { $0 + $1.count }) >= (plus ? 8 : 10) else { return nil }
        let digits = runs.flatMap { b[$0] }
        let separators = runs.dropLast().map { b[$0.upperBound] }
        return classify(digits, plus: plus, separators: separators, runs: runs.map(\.count))
    }

    /// What a group of digits is, judged by its length, its separators and its check digits.
    static func classify(_ d: [UInt8], plus: Bool, separators: [UInt8], runs: [Int]) -> Finding? {
        if plus { return (8...15).contains(d.count) ? .phone : nil }
        let hyphenated = separators == [0x2D]
        if (13...19).contains(d.count), (0x32...0x36).contains(d[0]), luhn(d) { return .card }
        switch d.count {
        case 12 where separators.isEmpty || (runs == [8, 4] && hyphenated):
            // Swedish personnummer with its century: 18, 19 or 20.
            let century = value(d[0..<2])
            if (18...20).contains(century), swedishDate(d[2..<8]), luhn(Array(d[2...])) { return .nationalID }
        case 10 where separators.isEmpty || (runs == [6, 4] && hyphenated):
            if swedishDate(d[0..<6]), luhn(d) { return .nationalID }
            // Danish CPR: with its hyphen a date is enough; without it, the old modulus-11 check too.
            if danishDate(d[0..<6]), hyphenated || danishCheck(d) { return .nationalID }
        case 11 where separators.isEmpty || (runs == [6, 5] && hyphenated):
            if norwegianCheck(d) { return .nationalID }
        default:
            break
        }
        return nil
    }

    // MARK: Checks

    static func luhn(_ d: [UInt8]) -> Bool {
        var sum = 0
        for (k, c) in d.reversed().enumerated() {
            var v = Int(c - 0x30)
            if k % 2 == 1 { v *= 2; if v > 9 { v -= 9 } }
            sum += v
        }
        return sum % 10 == 0
    }

    private static func value(_ d: ArraySlice<UInt8>) -> Int { d.reduce(0) { $0 * 10 + Int($1 - 0x30) } }

    /// YYMMDD; a coordination number adds 60 to the day.
    private static func swedishDate(_ d: ArraySlice<UInt8>) -> Bool {
        let month = value(d.dropFirst(2).prefix(2)), day = value(d.suffix(2))
        return (1...12).contains(month) && ((1...31).contains(day) || (61...91).contains(day))
    }

    /// DDMMYY.
    private static func danishDate(_ d: ArraySlice<UInt8>) -> Bool {
        let day = value(d.prefix(2)), month = value(d.dropFirst(2).prefix(2))
        return (1...31).contains(day) && (1...12).contains(month)
    }

    private static func danishCheck(_ d: [UInt8]) -> Bool {
        let weights = [4, 3, 2, 7, 6, 5, 4, 3, 2, 1]
        return zip(d, weights).reduce(0) { $0 + Int($1.0 - 0x30) * $1.1 } % 11 == 0
    }

    /// DDMMYY, three digits, then two modulus-11 check digits; a D-number adds 40 to the day.
    private static func norwegianCheck(_ d: [UInt8]) -> Bool {
        let day = value(d[0..<2]), month = value(d[2..<4])
        guard (1...31).contains(day) || (41...71).contains(day), (1...12).contains(month) else { return false }
        let v = d.map { Int($0 - 0x30) }
        func check(_ weights: [Int]) -> Int? {
            let r = 11 - zip(v, weights).reduce(0) { $0 + $1.0 * $1.1 } % 11
            return r == 11 ? 0 : r == 10 ? nil : r
        }
        guard let k1 = check([3, 7, 6, 1, 8, 9, 4, 5, 2]), k1 == v[9],
              let k2 = check([5, 4, 3, 2, 7, 6, 5, 4, 3, 2]), k2 == v[10] else { return false }
        return true
    }

    /// DDMMYY, a century sign, three digits and a check character, from `at`: the end, or nil.
    private static func finnishIDEnd(_ b: [UInt8], at i: Int) -> Int? {
        guard i + 11 <= b.count, b[i..<(i + 6)].allSatisfy(isDigit), "+-ABCDEFUVWXY".utf8.contains(b[i + 6]),
              b[(i + 7)..<(i + 10)].allSatisfy(isDigit), i + 11 == b.count || !isAlphanumeric(b[i + 11]),
              danishDate(b[i..<(i + 6)]) else { return nil }
        let number = value(b[i..<(i + 6)]) * 1000 + value(b[(i + 7)..<(i + 10)])
        let checks = Array("0123456789ABCDEFHJKLMNPRSTUVWXY".utf8)
        return b[i + 10] == checks[number % 31] ? i + 11 : nil
    }

    /// Counts the digits of the stretch a string's bytes are in, to rule out most strings before
    /// anything is copied. A stretch is digits joined by single bytes that can sit inside a finding
    /// (a space, `-` or `+` in a group, a Finnish century sign); any other byte starts a new one.
    /// Every finding above has 9 or more digits in one stretch (a Finnish id 9, the other ids and
    /// card numbers 10 or more), or 8 after a `+` (a phone number). Digits right after a letter
    /// are part of a word or an id, which `redactDigitGroups` passes over, and count for nothing:
    /// a payment order's GUID (`ca11ed00-0000-4000-…`) and a timestamp (`2026-11-27T16:50:10Z`)
    /// are ruled out here.
    struct DigitStretch {
        private var digits = 0
        /// Digits the current stretch needs: 8 when it began right after a `+`.
        private var needed = 9
        private var afterDigit = false
        private var afterPlus = false
        /// The byte before was a letter that joined nothing.
        private var afterLetter = false
        /// In a run of digits that began right after such a letter.
        private var inWord = false

        /// Takes the next byte; true once the current stretch holds the digits it needs.
        mutating func take(_ c: UInt8) -> Bool {
            if isDigit(c) {
                if digits == 0 {
                    if afterLetter { inWord = true; afterLetter = false }
                    if inWord { return false }
                    needed = afterPlus ? 8 : 9
                }
                digits += 1
                afterDigit = true
                afterPlus = false
                return digits >= needed
            }
            // A joiner keeps the count only if a digit follows it: the next byte decides.
            let joins = afterDigit && (c == 0x20 || c == 0x2D || c == 0x2B || (c >= 0x41 && c <= 0x46) || (c >= 0x55 && c <= 0x59))
            if !joins { digits = 0 }
            afterLetter = !joins && isLetter(c)
            afterPlus = c == 0x2B
            afterDigit = false
            inWord = false
            return false
        }
    }

    // MARK: Bytes

    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    static func isLetter(_ c: UInt8) -> Bool { (c | 0x20) >= 0x61 && (c | 0x20) <= 0x7A }
    static func isAlphanumeric(_ c: UInt8) -> Bool { isDigit(c) || isLetter(c) }
}
