/// SplitMix64: a small, fast generator whose output is fixed by its seed, so
/// simulator ids and fault draws repeat run after run.
struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func hex(bytes: Int) -> String {
        var out = ""
        var remaining = bytes
        while remaining > 0 {
            let word = next()
            let take = min(8, remaining)
            for i in 0..<take {
                let byte = UInt8((word >> (UInt64(i) * 8)) & 0xFF)
                out += String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
            }
            remaining -= take
        }
        return out
    }

    /// A version-4-shaped UUID string.
    mutating func uuid() -> String {
        let h = Array(hex(bytes: 16))
        return String(h[0..<8]) + "-" + String(h[8..<12]) + "-4" + String(h[13..<16]) + "-a" + String(h[17..<20]) + "-" + String(h[20..<32])
    }
}
