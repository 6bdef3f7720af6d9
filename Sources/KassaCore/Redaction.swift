/// The one place that decides what must never reach a log line or the event
/// log: secrets are replaced, personal data is cut to a searchable suffix.
///
/// ```swift
/// Redaction.redact(["msisdn": "+46739000001", "token": "abc"])
/// // ["msisdn": "…0001", "token": "[redacted]"]
/// ```
public enum Redaction {
    public static let placeholder = "[redacted]"

    /// Member names (compared lower-cased) whose values are secrets.
    static let secretKeys: Set<String> = [
        "token", "clienttoken", "accesstoken", "paymenttoken", "authorization", "apikey", "api-key",
        "your-api-key", "x-api-key", "admintoken", "password", "secret", "cvc", "cvv", "cardnumber", "pan",
        "expirydate", "expirymonth", "expiryyear", "recurrencetoken", "unscheduledtoken",
    ]
    /// Member names whose values are personal data kept only as a suffix.
    static let suffixKeys: Set<String> = ["msisdn", "phone", "phonenumber", "mobilenumber"]

    public static func isSecretKey(_ key: String) -> Bool { secretKeys.contains(key.lowercased()) }

    /// Keeps the last four characters of a personal value so support can still search for it.
    public static func suffix(_ value: String, keep: Int = 4) -> String {
        guard value.count > keep else { return placeholder }
        return "…" + value.suffix(keep)
    }

    public static func redact(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let object):
            var out: [String: JSONValue] = [:]
            for (key, member) in object {
                let lower = key.lowercased()
                if secretKeys.contains(lower) {
                    out[key] = .string(placeholder)
                } else if suffixKeys.contains(lower), case .string(let s) = member {
                    out[key] = .string(suffix(s))
                } else {
                    out[key] = redact(member)
                }
            }
            return .object(out)
        case .array(let array):
            return .array(array.map(redact))
        case .string(let s):
            return .string(redactTokens(redactURLQuery(s)))
        default:
            return value
        }
    }

    /// Secrets also travel inside URLs (`?token=…`): their values are replaced.
    public static func redactURLQuery(_ s: String) -> String {
        guard s.contains("?") || s.contains("&") else { return s }
        var result = ""
        var rest = Substring(s)
        while let eq = rest.firstIndex(of: "=") {
            let nameStart = rest[..<eq].lastIndex(where: { $0 == "?" || $0 == "&" || $0 == ";" }).map { rest.index(after: $0) }
            let name = nameStart.map { rest[$0..<eq] } ?? ""
            result += rest[...eq]
            let afterEq = rest.index(after: eq)
            let valueEnd = rest[afterEq...].firstIndex(where: { $0 == "&" || $0 == "#" || $0 == ";" }) ?? rest.endIndex
            let value = rest[afterEq..<valueEnd]
            if nameStart != nil, isSecretKey(String(name)) {
                result += placeholder
            } else if nameStart != nil, suffixKeys.contains(name.lowercased()) {
                result += suffix(String(value))
            } else {
                result += value
            }
            rest = rest[valueEnd...]
        }
        return result + rest
    }

    /// Runs of 40 or more hex digits are tokens (Swedbank Pay session tokens
    /// sit in URL paths, client tokens are 48): only their last 6 digits stay.
    /// Kassa's own ids are 32 digits and stay searchable.
    public static func redactTokens(_ s: String) -> String {
        var out = ""
        var run = ""
        func flush() {
            out += run.count >= 40 ? "…" + run.suffix(6) : run
            run = ""
        }
        for c in s {
            if c.isHexDigit && c.isASCII { run.append(c) } else { flush(); out.append(c) }
        }
        flush()
        return out
    }

    /// Header values that are credentials.
    public static func redactHeader(name: String, value: String) -> String {
        let lower = name.lowercased()
        if lower == "authorization" || lower == "cookie" || lower == "set-cookie" || secretKeys.contains(lower) {
            return placeholder
        }
        return value
    }
}
