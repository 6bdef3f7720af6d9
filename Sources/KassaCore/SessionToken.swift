import Crypto
import Foundation

/// A session's client token: `kt1.<key id>.<expiry>.<sealed>`.
///
/// `sealed` is ChaCha20-Poly1305 (swift-crypto) over `{"s": session id, "h": view-paymentsession
/// href}` with the prefix, key id and expiry as authenticated data, so the client never learns the
/// upstream href and cannot move the expiry. The key is derived from a cluster secret with HKDF; the
/// key id names which secret sealed it, so secrets can be rotated: the first seals, all open. Any
/// node with the secret can open a token and, for a session it has never seen, pick it up upstream.
public struct SessionToken: Sendable, Equatable {
    public static let version = "kt1"

    public var sessionID: String
    public var href: String
    /// Unix seconds after which the token is refused.
    public var expiresAt: Int64
    /// The client's device as given at creation, so a node that picks the session up sends the same.
    public var device: ClientDevice?
    /// The gateway's public base URL the session was created under (its 3-D Secure notification URL).
    public var publicBase: String?

    public init(sessionID: String, href: String, expiresAt: Int64, device: ClientDevice? = nil, publicBase: String? = nil) {
        self.sessionID = sessionID
        self.href = href
        self.expiresAt = expiresAt
        self.device = device
        self.publicBase = publicBase
    }

    /// The parts readable without a key: enough to refuse an old-format or expired token early.
    public struct Header: Sendable, Equatable {
        public var keyID: String
        public var expiresAt: Int64
    }

    public static func issue(sessionID: String, href: String, expiresAt: Int64, device: ClientDevice? = nil, publicBase: String? = nil,
                             keys: TokenKeys) -> String {
        let key = keys.sealing
        let head = "\(version).\(key.id).\(expiresAt)"
        var claims: [String: JSONValue] = ["s": .string(sessionID), "h": .string(href)]
        if let device { claims["c"] = device.json }
        if let publicBase { claims["b"] = .string(publicBase) }
        let payload = JSONValue.object(claims).bytes
        // Sealing with a fresh random nonce cannot fail for a 32-byte key.
        let box = try! ChaChaPoly.seal(payload, using: key.key, authenticating: Array(head.utf8))
        return head + "." + Base64URL.encode(Array(box.combined))
    }

    /// The header of a token in the current format, or nil.
    public static func header(_ token: String) -> Header? {
        parts(token).map(\.header)
    }

    /// What a token vouches for, or nil when no key of ours sealed it (expiry is not checked here).
    public static func open(_ token: String, keys: TokenKeys) -> SessionToken? {
        guard let parts = parts(token), let key = keys.key(id: parts.header.keyID),
              let combined = Base64URL.decode(String(Substring(parts.sealed))),
              let box = try? ChaChaPoly.SealedBox(combined: combined),
              let plain = try? ChaChaPoly.open(box, using: key, authenticating: Array(parts.head)),
              let payload = try? JSONValue.parse(Array(plain)),
              let id = payload["s"]?.stringValue, let href = payload["h"]?.stringValue else { return nil }
        let device = payload["c"].flatMap { try? ClientDevice.parse($0).get() }
        return SessionToken(sessionID: id, href: href, expiresAt: parts.header.expiresAt, device: device, publicBase: payload["b"]?.stringValue)
    }

    /// A token in the current format, cut at its dots: the authenticated head (prefix, key id and
    /// expiry), the header read from it, and the sealed part. Its dots are found on its contiguous
    /// UTF-8 bytes (a token is ASCII): cutting it by Characters, and then a generic split of its
    /// UTF-8 view, each cost more than the rest of a check, made several times an upgrade.
    static func parts(_ token: String) -> (head: Substring.UTF8View, header: Header, sealed: Substring.UTF8View)? {
        var token = token
        guard let (first, second, third) = token.withUTF8(dotOffsets) else { return nil }
        let utf8 = token.utf8
        func at(_ offset: Int) -> String.Index { utf8.index(utf8.startIndex, offsetBy: offset) }
        let keyID = utf8[at(first + 1)..<at(second)], expiry = utf8[at(second + 1)..<at(third)], sealed = utf8[at(third + 1)...]
        guard utf8[..<at(first)].elementsEqual(version.utf8), keyID.count == TokenKeys.keyIDLength,
              expiry.count <= 12, expiry.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let expiresAt = Int64(Substring(expiry)), sealed.count <= 8192 else { return nil }
        return (utf8[..<at(third)], Header(keyID: String(Substring(keyID)), expiresAt: expiresAt), sealed)
    }

    /// Where a token's three dots are; nil unless it has exactly three.
    private static func dotOffsets(_ bytes: UnsafeBufferPointer<UInt8>) -> (Int, Int, Int)? {
        let dot = UInt8(ascii: ".")
        guard let first = bytes.firstIndex(of: dot),
              let second = bytes[(first + 1)...].firstIndex(of: dot),
              let third = bytes[(second + 1)...].firstIndex(of: dot),
              !bytes[(third + 1)...].contains(dot) else { return nil }
        return (first, second, third)
    }
}

/// The keys client tokens are sealed with, derived from the cluster secrets.
public struct TokenKeys: Sendable {
    public struct Key: Sendable {
        public let id: String
        let key: SymmetricKey
        /// An HMAC already keyed with `key`: a tag copies it rather than keying one again (every
        /// session's notification URL carries a tag).
        let mac: HMAC<SHA256>

        init(id: String, key: SymmetricKey) {
            self.id = id
            self.key = key
            self.mac = HMAC(key: key)
        }
    }

    static let keyIDLength = 8
    /// The key new tokens are sealed with (the first secret's).
    public let sealing: Key
    let all: [Key]

    /// Why a secret is refused at start-up: too short, or too few distinct characters to be random.
    public static func weakness(of secret: String) -> String? {
        let bytes = Array(secret.utf8)
        if bytes.count < 32 { return "is \(bytes.count) bytes long; use at least 32 random bytes (e.g. 64 hex digits)" }
        if Set(bytes).count < 8 { return "has fewer than 8 distinct characters; use a random value" }
        return nil
    }

    public struct WeakSecret: Error, CustomStringConvertible {
        public let description: String
    }

    /// `secrets`: the first seals new tokens; every one opens tokens (rotation).
    public init(secrets: [String]) throws(WeakSecret) {
        let secrets = secrets.filter { !$0.isEmpty }
        guard !secrets.isEmpty else { throw WeakSecret(description: "the cluster secret is empty") }
        var keys: [Key] = []
        for (index, secret) in secrets.enumerated() {
            if let weakness = Self.weakness(of: secret) {
                throw WeakSecret(description: "cluster secret \(index + 1) \(weakness)")
            }
            let material = SymmetricKey(data: Array(secret.utf8))
            let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: material, salt: Array("kassa client token".utf8),
                                              info: Array("kt1 seal".utf8), outputByteCount: 32)
            let idBytes = HKDF<SHA256>.deriveKey(inputKeyMaterial: material, salt: Array("kassa client token".utf8),
                                                  info: Array("kt1 key id".utf8), outputByteCount: Self.keyIDLength / 2)
            let id = idBytes.withUnsafeBytes { Hashing.hex(Array($0)) }
            keys.append(Key(id: id, key: key))
        }
        sealing = keys[0]
        all = keys
    }

    func key(id: String) -> SymmetricKey? { all.first { $0.id == id }?.key }

    /// A MAC of `text` with the sealing key, as 32 hex digits: it makes a URL unguessable
    /// (a session's 3-D Secure notification URL) without storing anything.
    public func tag(_ text: String) -> String { Self.tag(text, with: sealing) }

    /// True when any key of ours made `tag` for `text` (rotation); compared in constant time.
    public func isValidTag(_ tag: String, for text: String) -> Bool {
        guard tag.utf8.count == 32 else { return false }
        var valid = false
        for key in all { valid = Secrets.constantTimeEquals(Self.tag(text, with: key), tag) || valid }
        return valid
    }

    static func tag(_ text: String, with key: Key) -> String {
        var mac = key.mac   // the keyed state is copied on write: `key.mac` stays as it was
        mac.update(data: Array(text.utf8))
        return String(Hashing.hex(Array(mac.finalize())).prefix(32))
    }

    /// `<key id>.<sealed>`: a value kept at rest that may describe a person (a client's
    /// device), sealed with the token key; `purpose` is authenticated, so a value sealed for
    /// one use opens for no other (and never as a token).
    public func seal(_ plain: [UInt8], purpose: String) -> String {
        let box = try! ChaChaPoly.seal(plain, using: sealing.key, authenticating: Self.atRest(purpose))
        return sealing.id + "." + Base64URL.encode(Array(box.combined))
    }

    /// The plain bytes, or nil when no key of ours sealed it for this purpose.
    public func open(_ sealed: String, purpose: String) -> [UInt8]? {
        let parts = sealed.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let key = key(id: String(parts[0])), let combined = Base64URL.decode(String(parts[1])),
              let box = try? ChaChaPoly.SealedBox(combined: combined),
              let plain = try? ChaChaPoly.open(box, using: key, authenticating: Self.atRest(purpose)) else { return nil }
        return Array(plain)
    }

    /// What a value sealed at rest is authenticated with: its purpose, apart from tokens.
    static func atRest(_ purpose: String) -> [UInt8] { Array("kassa at rest: \(purpose)".utf8) }
}

/// Digests from swift-crypto, as hex.
public enum Hashing {
    public static func sha256Hex(_ text: String) -> String {
        hex(Array(SHA256.hash(data: Array(text.utf8))))
    }

    /// `bytes` as lower-case hex.
    public static func hex(_ bytes: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            bytes.withUnsafeBytes { Secrets.writeHex($0, into: out, at: 0) }
            return bytes.count * 2
        }
    }
}

/// Base64 with the URL alphabet and no padding (RFC 4648 §5).
public enum Base64URL {
    // Foundation's Base64, with the alphabet swapped byte by byte: mapped as Characters, a
    // token's text took more time than its sealing (every session issues one, every stream opens one).
    public static func encode(_ bytes: [UInt8]) -> String {
        var text = Array(Data(bytes).base64EncodedData())
        while text.last == UInt8(ascii: "=") { text.removeLast() }
        for i in text.indices {
            if text[i] == UInt8(ascii: "+") { text[i] = UInt8(ascii: "-") } else if text[i] == UInt8(ascii: "/") { text[i] = UInt8(ascii: "_") }
        }
        return String(decoding: text, as: UTF8.self)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var standard = Array(text.utf8)
        guard standard.count % 4 != 1 else { return nil }
        for i in standard.indices {
            switch standard[i] {
            case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): return nil
            case UInt8(ascii: "-"): standard[i] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): standard[i] = UInt8(ascii: "/")
            default: break
            }
        }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(standard)).map(Array.init)
    }
}
