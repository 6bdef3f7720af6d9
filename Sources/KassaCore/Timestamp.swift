/// UTC timestamps as the API writes them, `2026-11-23T00:36:01.123Z`: written and
/// read by hand because every pushed frame carries one (Foundation's formatter
/// was a visible share of a push's cost).
public enum Timestamp {
    /// `ms` since 1970 as ISO 8601 with milliseconds, in UTC.
    public static func iso8601(ms: Int64) -> String { write(units: ms, perSecond: 1_000, fractionDigits: 3) }

    /// `us` since 1970 as ISO 8601 with microseconds, in UTC: a live push's `at`, so a client
    /// can time a push to the microsecond (its millisecond is the one the event log keeps).
    public static func iso8601(us: Int64) -> String { write(units: us, perSecond: 1_000_000, fractionDigits: 6) }

    private static func write(units: Int64, perSecond: Int64, fractionDigits: Int) -> String {
        let perDay = 86_400 * perSecond
        let days = units >= 0 ? units / perDay : (units - perDay + 1) / perDay
        let ofDay = units - days * perDay
        let secondOfDay = ofDay / perSecond
        let (year, month, day) = civil(fromDays: days)
        var out = [UInt8]()
        out.reserveCapacity(27)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            while divisor > 0 {
                out.append(UInt8(48 + (v / divisor) % 10))
                v %= divisor
                divisor /= 10
            }
        }
        digits(year, 4); out.append(45); digits(month, 2); out.append(45); digits(day, 2)
        out.append(84)
        digits(secondOfDay / 3_600, 2); out.append(58)
        digits(secondOfDay / 60 % 60, 2); out.append(58)
        digits(secondOfDay % 60, 2); out.append(46)
        digits(ofDay % perSecond, fractionDigits); out.append(90)
        return String(decoding: out, as: UTF8.self)
    }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fff…]Z` (UTC only) as ms since 1970; nil for anything else.
    public static func parseISO8601(_ text: String) -> Int64? {
        parseISO8601Microseconds(text).map(milliseconds(fromMicroseconds:))
    }

    /// The millisecond a microsecond falls in (rounded down, before 1970 too).
    public static func milliseconds(fromMicroseconds us: Int64) -> Int64 { us >= 0 ? us / 1000 : (us - 999) / 1000 }

    /// The same, to the microsecond: digits past the sixth are dropped.
    public static func parseISO8601Microseconds(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20, b.last == 90, b[4] == 45, b[7] == 45, b[10] == 84, b[13] == 58, b[16] == 58 else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for i in range {
                guard (48...57).contains(b[i]) else { return nil }
                v = v * 10 + Int64(b[i] - 48)
            }
            return v
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var us: Int64 = 0
        if b.count > 20 {
            guard b[19] == 46, b.count > 21 else { return nil }
            // Microseconds from the first six digits; further digits must be digits, and are dropped.
            let fraction = 20..<(b.count - 1)
            let kept = 20..<min(26, b.count - 1)
            guard fraction.count <= 9, number(fraction) != nil, let f = number(kept) else { return nil }
            us = f * pow10(6 - kept.count)
        } else if b[19] != 90 {
            return nil
        }
        let days = daysFromCivil(year: year, month: month, day: day)
        return (((days * 24 + hour) * 60 + minute) * 60 + second) * 1_000_000 + us
    }

    private static func pow10(_ n: Int) -> Int64 { (0..<n).reduce(1) { r, _ in r * 10 } }

    // Howard Hinnant's civil-calendar algorithms (proleptic Gregorian).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
