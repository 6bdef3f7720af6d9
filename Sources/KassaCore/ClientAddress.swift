/// A client's address as the event log keeps it: its network, not the host. An IP address is
/// personal data, and support needs only where a request came from (which network, the same
/// one as before); IPv4 keeps its /24 and IPv6 its /48, as analytics tools cut them.
public enum ClientAddress {
    /// `203.0.113.7` → `203.0.113.0/24`; `2001:db8:a:b::1` → `2001:db8:a::/48`;
    /// `::ffff:203.0.113.7` → `203.0.113.0/24`; "" stays ""; anything else `[redacted]`.
    public static func network(_ address: String) -> String {
        if address.isEmpty { return "" }
        if let v4 = ipv4(Substring(address)) { return "\(v4[0]).\(v4[1]).\(v4[2]).0/24" }
        guard let groups = ipv6(address) else { return "[redacted]" }
        if groups[0..<5].allSatisfy({ $0 == 0 }), groups[5] == 0xFFFF {   // IPv4-mapped
            return "\(groups[6] >> 8).\(groups[6] & 0xFF).\(groups[7] >> 8).0/24"
        }
        return groups[0..<3].map { String($0, radix: 16) }.joined(separator: ":") + "::/48"
    }

    /// Four decimal parts of 0–255.
    static func ipv4(_ text: Substring) -> [Int]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let numbers = parts.compactMap { part -> Int? in
            guard (1...3).contains(part.utf8.count), part.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return Int(part).flatMap { $0 <= 255 ? $0 : nil }
        }
        return numbers.count == 4 ? numbers : nil
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
                if i == pieces.count - 1, piece.contains("."), let v4 = ipv4(piece) {
                    out += [UInt16(v4[0] << 8 | v4[1]), UInt16(v4[2] << 8 | v4[3])]
                } else if (1...4).contains(piece.utf8.count), let n = UInt16(piece, radix: 16) {
                    out.append(n)
                } else {
                    return nil
                }
            }
            return out
        }
        let halves = text.components(separatedBy: "::")
        switch halves.count {
        case 1:
            guard let all = groups(Substring(halves[0])), all.count == 8 else { return nil }
            return all
        case 2:
            guard let head = groups(Substring(halves[0])), let tail = groups(Substring(halves[1])), head.count + tail.count < 8 else { return nil }
            return head + [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        default:
            return nil
        }
    }
}
