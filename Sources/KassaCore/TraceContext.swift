/// W3C Trace Context (`traceparent: 00-<trace-id>-<parent-id>-<flags>`):
/// accepted from clients, sent upstream, and kept on every event as `trace_id`.
public enum TraceContext {
    /// The trace id of a valid `traceparent` header, else nil.
    public static func traceID(fromTraceparent header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.trimmingWhitespace.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[0] != "ff", parts[1].count == 32, parts[2].count == 16, parts[3].count == 2,
              parts.allSatisfy({ $0.allSatisfy(isLowerHex) }),
              !parts[1].allSatisfy({ $0 == "0" }), !parts[2].allSatisfy({ $0 == "0" }) else { return nil }
        return String(parts[1])
    }

    /// The parent (span) id of a valid `traceparent` header, else nil.
    public static func parentID(fromTraceparent header: String?) -> String? {
        guard traceID(fromTraceparent: header) != nil, let header else { return nil }
        return String(header.trimmingWhitespace.split(separator: "-")[2])
    }

    /// A fresh 128-bit trace id.
    public static func newTraceID() -> String { Secrets.randomHex(bytes: 16) }

    /// The header for a call made on behalf of `traceID`, with a new span id.
    public static func traceparent(traceID: String) -> String {
        "00-\(traceID)-\(Secrets.randomHex(bytes: 8))-01"
    }

    public static func isTraceID(_ s: String) -> Bool { s.count == 32 && s.allSatisfy(isLowerHex) }

    public static func isSpanID(_ s: String) -> Bool { s.count == 16 && s.allSatisfy(isLowerHex) && !s.allSatisfy { $0 == "0" } }

    static func isLowerHex(_ c: Character) -> Bool { c.isASCII && (c.isNumber || ("a"..."f").contains(c)) }
}

extension String {
    var trimmingWhitespace: Substring {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map { index(after: $0) } ?? endIndex
        return self[start..<max(start, end)]
    }
}
