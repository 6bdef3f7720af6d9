import KassaCore
import Testing

@Suite("Client addresses: only the network is kept")
struct ClientAddressTests {
    @Test("IPv4 to its /24, IPv6 to its /48, a mapped IPv4 as IPv4; anything else redacted", arguments: [
        ("203.0.113.7", "203.0.113.0/24"), ("127.0.0.1", "127.0.0.0/24"), ("0.0.0.0", "0.0.0.0/24"),
        ("2001:db8:a:b::1", "2001:db8:a::/48"), ("2001:0DB8:000a:0:0:0:0:1", "2001:db8:a::/48"), ("::1", "0:0:0::/48"),
        ("fe80::1%eth0", "fe80:0:0::/48"), ("::ffff:203.0.113.7", "203.0.113.0/24"), ("::ffff:cb00:7107", "203.0.113.0/24"),
        ("", ""), ("256.1.1.1", "[redacted]"), ("1.2.3", "[redacted]"), ("1.2.3.4.5", "[redacted]"), ("01234.1.1.1", "[redacted]"),
        ("1::2::3", "[redacted]"), (":::", "[redacted]"), ("1:2:3:4:5:6:7:8:9", "[redacted]"), ("12345::", "[redacted]"), ("g::1", "[redacted]"),
        ("shop.example", "[redacted]"), ("+46701234567", "[redacted]"),
    ])
    func network(_ address: String, _ kept: String) {
        #expect(ClientAddress.network(address) == kept)
    }

    @Test("no address's host part survives")
    func hostPartGone() {
        var random = SeededRandom(seed: 7)
        for _ in 0..<2_000 {
            let parts = (0..<4).map { _ in Int(random.next() % 256) }
            let address = parts.map(String.init).joined(separator: ".")
            #expect(ClientAddress.network(address) == "\(parts[0]).\(parts[1]).\(parts[2]).0/24")
        }
    }
}
