/// The payment url helpers of seed 000, as pure functions: they check the
/// query and build the Android intent url and the iOS redirects. Every part
/// that reaches a URL or HTML is validated or encoded here.
public enum PaymentURLHelper {
    public static let androidAction = "com.swedbankpay.mobilesdk.VIEW_PAYMENTORDER"
    /// Longest query the helpers accept, in bytes.
    public static let maxQueryBytes = 2_048

    public enum Failure: Error, Equatable, Sendable {
        case invalid(parameter: String, reason: String)
    }

    /// Schemes that would turn the iOS fallback into an open redirect or script.
    static let forbiddenSchemes: Set<String> = ["http", "https", "javascript", "data", "file", "vbscript", "about", "blob",
                                                "ftp", "ws", "wss", "intent", "mailto", "tel", "sms"]

    /// A `Host` value: a DNS name or IPv4 address with an optional port.
    public static func isValidHost(_ host: String) -> Bool {
        guard !host.isEmpty, host.utf8.count <= 255 else { return false }
        let parts = host.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, !parts[0].isEmpty else { return false }
        if parts.count == 2 { guard let port = Int(parts[1]), (1...65535).contains(port) else { return false } }
        return parts[0].utf8.allSatisfy { isAlnum($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
            && !parts[0].hasPrefix("-") && !parts[0].hasPrefix(".")
    }

    /// An Android package name: dot-separated Java identifiers, at least two.
    public static func isValidPackage(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, name.utf8.count <= 255 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.utf8.first, isAlpha(first) || first == UInt8(ascii: "_") else { return false }
            return part.utf8.allSatisfy { isAlnum($0) || $0 == UInt8(ascii: "_") }
        }
    }

    /// An app's custom scheme (RFC 3986 scheme syntax), never a web or script scheme.
    public static func isValidCustomScheme(_ scheme: String) -> Bool {
        guard let first = scheme.utf8.first, isAlpha(first), scheme.utf8.count <= 64 else { return false }
        guard scheme.utf8.allSatisfy({ isAlnum($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") })
        else { return false }
        return !forbiddenSchemes.contains(scheme.lowercased())
    }

    /// A language tag such as `en-US`.
    public static func isValidLanguage(_ tag: String) -> Bool {
        !tag.isEmpty && tag.utf8.count <= 35 && tag.utf8.allSatisfy { isAlnum($0) || $0 == UInt8(ascii: "-") }
    }

    /// Checks the whole query: size, and no control characters anywhere (header injection).
    public static func checkQuery(_ query: [(name: String, value: String)]) throws(Failure) {
        let size = query.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 }
        guard size <= maxQueryBytes else { throw .invalid(parameter: "query", reason: "longer than \(maxQueryBytes) bytes") }
        for (name, value) in query where (name + value).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw .invalid(parameter: name, reason: "holds a control character")
        }
    }

    /// `name=value&…` with every byte outside the unreserved set percent-encoded.
    public static func encodeQuery(_ query: [(name: String, value: String)]) -> String {
        query.map { percentEncode($0.name) + "=" + percentEncode($0.value) }.joined(separator: "&")
    }

    public static func percentEncode(_ s: String) -> String {
        percentEncode(s) { !isUnreserved($0) }
    }

    /// `s` with every byte `encodes` picks written `%XX` (upper-case hex).
    static func percentEncode(_ s: String, where encodes: (UInt8) -> Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in s.utf8 {
            if encodes(b) {
                out.append(UInt8(ascii: "%")); out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 0xF)])
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func htmlEscape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    /// `intent://host/path?query#Intent;scheme=…;action=…;package=…;end;`.
    /// The Android SDK compares the returning URL with its paymentUrl as a
    /// string, so the query must come back exactly as the SDK wrote it; the
    /// edge only has the decoded parameters, so they are encoded again the way
    /// the SDK's OkHttp `addQueryParameter` encodes them.
    public static func androidIntentURL(scheme: String, host: String, path: String, query: [(name: String, value: String)],
                                        package: String) -> String {
        let q = query.map { okHttpQueryComponent($0.name) + "=" + okHttpQueryComponent($0.value) }.joined(separator: "&")
        return "intent://\(host)\(path)\(q.isEmpty ? "" : "?" + q)#Intent;scheme=\(scheme);action=\(androidAction);package=\(package);end;"
    }

    /// OkHttp's query component encoding (`HttpUrl.QUERY_COMPONENT_ENCODE_SET`,
    /// with `+` written as `%2B`): these bytes, controls and non-ASCII are
    /// percent-encoded with upper-case hex, everything else stays.
    static let okHttpQueryEncoded = Set(" !\"#$&'(),/:;<=>?@[]\\^`{|}~+%".utf8)

    public static func okHttpQueryComponent(_ s: String) -> String {
        percentEncode(s) { $0 < 0x20 || $0 >= 0x7F || okHttpQueryEncoded.contains($0) }
    }

    public static func androidPage(intentURL: String) -> String {
        let url = htmlEscape(intentURL)
        return """
        <!DOCTYPE html>
        <html>
        <head>
        <meta charset="utf-8">
        <title>Swedbank Pay Payment</title>
        <meta name="viewport" content="width=device-width">
        <meta http-equiv="refresh" content="0;url=\(url)">
        </head>
        <body>
        <p><a href="\(url)">Back to app</a></p>
        </body>
        </html>
        """
    }

    /// Where the iOS helper redirects: the trampoline (with `fallback=true`
    /// added to the target), or with `fallback=true` the app's custom scheme.
    public static func iosRedirect(host: String, path: String, query: [(name: String, value: String)],
                                   trampolineURL: String) throws(Failure) -> String {
        func value(_ name: String) -> String? { query.first(where: { $0.name == name })?.value }
        guard let scheme = value("scheme") else { throw .invalid(parameter: "scheme", reason: "is required") }
        guard isValidCustomScheme(scheme) else {
            throw .invalid(parameter: "scheme", reason: "must be the app's own custom scheme, not a web or script scheme")
        }
        guard let language = value("language") else { throw .invalid(parameter: "language", reason: "is required") }
        guard isValidLanguage(language) else { throw .invalid(parameter: "language", reason: "must be a language tag such as en-US") }
        let app = value("app")
        if let app, app.count > 100 { throw .invalid(parameter: "app", reason: "must be at most 100 characters") }
        let fallback = value("fallback")
        if let fallback, fallback != "true" && fallback != "false" {
            throw .invalid(parameter: "fallback", reason: "must be true or false")
        }
        let q = encodeQuery(query)
        if fallback == "true" {
            return "\(scheme)://\(host)\(path)?\(q)"
        }
        let targetQuery = query.filter { $0.name != "fallback" } + [(name: "fallback", value: "true")]
        let target = "https://\(host)\(path)?\(encodeQuery(targetQuery))"
        var location = trampolineURL + "?target=" + percentEncode(target) + "&language=" + percentEncode(language)
        if let app { location += "&app=" + percentEncode(app) }
        return location
    }

    /// An id Kassa made: hex digits only, so it is safe in paths and queries.
    public static func isSafeID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// RFC 3986's unreserved bytes (letters, digits, `-._~`): what a URL carries as written.
    /// Inlinable: the upstream allow-list check runs it on every byte of every href.
    @inlinable
    public static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): return true
        default: return false
        }
    }

    static func isAlpha(_ b: UInt8) -> Bool { (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) }
    static func isAlnum(_ b: UInt8) -> Bool { isAlpha(b) || (0x30...0x39).contains(b) }
}
