import KassaCore

/// The simulator's ids, drawn from its seeded generator so they repeat run after run.
extension SeededRandom {
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
