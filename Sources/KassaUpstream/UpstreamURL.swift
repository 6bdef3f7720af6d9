import CCurl

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

    public init(scheme: String, host: String, path: String) {
        self.scheme = scheme
        self.host = host
        self.path = path
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
    }

    private static func part(_ handle: OpaquePointer, _ which: CURLUPart) -> String? {
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &text, 0) == CURLUE_OK, let text else { return nil }
        defer { curl_free(text) }
        return String(cString: text)
    }
}
