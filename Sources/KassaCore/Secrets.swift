/// Random tokens and constant-time comparison for secrets.
public enum Secrets {
    /// `bytes` random bytes from the system's cryptographic source, as lower-case hex.
    public static func randomHex(bytes: Int = 16) -> String {
        var generator = SystemRandomNumberGenerator()
        // Eight bytes per draw: each draw is a system call.
        return hex(bytes: bytes) { generator.next() }
    }

    /// `bytes` bytes drawn eight at a time from `next`, as lower-case hex.
    static func hex(bytes: Int, _ next: () -> UInt64) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes * 2 + 16)
        while out.count < bytes * 2 {
            var word = next()
            for _ in 0..<8 {
                out.append(digits[Int(word >> 4 & 0xF)])
                out.append(digits[Int(word & 0xF)])
                word >>= 8
            }
        }
        return String(decoding: out.prefix(bytes * 2), as: UTF8.self)
    }

    /// Compares without an early exit, so the time taken does not tell how
    /// much of a guess was right. Only the length may leak.
    public static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count)
        for i in 0..<max(x.count, y.count) {
            let l = i < x.count ? x[i] : 0
            let r = i < y.count ? y[i] : 0
            difference |= l ^ r
        }
        return difference == 0
    }

    /// True when `candidate` equals any of `keys`; every key is compared.
    public static func matchesAny(_ candidate: String, _ keys: [String]) -> Bool {
        var found = false
        for key in keys where constantTimeEquals(candidate, key) { found = true }
        return found
    }
}
