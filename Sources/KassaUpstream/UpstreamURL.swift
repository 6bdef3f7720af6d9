import CCurl
import KassaCore

/// An upstream URL's parts as libcurl reads them: the allow-list check and the event log use
/// the same parser as the request itself, so the host checked is the host connected to (a
/// second parser could read `http://allowed@evil/` or a backslash differently), and a URL is
/// parsed in C once instead of through Foundation two or three times a call.
public struct UpstreamURL: Sendable, Equatable {
    /// Lowercased.
    public let scheme: String
    /// Lowercased; an IPv6 address without its brackets.
    public let host: String
    /// Percent-encoded as given; "/" when the URL has none.
    public var path: String
    /// The port connected to: the URL's, or its scheme's default.
    public let port: Int
    /// `scheme://host:port`, the port always written: what an href must share with the
    /// configured upstream, and what a circuit breaker is kept for. Written once, when the URL
    /// is read: each call asks for it twice or more, and an href read by `PlainHrefReader`
    /// shares its known origin's.
    public let origin: String

    public init(scheme: String, host: String, path: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.path = path
        self.port = port
        origin = Self.origin(scheme: scheme, host: host, port: port)
    }

    private static func origin(scheme: String, host: String, port: Int) -> String {
        "\(scheme)://" + URLAuthority.of(host: host, port: port)
    }

    /// Nil when libcurl does not take it as an absolute URL with a host.
    public init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK,
              let scheme = Self.part(handle, CURLUPART_SCHEME), let host = Self.part(handle, CURLUPART_HOST), !host.isEmpty
        else { return nil }
        self.scheme = scheme.lowercased()
        let bracketed = host.hasPrefix("[") && host.hasSuffix("]")
        self.host = (bracketed ? String(host.dropFirst().dropLast()) : host).lowercased()
        self.path = Self.part(handle, CURLUPART_PATH) ?? "/"
        guard let port = Self.part(handle, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)).flatMap({ Int($0) }) else { return nil }
        self.port = port
        origin = Self.origin(scheme: self.scheme, host: self.host, port: port)
    }

    private static func part(_ handle: OpaquePointer, _ which: CURLUPart, flags: UInt32 = 0) -> String? {
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &text, flags) == CURLUE_OK, let text else { return nil }
        defer { curl_free(text) }
        return String(cString: text)
    }
}

/// Reads the hrefs of known origins that libcurl would read exactly as written, without libcurl:
/// `scheme://host/` or `scheme://host:port/` as the origin is written, then a path of letters,
/// digits, `-_.~/` with no segment that is empty or starts with a dot, then at most a query of
/// the same and `=&`. Its authority ends at that first `/`, so the host libcurl would connect to
/// is the origin's; and libcurl leaves such a path as it is. Any other href (case, userinfo,
/// percent-escapes, a fragment, dot segments) is nil here, for libcurl to read. Every upstream
/// call and beacon has its href checked against the allowed origins: libcurl's parse took ≈ 7
/// allocations each time.
public struct PlainHrefReader: Sendable {
    private let prefixes: [(bytes: [UInt8], url: UpstreamURL)]

    /// `origins`: each as `UpstreamURL` (its path is not used).
    public init(origins: [UpstreamURL]) {
        var prefixes: [(bytes: [UInt8], url: UpstreamURL)] = []
        for origin in origins where !origin.host.contains(":") && !origin.host.isEmpty {
            let defaultPort = (origin.scheme == "https" && origin.port == 443) || (origin.scheme == "http" && origin.port == 80)
            if defaultPort { prefixes.append((Array("\(origin.scheme)://\(origin.host)/".utf8), origin)) }
            prefixes.append((Array("\(origin.scheme)://\(origin.host):\(origin.port)/".utf8), origin))
        }
        self.prefixes = prefixes
    }

    public func read(_ href: String) -> UpstreamURL? {
        var href = href
        return href.withUTF8 { bytes -> UpstreamURL? in
            for prefix in prefixes where bytes.count >= prefix.bytes.count && bytes.starts(with: prefix.bytes) {
                guard let pathEnd = Self.plainPathEnd(bytes, from: prefix.bytes.count - 1) else { return nil }
                var url = prefix.url
                url.path = String(decoding: UnsafeBufferPointer(rebasing: bytes[(prefix.bytes.count - 1)..<pathEnd]), as: UTF8.self)
                return url
            }
            return nil
        }
    }

    /// Where the path starting at `start` (its `/`) ends, when it and the query after it are plain.
    static func plainPathEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        let isPlain = PaymentURLHelper.isUnreserved
        var i = start
        while i < bytes.count, bytes[i] != UInt8(ascii: "?") {
            let c = bytes[i]
            if c == UInt8(ascii: "/") {
                // An empty segment, or one that starts with a dot (`.`, `..`, `.x`): not plain.
                if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "/") || bytes[i + 1] == UInt8(ascii: ".") { return nil }
            } else if !isPlain(c) {
                return nil
            }
            i += 1
        }
        let pathEnd = i
        while i < bytes.count {
            let c = bytes[i]
            guard isPlain(c) || c == UInt8(ascii: "/") || c == UInt8(ascii: "?") && i == pathEnd
                    || c == UInt8(ascii: "=") || c == UInt8(ascii: "&") else { return nil }
            i += 1
        }
        return pathEnd
    }
}
