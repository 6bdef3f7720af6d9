import CCurl
import KassaCore

/// An upstream URL's parts as libcurl reads them: the allow-list check and the event log use
/// the same parser as the request itself, so the host checked is the host connected to (a
/// second parser could read `http://allowed@evil/` or a backslash differently), and a URL is
/// parsed in C once instead of through Foundation two or three times a call.
public struct UpstreamURL: Sendable, Equatable {
    /// Lowercased.
    public var scheme: String
    /// Lowercased; an IPv6 address without its brackets.
    public var host: String
    /// Percent-encoded as given; "/" when the URL has none.
    public var path: String
    /// The port connected to: the URL's, or its scheme's default.
    public var port: Int

    public init(scheme: String, host: String, path: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.path = path
        self.port = port
    }

    /// `scheme://host:port`, the port always written: what an href must share with the
    /// configured upstream, and what a circuit breaker is kept for.
    public var origin: String { "\(scheme)://" + URLAuthority.of(host: host, port: port) }

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
    }

    private static func part(_ handle: OpaquePointer, _ which: CURLUPart, flags: UInt32 = 0) -> String? {
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &text, flags) == CURLUE_OK, let text else { return nil }
        defer { curl_free(text) }
        return String(cString: text)
    }
}
