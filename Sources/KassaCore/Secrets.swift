#if canImport(Glibc)
import Glibc
#endif

/// Random tokens and constant-time comparison for secrets.
public enum Secrets {
    /// `bytes` random bytes from the system's cryptographic source, as lower-case hex.
    public static func randomHex(bytes: Int = 16) -> String { hexID(timeMs: nil, randomBytes: bytes) }

    /// The time in milliseconds as 10 hex digits, then `randomBytes` random bytes as hex: as unique
    /// and unguessable as the random part, and in creation order, so that an index on such ids
    /// takes each new one where the newest are instead of rewriting a page anywhere in it. (The
    /// digits are the time's low 40 bits: the order starts over once in 35 years, next in 2039.)
    public static func timeOrderedHex(nowMs: Int64, randomBytes: Int) -> String { hexID(timeMs: nowMs, randomBytes: randomBytes) }

    /// Written into the string's own storage, the random bytes drawn in one system call: a payee
    /// reference and a session id are made for every payment.
    private static func hexID(timeMs: Int64?, randomBytes: Int) -> String {
        let random = max(randomBytes, 0), timeDigits = timeMs == nil ? 0 : 10
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(random, 1)) { drawn in
            fillRandom(UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(drawn)[..<random]))
            return String(unsafeUninitializedCapacity: timeDigits + random * 2) { out in
                if let timeMs {
                    for k in 0..<10 { out[k] = hexDigit(UInt8(truncatingIfNeeded: timeMs >> (4 * (9 - k))) & 0xF) }
                }
                writeHex(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(drawn)[..<random]), into: out, at: timeDigits)
                return timeDigits + random * 2
            }
        }
    }

    /// The system's cryptographic source, all of `buffer` in one call: glibc's `arc4random_buf`
    /// reads the kernel's `getrandom`, as `SystemRandomNumberGenerator` does eight bytes at a time.
    private static func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let start = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(Glibc)
        arc4random_buf(start, buffer.count)
        #else
        var generator = SystemRandomNumberGenerator()
        for k in 0..<buffer.count { start.storeBytes(of: UInt8(truncatingIfNeeded: generator.next()), toByteOffset: k, as: UInt8.self) }
        #endif
    }

    /// `bytes` bytes drawn eight at a time from `next`, as lower-case hex.
    static func hex(bytes: Int, _ next: () -> UInt64) -> String {
        // Written into the string's own storage: one allocation (a request id is made per request).
        let count = max(bytes, 0) * 2
        return String(unsafeUninitializedCapacity: count) { out in
            var written = 0
            while written < count {
                var word = next()
                for _ in 0..<8 where written < count {
                    out[written] = hexDigit(UInt8(truncatingIfNeeded: word >> 4) & 0xF)
                    out[written + 1] = hexDigit(UInt8(truncatingIfNeeded: word) & 0xF)
                    written += 2
                    word >>= 8
                }
            }
            return count
        }
    }

    /// `bytes` as lower-case hex, two digits a byte, into `out` from `offset`.
    static func writeHex(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        for (k, byte) in bytes.enumerated() {
            out[offset + 2 * k] = hexDigit(byte >> 4)
            out[offset + 2 * k + 1] = hexDigit(byte & 0xF)
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }

    /// Compares without an early exit, so the time taken does not tell how
    /// much of a guess was right. Only the length may leak.
    public static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        // On the strings' own UTF-8 (no copies: this runs for every key on every keyed request).
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                // Lengths compared whole: a byte of their difference missed lengths 256 apart.
                var difference: UInt8 = x.count == y.count ? 0 : 1
                for i in 0..<max(x.count, y.count) {
                    difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
                }
                return difference == 0
            }
        }
    }

    /// True when `candidate` equals any of `keys`; every key is compared.
    public static func matchesAny(_ candidate: String, _ keys: [String]) -> Bool {
        var found = false
        for key in keys where constantTimeEquals(candidate, key) { found = true }
        return found
    }
}
