import Synchronization

/// W3C Trace Context (`traceparent: 00-<trace-id>-<parent-id>-<flags>`):
/// accepted from clients, sent upstream, and kept on every event as `trace_id`.
public enum TraceContext {
    /// The trace id of a valid `traceparent` header, else nil.
    public static func traceID(fromTraceparent header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.trimmingWhitespace.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[0] != "ff", parts[1].count == 32, parts[2].count == 16, parts[3].count == 2,
              parts.allSatisfy({ $0.utf8.allSatisfy(isLowerHex) }),
              !parts[1].allSatisfy({ $0 == "0" }), !parts[2].allSatisfy({ $0 == "0" }) else { return nil }
        return String(parts[1])
    }

    /// The parent (span) id of a valid `traceparent` header, else nil.
    public static func parentID(fromTraceparent header: String?) -> String? {
        guard traceID(fromTraceparent: header) != nil, let header else { return nil }
        return String(header.trimmingWhitespace.split(separator: "-")[2])
    }

    /// A fresh 128-bit trace id.
    public static func newTraceID() -> String { UniqueID.hex(bytes: 16) }

    /// A fresh 64-bit span (parent) id.
    public static func newSpanID() -> String { UniqueID.hex(bytes: 8) }

    /// The header for a call made on behalf of `traceID`, with a new span id.
    public static func traceparent(traceID: String) -> String {
        // At its final size at once (an interpolation regrew it on the way).
        var header = ""
        header.reserveCapacity(55)
        header += "00-"
        header += traceID
        header += "-"
        header += newSpanID()
        header += "-01"
        return header
    }

    // By bytes, not Characters: every upstream exchange checks its session's trace id.
    public static func isTraceID(_ s: String) -> Bool { s.utf8.count == 32 && s.utf8.allSatisfy(isLowerHex) }

    public static func isSpanID(_ s: String) -> Bool {
        s.utf8.count == 16 && s.utf8.allSatisfy(isLowerHex) && !s.utf8.allSatisfy { $0 == UInt8(ascii: "0") }
    }

    static func isLowerHex(_ c: UInt8) -> Bool { c &- 0x30 < 10 || c &- 0x61 < 6 }
}

extension String {
    var trimmingWhitespace: Substring {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map { index(after: $0) } ?? endIndex
        return self[start..<max(start, end)]
    }
}

/// Ids that must be unique but are not secrets (request, trace and span ids): a SplitMix64
/// sequence over a counter, from a seed drawn once from the system's generator. An id costs
/// no system call (a request drew three before); the mix is a bijection of the counter, so no
/// id repeats within a process, and the seed keeps processes apart.
public enum UniqueID {
    private static let seed: UInt64 = { var system = SystemRandomNumberGenerator(); return system.next() }()
    private static let counter = Atomic<UInt64>(0)

    /// `bytes` bytes as lower-case hex, never all zeros (W3C refuses such ids).
    public static func hex(bytes: Int) -> String {
        Secrets.hex(bytes: bytes) {
            let word = SeededRandom.mix(seed &+ counter.add(1, ordering: .relaxed).newValue &* SeededRandom.increment)
            return word == 0 ? 1 : word
        }
    }
}
