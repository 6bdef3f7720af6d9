/// Random tokens and constant-time comparison for secrets.
public enum Secrets {
    /// `bytes` random bytes from the system's cryptographic source, as lower-case hex.
    public static func randomHex(bytes: Int = 16) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes * 2)
        for _ in 0..<bytes {
            let b = UInt8.random(in: 0...255, using: &generator)
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
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
