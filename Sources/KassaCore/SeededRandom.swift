/// SplitMix64: a small, fast generator whose output is fixed by its seed. For what must repeat
/// run after run (the simulator's ids and fault draws, random tests) or only be unpredictable to
/// a peer (WebSocket masking keys, seeded once from the system); never for secrets.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// Seeded from the system's generator.
    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    public mutating func next() -> UInt64 {
        state &+= Self.increment
        return Self.mix(state)
    }

    static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// The output function: a bijection of 64-bit words.
    static func mix(_ x: UInt64) -> UInt64 {
        var z = x
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
