import KassaCore

/// Final text frames built here (RFC 6455 §5.2) so that several queued messages can leave
/// in one write: one send and one TCP segment for the peer instead of one per message.
/// libwebsockets frames single messages itself; the batch is written raw.
enum WebSocketFraming {
    /// Writes at most this many payload bytes at once.
    static let batchLimit = 64 * 1024

    /// Appends `payload` as one final text frame; with a `mask` (a client's frames must be
    /// masked) the payload is masked with it.
    static func appendText(_ payload: ArraySlice<UInt8>, to out: inout [UInt8], mask: UInt32? = nil) {
        let count = payload.count
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        out.append(0x81)  // FIN, text
        if count < 126 {
            out.append(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(count >> 8))
            out.append(UInt8(count & 0xFF))
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((UInt64(count) >> UInt64(shift)) & 0xFF)) }
        }
        guard let mask else {
            out.append(contentsOf: payload)
            return
        }
        let key = [UInt8(mask >> 24), UInt8((mask >> 16) & 0xFF), UInt8((mask >> 8) & 0xFF), UInt8(mask & 0xFF)]
        out.append(contentsOf: key)
        var i = 0
        for byte in payload {
            out.append(byte ^ key[i & 3])
            i += 1
        }
    }

    /// Masking keys for a client's frames (RFC 6455 §5.3): SplitMix64 seeded once from the
    /// system's generator, instead of a `getrandom` call per frame (a visible share of the
    /// load client's kernel time). The keys only have to be unpredictable to a peer's proxy.
    struct MaskKeys {
        private var random = SeededRandom()

        mutating func next() -> UInt32 { UInt32(truncatingIfNeeded: random.next() >> 16) }
    }
}
