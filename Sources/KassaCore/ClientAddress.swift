/// A client's address as the event log keeps it: its network, not the host. An IP address is
/// personal data, and support needs only where a request came from (which network, the same
/// one as before); IPv4 keeps its /24 and IPv6 its /48, as analytics tools cut them.
public enum ClientAddress {
    /// `203.0.113.7` → `203.0.113.0/24`; `2001:db8:a:b::1` → `2001:db8:a::/48`;
    /// `::ffff:203.0.113.7` → `203.0.113.0/24`; "" stays ""; anything else `[redacted]`.
    public static func network(_ address: String) -> String {
        if address.isEmpty { return "" }
        // Read by bytes: it is done for every request the event log keeps.
        if let v4 = ipv4(address.utf8[...]) { return v4Network(v4.0, v4.1, v4.2) }
        guard let groups = ipv6(address) else { return "[redacted]" }
        if groups[0..<5].allSatisfy({ $0 == 0 }), groups[5] == 0xFFFF {   // IPv4-mapped
            return v4Network(Int(groups[6] >> 8), Int(groups[6] & 0xFF), Int(groups[7] >> 8))
        }
        return groups[0..<3].map { String($0, radix: 16) }.joined(separator: ":") + "::/48"
    }

    private static func v4Network(_ a: Int, _ b: Int, _ c: Int) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(18)
        for part in [a, b, c] {
            if part >= 100 { out.append(UInt8(0x30 + part / 100)) }
            if part >= 10 { out.append(UInt8(0x30 + part / 10 % 10)) }
            out.append(UInt8(0x30 + part % 10))
            out.append(UInt8(ascii: "."))
        }
        out.append(contentsOf: "0/24".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    /// Four decimal parts of 0–255, of one to three digits each.
    static func ipv4(_ text: Substring.UTF8View) -> (Int, Int, Int, Int)? {
        var parts = (0, 0, 0, 0), part = 0, digits = 0, count = 0
        for byte in text {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, count < 3 else { return nil }
                switch count { case 0: parts.0 = part; case 1: parts.1 = part; default: parts.2 = part }
                count += 1; part = 0; digits = 0
            } else if (0x30...0x39).contains(byte), digits < 3 {
                part = part * 10 + Int(byte - 0x30); digits += 1
                guard part <= 255 else { return nil }
            } else {
                return nil
            }
        }
        guard count == 3, digits > 0 else { return nil }
        parts.3 = part
        return parts
    }

    /// Eight 16-bit groups, with `::` and a dotted IPv4 tail read; a zone (`%eth0`) is dropped.
    static func ipv6(_ address: String) -> [UInt16]? {
        let text = address.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard text.contains(":") else { return nil }
        func groups(_ part: Substring) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, piece) in pieces.enumerated() {
                if i == pieces.count - 1, piece.contains("."), let v4 = ipv4(piece.utf8) {
                    out += [UInt16(v4.0 << 8 | v4.1), UInt16(v4.2 << 8 | v4.3)]
                } else if (1...4).contains(piece.utf8.count), let n = UInt16(piece, radix: 16) {
                    out.append(n)
                } else {
                    return nil
                }
            }
            return out
        }
        guard let gap = text.firstRange(of: "::") else {
            guard let all = groups(text), all.count == 8 else { return nil }
            return all
        }
        guard text[gap.upperBound...].firstRange(of: "::") == nil,
              let head = groups(text[..<gap.lowerBound]), let tail = groups(text[gap.upperBound...]),
              head.count + tail.count < 8 else { return nil }
        return head + [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
    }
}
