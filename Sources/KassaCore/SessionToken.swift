/// A session's client token: `<nonce>.<sealed payload>.<mac>`. The payload names
/// the session and its view-paymentsession href; it is encrypted (a keystream of
/// HMAC-SHA-256 blocks under the cluster secret and a 128-bit random nonce, as in
/// counter mode) so the client never learns the upstream href, then MACed
/// (HMAC-SHA-256, encrypt-then-MAC). Any node with the secret can check it and,
/// for a session it has never seen, pick the session up from upstream.
public struct SessionToken: Sendable, Equatable {
    public var sessionID: String
    public var href: String

    public init(sessionID: String, href: String) {
        self.sessionID = sessionID
        self.href = href
    }

    public static func issue(sessionID: String, href: String, secret: String) -> String {
        let nonce = Secrets.randomHex(bytes: 16)
        let payload = JSONValue.object(["s": .string(sessionID), "h": .string(href)]).bytes
        let sealed = nonce + "." + Base64URL.encode(xor(payload, keystream(secret: secret, nonce: nonce, count: payload.count)))
        return sealed + "." + HMACSHA256.hex(key: "mac:" + secret, message: sealed)
    }

    /// The session and href a token vouches for, or nil when it is not one of ours.
    public static func verify(_ token: String, secret: String) -> SessionToken? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 32, parts[1].count <= 4096 else { return nil }
        let sealed = parts[0] + "." + parts[1]
        guard Secrets.constantTimeEquals(String(parts[2]), HMACSHA256.hex(key: "mac:" + secret, message: String(sealed))),
              let cipher = Base64URL.decode(String(parts[1])) else { return nil }
        let plain = xor(cipher, keystream(secret: secret, nonce: String(parts[0]), count: cipher.count))
        guard let payload = try? JSONValue.parse(plain), let id = payload["s"]?.stringValue, let href = payload["h"]?.stringValue
        else { return nil }
        return SessionToken(sessionID: id, href: href)
    }

    static func keystream(secret: String, nonce: String, count: Int) -> [UInt8] {
        var out: [UInt8] = []
        var block = 0
        while out.count < count {
            out += HMACSHA256.mac(key: Array(("enc:" + secret).utf8), message: Array("\(nonce).\(block)".utf8))
            block += 1
        }
        return Array(out.prefix(count))
    }

    static func xor(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] { zip(a, b).map { $0 ^ $1 } }
}

/// Base64 with the URL alphabet and no padding (RFC 4648 §5).
public enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 4 / 3 + 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            if i + 1 < bytes.count { out.append(alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)]) }
            if i + 2 < bytes.count { out.append(alphabet[Int(b2 & 0x3F)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for c in text.utf8 {
            guard let v = alphabet.firstIndex(of: c) else { return nil }
            values.append(UInt8(v))
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let n = min(4, values.count - i)
            let v0 = values[i], v1 = values[i + 1], v2 = n > 2 ? values[i + 2] : 0, v3 = n > 3 ? values[i + 3] : 0
            out.append(v0 << 2 | v1 >> 4)
            if n > 2 { out.append((v1 & 0x0F) << 4 | v2 >> 2) }
            if n > 3 { out.append((v2 & 0x03) << 6 | v3) }
            i += 4
        }
        return out
    }
}
