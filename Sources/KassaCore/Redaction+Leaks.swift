/// What the unit tests and the `planted` fuzz target hold redaction to: values its rules must find
/// wherever they stand apart, secrets under secrets' names, the documents that plant them, and
/// whether any of them survives.
extension Redaction {
    /// Each kind found by its value, in the forms people write.
    package static let plantableValues = [
        "4111111111111111", "5555 5555 5555 4444", "3782-822463-10005", "+46701234567", "+46 70 123 45 67",
        "anna.svensson@example.com", "anna%40example.com", "811218-9876", "19811218-9876", "8112189876",
        "01010012356", "131052-308T", "010203-1234",
    ]
    /// What sets a planted value apart from the text around it (a value glued to a letter is something else).
    package static let plantSeparators = ["; ", ", ", " (", ") ", "\n", " | ", "\t", ": "]
    /// Secrets' member names, in the cases and spellings bodies use.
    package static let plantSecretNames = ["cvc", "Cvc", "apiKey", "upstreamToken", "client_secret", "db-password", "PAN", "securityCode"]

    /// The documents that plant `value` and `secret` in text: the value set apart by `separators`
    /// between `before` and `after`; the secret in that text under `secretName`, and as a secret
    /// query parameter of an href; each member inside what `nest` puts around it. A plant the text
    /// around it already holds is left out: it would be the context's, which may keep it (a value
    /// glued to a letter is something else).
    package static func plantings(value: String, separators: (String, String), secret: String, secretName: String,
                                  before: String, after: String, nest: (JSONValue) -> JSONValue) -> [(planted: String, document: JSONValue)] {
        let context = Array((before + after).utf8)
        func inContext(_ plant: String) -> Bool { ByteSearch.firstIndex(of: Array(plant.utf8), in: context) != nil }
        var plants: [(planted: String, document: JSONValue)] = []
        if !inContext(value) {
            plants.append((value, nest(["note": .string(before + separators.0 + value + separators.1 + after)])))
        }
        if !inContext(secret) {
            plants.append((secret, nest([secretName: .string(before + secret + after)])))
            plants.append((secret, nest(["href": .string("https://x.example/p?" + before + "&" + secretName + "=" + secret + "&b=1")])))
        }
        return plants
    }

    /// Where `planted` survives redaction of `document`: the first of the three ways a body is kept
    /// redacted (its bytes' copy, the tree written in one pass, the redacted tree) that still holds
    /// it in a string or member name, as written; nil when none does. It is looked for in what a
    /// reader of the copy sees, not in its escapes (`\u0018` holds no digits). A copy that is
    /// missing or is no document is a leak too.
    package static func leak(of planted: String, in document: JSONValue) -> String? {
        guard let bytesCopy = redactJSON(document.bytes) else { return "no redacted copy of \(document.text)" }
        let needle = Array(planted.utf8)
        for copy in [bytesCopy, redactedBytes(document), redact(document).bytes] {
            let written = String(decoding: copy, as: UTF8.self)
            guard let tree = try? JSONValue.parse(copy) else { return "no document: \(written)" }
            if texts(tree).contains(where: { ByteSearch.firstIndex(of: needle, in: $0) != nil }) { return written }
        }
        return nil
    }

    /// Every string in `value`, member names too, as UTF-8.
    private static func texts(_ value: JSONValue) -> [[UInt8]] {
        switch value {
        case .string(let s): [Array(s.utf8)]
        case .array(let elements): elements.flatMap(texts)
        case .object(let members): members.flatMap { [Array($0.key.utf8)] + texts($0.value) }
        default: [Array(value.bytes)]
        }
    }
}
