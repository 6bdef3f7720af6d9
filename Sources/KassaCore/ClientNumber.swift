/// Whole numbers a client writes as text (a query value, a cursor), read in one place: ASCII
/// digits only (no sign, no space), at most 19 of them, and inside the range the caller can do
/// arithmetic on without overflow. Anything else is nil, which callers answer with a 400 problem.
public enum ClientNumber {
    /// The end of year 9999 in milliseconds since 1970: the latest time a client may name.
    public static let maxTimeMs: Int64 = 253_402_300_799_999

    public static func whole(_ text: some StringProtocol, in range: ClosedRange<Int64>) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let value = Int64(text), range.contains(value) else { return nil }
        return value
    }

    /// Milliseconds since 1970 as digits, or an ISO 8601 UTC time (`2026-11-22T10:00:00Z`), up to `maxTimeMs`.
    public static func timeMs(_ text: String) -> Int64? {
        if let ms = whole(text, in: 0...maxTimeMs) { return ms }
        guard let ms = Timestamp.parseISO8601(text), (0...maxTimeMs).contains(ms) else { return nil }
        return ms
    }
}
