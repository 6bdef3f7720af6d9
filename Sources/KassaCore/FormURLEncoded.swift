/// `application/x-www-form-urlencoded` bodies, as a browser posts a form (WHATWG URL,
/// "application/x-www-form-urlencoded parsing"): `+` is a space, `%XX` a byte, and a
/// malformed escape stays as it was.
public enum FormURLEncoded {
    public static func decode(_ bytes: [UInt8]) -> [(name: String, value: String)] {
        bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
        }
    }

    public static func value(_ name: String, in bytes: [UInt8]) -> String? {
        decode(bytes).first { $0.name == name }?.value
    }

    static func unescape(_ part: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(part.count)
        var i = part.startIndex
        while i < part.endIndex {
            let b = part[i]
            if b == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if b == UInt8(ascii: "%"), i + 2 < part.endIndex,
                      let high = hexValue(part[i + 1]), let low = hexValue(part[i + 2]) {
                out.append(high << 4 | low)
                i += 2
            } else {
                out.append(b)
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
