@testable import KassaCore
import Crypto
import KassaEdge
import Testing
import Foundation
#if canImport(Glibc)
import Glibc
#endif

@Suite("Core: JSON")
struct JSONTests {
    @Test("a dotted path finds nested members; a missing member, a null or a non-object on the way is nil")
    func dottedPaths() throws {
        guard case .success(let input) = JSONInput.parse(Array(#"{"a":{"b":{"c":7},"n":null,"s":"x"},"t":1}"#.utf8)) else {
            Issue.record("not parsed"); return
        }
        #expect(input.value("a.b.c") == .number(7))
        #expect(input.value("a.b")?["c"] == .number(7))
        #expect(input.value("t") == .number(1))
        #expect(input.value("a..b.c") == .number(7), "an empty segment is skipped, as split did")
        for missing in ["a.x", "a.b.c.d", "a.n", "a.s.c", "x"] {
            #expect(input.value(missing) == nil, "\(missing)")
        }
        #expect(input.value("a.b.c.") == .number(7), "a trailing dot adds nothing")
    }

    @Test("a string's limit counts characters, not bytes: within it in bytes or in characters passes, past it in characters fails")
    func stringLimit() {
        let text = #"{"ascii":"abcd","accents":"éééé","flags":"🇸🇪🇸🇪","long":"abcde"}"#
        guard case .success(var input) = JSONInput.parse(Array(text.utf8)) else { Issue.record("not parsed"); return }
        #expect(input.string("ascii", maxLength: 4) == "abcd")
        #expect(input.string("accents", maxLength: 4) == "éééé", "8 bytes, 4 characters")
        #expect(input.string("flags", maxLength: 2) == "🇸🇪🇸🇪", "16 bytes, 2 characters")
        #expect(input.problems.isEmpty)
        #expect(input.string("long", maxLength: 4) == nil)
        #expect(input.string("flags", maxLength: 1) == nil)
        #expect(input.problems.map(\.field) == ["long", "flags"])
    }

    @Test("HTTP's optional whitespace is trimmed by bytes: spaces and tabs only, characters kept whole")
    func httpSpace() {
        for (given, expected) in [(" a\t", "a"), ("", ""), (" \t ", ""), ("é ", "é"), ("\t x é  ", "x é"), ("a b", "a b"), ("\u{A0}a", "\u{A0}a")] {
            #expect(given[...].trimmingHTTPSpace() == expected[...], "\(given.debugDescription)")
        }
        // A media type's version parameter, however it is spaced and cased.
        #expect(PaymentOrderVersion.requested(contentType: "application/json ;\tVersion = 3.1 ", productName: nil) == .v3_1)
        #expect(PaymentOrderVersion.requested(contentType: "application/json; charset=utf-8", productName: "Checkout3") == .v3_0)
    }

    @Test("parses and writes back the same document")
    func roundTrip() throws {
        let text = #"{"a":[1,2.5,-3e2,true,false,null],"b":{"c":"d\"\\\n\u00e9😀"},"e":""}"#
        let value = try JSONValue.parse(text)
        #expect(value["a"]?.arrayValue?.count == 6)
        #expect(value["a"]?.arrayValue?[2].doubleValue == -300)
        #expect(value["b"]?["c"]?.stringValue == "d\"\\\né😀")
        #expect(try JSONValue.parse(value.text) == value)
    }

    @Test("refuses broken documents with the byte where they break", arguments: [
        "", "{", "{\"a\":}", "[1,]", "01", "1.", "\"\u{01}\"", "{\"a\":1}x", "\"\\x\"", "\"\\ud800\"", "{\"a\":1,\"a\":2}", "nul", "1e999",
    ])
    func refuses(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test("bounds nesting depth")
    func depth() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        let fine = String(repeating: "[", count: 10) + String(repeating: "]", count: 10)
        #expect(try JSONValue.parse(fine) != .null)
    }

    @Test("refuses invalid UTF-8")
    func invalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) }
    }
}

    @Test("a reader's member names match literals and refuse duplicates as the tree does: escaped, non-ASCII, canonical equivalents, past sixteen members")
    func readerNames() throws {
        // Reads the members named in `wanted` (a literal switch, as the decoders do), and every name as a String.
        func read(_ text: String) throws(JSONParseError) -> (id: String?, kelvin: Bool, names: [String]) {
            try JSONReader.read(Array(text.utf8)) { r throws(JSONParseError) in
                var id: String?, kelvin = false, names: [String] = []
                _ = try r.object { r, name throws(JSONParseError) in
                    names.append(name.string)
                    switch name {
                    case "id": id = try r.string()
                    case "K": kelvin = true
                    default: break
                    }
                }
                return (id, kelvin, names)
            }
        }
        #expect(try read(#"{"id":"a","x":{"id":1}}"#).id == "a")
        #expect(try read(#"{"\u0069d":"escaped"}"#).id == "escaped", "an escaped name matches its literal")
        #expect(try read(#"{"i":"short","idx":"long"}"#).id == nil, "a prefix or an extension is another name")
        #expect(try read(#"{"\u212A":1}"#).kelvin, "the Kelvin sign is K, as String compares them")
        #expect(try read(#"{"é":1,"ab":2}"#).names == ["é", "ab"])
        let many = (0..<20).map { "\"m\($0)\":\($0)" }.joined(separator: ",")
        for text in [#"{"a":1,"a":2}"#, #"{"a":1,"\u0061":2}"#, #"{"K":1,"\u212A":2}"#, "{\(many),\"m3\":0}", "{\(many),\"m\\u0031\":0}",
                     #"[{"a":{"b":1,"b":2}}]"#] {
            #expect(throws: JSONParseError.self, "\(text)") { try JSONReader.read(Array(text.utf8)) { r throws(JSONParseError) in try r.skip() } }
            #expect(throws: JSONParseError.self, "\(text)") { _ = try read(text) }
            #expect(throws: JSONParseError.self, "\(text)") { try JSONValue.parse(text) }
        }
        #expect(try read("{\(many),\"m20\":0}").names.count == 21)
        #expect(try read(#"{"a":{"b":1},"b":{"a":1}}"#).names == ["a", "b"], "names are per object")
    }

@Suite("Core: redaction, secrets, problems")
struct CoreSafetyTests {
    @Test("secrets are replaced and MSISDNs cut to a suffix, at any depth")
    func redaction() {
        let redacted = Redaction.redact([
            "token": "abc", "paymentorder": ["payer": ["msisdn": "+46739000001"], "amount": 1500],
            "list": [["cardNumber": "4111111111111111"]],
            "href": "https://x/y?token=secret123&culture=sv-SE",
        ])
        let text = redacted.text
        #expect(!text.contains("abc"))
        #expect(!text.contains("4111111111111111"))
        #expect(!text.contains("+46739000001"))
        #expect(!text.contains("secret123"))
        #expect(text.contains("0001"))
        #expect(text.contains("culture=sv-SE"))
        #expect(redacted["paymentorder"]?["amount"]?.intValue == 1500)
        // Untouched parts come back equal; a secret deep in an array of strings is still found.
        let clean: JSONValue = ["paymentorder": ["amount": 1500, "urls": ["https://x/a", "https://x/b"]], "ok": true]
        #expect(Redaction.redact(clean) == clean)
        let token = String(repeating: "a1b2c3d4e5", count: 5)
        let nested = Redaction.redact(["links": ["https://x/a", .string("https://x/psp/\(token)"), "https://x/c?apikey=k1"]])
        #expect(nested["links"]?.arrayValue?.map { $0.stringValue } == ["https://x/a", "https://x/psp/…c3d4e5", "https://x/c?apikey=[redacted]"])
        #expect(Redaction.redactHeader(name: "Authorization", value: "Bearer x") == Redaction.placeholder)
        #expect(Redaction.redactHeader(name: "Your-Api-Key", value: "k") == Redaction.placeholder)
    }

    @Test("a payer's name, address and reference are cut by name, in a tree and in bytes alike; products', problems' and settings' names stay")
    func redactionPayer() throws {
        // The sample merchant's order (swedbank-pay-sdk-mobile-example-merchant, paymentOrderRequest.json, shape only).
        let order: JSONValue = ["paymentorder": [
            "payer": ["firstName": "Leia", "lastName": "Ahlström", "payerReference": "cust-778812", "consumerProfileRef": "7d5788219e5bc43350e75ac633e0480ab30ad20f96797a12b96e54da869714c4",
                      "shippingAddress": ["addressee": "Leia Ahlström", "streetAddress": "Helgestavägen 9", "coAddress": "c/o Solo", "zipCode": "19792", "city": "Bro", "countryCode": "SE"]],
            "orderItems": [["reference": "P1", "name": "Product1", "quantity": 1]],
            "riskIndicator": ["deliveryEmailAddress": "leia@example.com", "deliveryTimeFrameIndicator": "01",
                              "pickUpAddress": ["name": "Leia Ahlström", "streetAddress": "Helgestavägen 9", "zipCode": "19792", "city": "Bro", "countryCode": "SE"]],
            "shippingAddressRestrictedToCountryCodes": ["SE", "NO"],
        ], "problems": [["name": "paymentorder.payer.firstName", "description": "is required"]]]
        let tree = Redaction.redact(order)
        let bytes = try #require(Redaction.redactJSON(order.bytes))
        #expect(try JSONValue.parse(bytes) == tree, "the byte scanner and the tree agree")
        let text = String(decoding: bytes, as: UTF8.self)
        for personal in ["Leia", "Ahlstr", "Helgestav", "Solo", "19792", "Bro", "cust-778812", "leia@", "7d5788219e5bc43350e75ac633e0"] {
            #expect(!text.contains(personal), "\(personal) in \(text)")
        }
        let payer = tree["paymentorder"]?["payer"]
        #expect(payer?["firstName"]?.stringValue == Redaction.placeholder && payer?["lastName"]?.stringValue == Redaction.placeholder)
        #expect(payer?["payerReference"]?.stringValue == "…8812", "searchable by its end, as an MSISDN")
        #expect(payer?["shippingAddress"]?.stringValue == Redaction.placeholder, "an address goes whole")
        #expect(tree["paymentorder"]?["riskIndicator"]?["pickUpAddress"]?.stringValue == Redaction.placeholder)
        #expect(tree["paymentorder"]?["riskIndicator"]?["deliveryTimeFrameIndicator"]?.stringValue == "01")
        #expect(tree["paymentorder"]?["orderItems"]?.arrayValue?.first?["name"]?.stringValue == "Product1")
        #expect(tree["paymentorder"]?["shippingAddressRestrictedToCountryCodes"]?.arrayValue == ["SE", "NO"])
        #expect(tree["problems"]?.arrayValue?.first?["name"]?.stringValue == "paymentorder.payer.firstName")
        #expect(Redaction.redactJSON(bytes) == bytes, "a second pass changes nothing")
    }

    @Test("member names match in any case, whole names only, and non-ASCII names as Unicode lower-cases them")
    func redactionKeyNames() {
        #expect(Redaction.isSecretKey("TOKEN") && Redaction.isSecretKey("CardNumber") && Redaction.isSecretKey("x-api-key"))
        #expect(!Redaction.isSecretKey("toke") && !Redaction.isSecretKey("amount") && !Redaction.isSecretKey(""))
        // The usual names of secrets, inside longer names too.
        for name in ["upstreamToken", "client_secret", "DB-Password", "card_cvc", "CVV2", "x-api-key-2", "securityCode", "tokens",
                     String(repeating: "token", count: 20)] {
            #expect(Redaction.isSecretKey(name), "\(name)")
        }
        #expect(Redaction.isSecretKey("to\u{212A}en"), "the Kelvin sign lower-cases to k")
        let redacted = Redaction.redact(["MSISDN": "+46739000001", "PhoneNumber": "+46700000002", "Cvc": "123", "phones": "+46700000003"])
        #expect(redacted["MSISDN"]?.stringValue == "…0001")
        #expect(redacted["PhoneNumber"]?.stringValue == "…0002")
        #expect(redacted["Cvc"]?.stringValue == Redaction.placeholder)
        #expect(redacted["phones"]?.stringValue == "…0003", "found by its value")
        let flags = Redaction.redact(["generatePaymentToken": true, "generateRecurrenceToken": false, "tokenTtl": 3600])
        #expect(flags["generatePaymentToken"] == true && flags["generateRecurrenceToken"] == false, "a flag says nothing secret")
        #expect(flags["tokenTtl"]?.stringValue == Redaction.placeholder)
    }

    @Test("a body redacted as bytes reads back as its tree redacted, and a tree written redacted in one pass as its redacted tree written: secrets, suffixes, values, numbers, escapes, any depth")
    func redactionOfBytes() throws {
        let token = String(repeating: "a1b2c3d4e5", count: 5)
        let documents = [
            #"{"token":"abc","paymentorder":{"payer":{"msisdn":"+46739000001"},"amount":1500},"list":[{"cardNumber":"4111111111111111"}]}"#,
            #" { "href" : "https://x/y?token=secret123&culture=sv-SE" , "links" : [ "https://x/a", "https://x/psp/\#(token)" ] } "#,
            #"{"Cvc":123,"cvv":[1,2],"secret":{"a":1},"password":null,"apiKey":true,"token":"[redacted]","PhoneNumber":"+46700000002"}"#,
            #"{"msisdn":46739000001,"phone":null,"note":4111111111111111,"small":12,"negative":-4111111111111111,"exp":4.111111111111111e15}"#,
            #"{"to\u006ben":"escaped name","e\u006dail":"x","text":"mail anna\u0040example.com now","quote":"a \"b\" \\ c \/ d\n"}"#,
            #"{"personnummer":"19811218-9876","free":"call +46 70 123 45 67","id":"0193a4111111111111111b","at":1764000000000}"#,
            #"{"naïve":"åäö","pånummer":"4111 1111 1111 1111","emoji":"\ud83d\ude00","expiryDate":"12/30"}"#,
            #"[[[[{"deep":[{"cardNumber":"5555555555554444"},"ok"]}]]],0,-0.5,1e-3,true,false,null,"",{}]"#,
            ##"{"token":"abc","pe":["#19aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa811218-9876"]}"##,
            #""4111111111111111""#, "4111111111111111", "true", #"{"securityCode":"123","nested":{"x-api-key":"k","list":["anna@example.com"]}}"#,
        ]
        for document in documents {
            let bytes = Array(document.utf8)
            let tree = try JSONValue.parse(bytes)
            let redacted = try #require(Redaction.redactJSON(bytes), "\(document)")
            #expect(try JSONValue.parse(redacted) == Redaction.redact(tree), "\(document) → \(String(decoding: redacted, as: UTF8.self))")
            // The event log writes a tree's redaction in one pass: the same bytes as the redacted tree's.
            #expect(Redaction.redactedBytes(tree) == Redaction.redact(tree).bytes, "\(document)")
        }
        let written = Redaction.redactedBytes(["token": "abc", "msisdn": "+46739000001", "href": "https://x/y?token=s&b=1", "flag": .null])
        #expect(String(decoding: written, as: UTF8.self) == #"{"flag":null,"href":"https://x/y?token=[redacted]&b=1","msisdn":"…0001","token":"[redacted]"}"#)
        // What the tree's redaction keeps unchanged is copied as it was written (order, numbers);
        // white space goes, and each redacted value lands between the bytes around it, however
        // long the unchanged stretches (escapes, bytes past ASCII and long strings included).
        func copied(_ document: String) -> String? { Redaction.redactJSON(Array(document.utf8)).map { String(decoding: $0, as: UTF8.self) } }
        #expect(copied(#"{"b":1.50,"a":[1e2,"x"]}"#) == #"{"b":1.50,"a":[1e2,"x"]}"#)
        #expect(copied(#" { "a" : [ 1 , "x" , true ] , "token" : "s" , "n" : { "password" : [ 1, { "b" : 2 } ] , "k" : null } , "c" : "https://x/y?token=abc&d=1" } "#)
                == #"{"a":[1,"x",true],"token":"[redacted]","n":{"password":"[redacted]","k":null},"c":"https://x/y?token=[redacted]&d=1"}"#)
        #expect(copied(#"{"long":"a \"quoted\" stretch of text past eight bytes\\","cvc":"123","after":"0123456789abcdefåäö"}"#)
                == #"{"long":"a \"quoted\" stretch of text past eight bytes\\","cvc":"[redacted]","after":"0123456789abcdefåäö"}"#)
        #expect(copied("{\"text\":\"0123456789abcdef\u{01}\"}") == nil, "a control byte past the first eight")
        // A national id glued to a long hex run stands apart once the run is cut as a token (the
        // fuzzer found it kept in clear): the values stage looks again, as it does for text.
        #expect(copied(##"{"pe":["#19aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa811218-9876"]}"##) == ##"{"pe":["#…[redacted]"]}"##)
        // Not one document: nil, and the caller falls back to the tree.
        for broken in ["-6e7772", #"{"a":1"#, #"{"a" 1}"#, "[1,]", #"{"a":01}"#, "\"open", "1 2", "", "{\"a\":\"\u{01}\"}", "[" + String(repeating: "[", count: 70) + "]"] {
            #expect(Redaction.redactJSON(Array(broken.utf8)) == nil, "\(broken)")
        }
        // Written after what a buffer holds (an event's data), or the buffer left as it was.
        var buffer = Array(#"{"kind":"x","body":"#.utf8)
        #expect(Redaction.appendRedactedJSON(Array(#" {"token" : "s","a":[1, 2]}"#.utf8), to: &buffer))
        #expect(String(decoding: buffer, as: UTF8.self) == #"{"kind":"x","body":{"token":"[redacted]","a":[1,2]}"#)
        let before = buffer
        #expect(!Redaction.appendRedactedJSON(Array(#"{"token":"s","a":[1,"#.utf8), to: &buffer))
        #expect(buffer == before)
    }

    @Test("client numbers: digits only, at most 19, inside their range; Int64's limits and one past them")
    func clientNumbers() {
        #expect(ClientNumber.whole("9223372036854775807", in: 0...Int64.max) == Int64.max)
        #expect(ClientNumber.whole("9223372036854775808", in: 0...Int64.max) == nil)
        #expect(ClientNumber.whole("-9223372036854775808", in: Int64.min...Int64.max) == nil, "no sign")
        #expect(ClientNumber.whole("+1", in: 0...10) == nil && ClientNumber.whole(" 1", in: 0...10) == nil && ClientNumber.whole("", in: 0...10) == nil)
        #expect(ClientNumber.whole("00000000000000000001", in: 0...10) == nil, "20 digits")
        #expect(ClientNumber.whole("1000", in: 1...1_000) == 1_000 && ClientNumber.whole("1001", in: 1...1_000) == nil)
        #expect(ClientNumber.whole("١٢", in: 0...100) == nil, "ASCII digits only")
        #expect(ClientNumber.timeMs("253402300799999") == ClientNumber.maxTimeMs && ClientNumber.timeMs("253402300800000") == nil)
        #expect(ClientNumber.timeMs("2026-11-22T10:00:00Z") == 1_795_341_600_000)
        #expect(ClientNumber.timeMs("9999-12-31T23:59:59.999Z") == ClientNumber.maxTimeMs)
    }

    @Test("personal data is found by its value: cards by Luhn, international phones, e-mails, Nordic national ids; in text, URLs, arrays and numbers")
    func redactionByValue() {
        let cases: [(String, String)] = [
            ("card 4111111111111111 ok", "card …1111 ok"),
            ("4111 1111 1111 1111", "…1111"),
            ("5555-5555-5555-4444", "…4444"),
            ("/pay?pan=5555555555554444&x=1", "/pay?pan=[redacted]&x=1"),
            ("/cards/378282246310005/charges", "/cards/…0005/charges"),
            ("call +46 70 123 45 67.", "call …4567."),
            ("?msisdn=%2B46739000001&a=b", "?msisdn=…0001&a=b"),
            ("to: Anna.Svensson+shop@example.co.uk.", "to: [redacted]."),
            ("/payer/anna%40example.com/x", "/payer/[redacted]/x"),
            ("pnr 19811218-9876 and 811218-9876 and 8112189876", "pnr [redacted] and [redacted] and [redacted]"),
            ("fnr 01010012356", "fnr [redacted]"),
            ("hetu 131052-308T!", "hetu [redacted]!"),
            ("cpr 010203-1234", "cpr [redacted]"),
        ]
        for (given, expected) in cases {
            #expect(Redaction.redactText(given) == expected, "\(given)")
            #expect(Redaction.redactText(expected) == expected, "a second pass changes nothing: \(expected)")
        }
        // What only looks like them stays: not Luhn-valid, no plus, inside an id, an epoch, a date, a version.
        for kept in ["order 4111111111111112", "ref 46739000001", "id 0193a4111111111111111b", "at 1764000000000",
                     "2026-11-24T10:00:00Z", "v1.2.3", "amount 150000", "session 01938f2a6c1d4e5f8a9b0c1d2e3f4a5b", "x@y", "a@b.c"] {
            #expect(Redaction.redactText(kept) == kept, "\(kept)")
        }
        let body = Redaction.redact(["payer": ["contact": ["+46701234567", "anna@example.com"]], "note": 4111111111111111.0,
                                     "id": 198112189876.0, "amount": 1500, "big": 4.5e18])
        #expect(body["payer"]?["contact"]?.arrayValue == ["…4567", .string(Redaction.placeholder)])
        #expect(body["note"]?.stringValue == "…1111")
        #expect(body["id"]?.stringValue == Redaction.placeholder)
        #expect(body["amount"]?.intValue == 1500)
        #expect(body["big"]?.stringValue == Redaction.placeholder)
    }

    @Test("the shortcut that skips most strings never skips a value the full scan finds")
    func valueShortcut() {
        // Ids, dates and URLs the shortcut now passes over, and findings whose digits are joined.
        for s in ["/psp/paymentorders/5adc265f-f87f-4313-577e-08d3dca1a26c", "2026-11-24T10:00:00.123Z",
                  "ca11ed00-0000-4000-a000-000000000001", "hetu 131052A308T", "hetu 010100A123D", "+46 70 123 45 67",
                  "%2B46739000001", "4111-1111 1111-1111", "19811218-9876", "01010012356"] {
            #expect(Redaction.redactValues(s) == Redaction.scanValues(s), "\(s)")
        }
        #expect(Redaction.redactValues("hetu 131052A308T") == "hetu [redacted]", "a Finnish century letter joins the digits")
        // Random strings over the bytes that matter: digits, the joiners, letters either side of them.
        var rng = SeededRandom(seed: 0x5eed)
        let alphabet = Array("0123456789012345678901234567890123456789 -+ABCFUXYZabfz/.%@".utf8)
        for _ in 0..<20_000 {
            let count = 6 + Int(rng.next() % 20)
            let s = String(decoding: (0..<count).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }, as: UTF8.self)
            #expect(Redaction.redactValues(s) == Redaction.scanValues(s), "\(s)")
        }
    }

    @Test("one look at a string's bytes picks the stages that could change it, and skipping the others changes nothing")
    func textHints() {
        func hints(_ s: String) -> Redaction.TextHints {
            Array(s.utf8).withUnsafeBufferPointer { Redaction.textHints(rawString: $0) }
        }
        // What most of an answer is: nothing to do.
        for s in ["2026-11-27T16:50:10.083Z", "/psp/paymentorders/ca11ed00-0000-4000-a000-bfcef9276163",
                  "http://127.0.0.1:23621/psp/paymentorders/5adc265f-f87f-4313-577e-08d3dca1a26c", "CreditCard", "SEK"] {
            #expect(hints(s).isEmpty, "\(s)")
        }
        let token = String(repeating: "5e5510ed", count: 6)
        #expect(hints("http://127.0.0.1:23621/psp/paymentsessions/\(token)/methods/CreditCard/expand") == .tokens)
        #expect(hints("/psp/paymentsessions/5a17c24e-d459-4567-bbad-aa0f17a76119") == .tokens)
        #expect(hints("https://example.com/menu?_tc_tid=30f2168171") == .query)
        #expect(hints("anna@example.com") == .values)
        #expect(hints("+46739000001") == .values)
        #expect(hints("hetu 131052A308T") == .values)
        #expect(hints("ref 12345678") == [], "eight digits with no plus are nothing")
        #expect(hints("Åsa") == .all, "past ASCII: decoded and redacted in full")
        // Random strings over the bytes the stages look for (runs of letters past `f` among them,
        // which the hints take as one): the hinted stages give what all three give.
        var rng = SeededRandom(seed: 0x41775)
        let pieces = ["0", "1", "4", "9", "7", "a", "f", "A", "B", "U", "x", "T", " ", "-", "+", "/", "?", "&", "=", "@", "%", ".",
                      "paymentsessions/", "token=", "%2B", "%40", "4111", "ed00", "5e5510ed5e5510ed",
                      "xyz", "hetu", "gz"]
        for _ in 0..<20_000 {
            let s = (0..<(4 + Int(rng.next() % 16))).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
            let all = Array(s.utf8).withUnsafeBufferPointer { Redaction.redactedText($0, hints: .all) }
            let hinted = Array(s.utf8).withUnsafeBufferPointer { Redaction.redactedText($0, hints: Redaction.textHints(rawString: $0)) }
            #expect(all == hinted, "\(s)")
        }
        // Any text takes its hints unless told (`redactText`, a tree's strings): also text a JSON
        // string holds only escaped (quotes, backslashes, control characters) and past ASCII.
        let more = pieces + ["\"", "\\", "\n", "\t", "\u{1}", "å", "€", "4111 1111 1111 1111", "anna@example.com"]
        for _ in 0..<5_000 {
            let s = (0..<(4 + Int(rng.next() % 16))).map { _ in more[Int(rng.next() % UInt64(more.count))] }.joined()
            #expect(Redaction.redactText(s) == Redaction.redactTextInFull(s), "\(s)")
        }
    }

    @Test("planted personal data and secrets never survive, whatever text, URL or nesting surrounds them; all three ways of redacting a body")
    func plantedSecretsDoNotSurvive() {
        // Each value stands apart (a separator either side), so the rules must find it wherever it is put;
        // what surrounds it is the bytes each stage looks for, glued in any order.
        let pieces = ["a", "Z", "é", "0", "9", "12", "-", " ", "+", "@", "%40", "%2B", "?", "&", "=", "#", ";", "/", ".",
                      "paymentsessions/", String(repeating: "5e5510ed", count: 5), "5a17c24e-d459-4567-bbad-aa0f17a76119",
                      "\\", "\"", "\n", "token=", "example.com", "…", "[redacted]", "4111", "hetu"]
        var rng = SeededRandom(seed: 0x91a47ed)
        func pick<T>(_ array: [T]) -> T { array[Int(rng.next() % UInt64(array.count))] }
        func context() -> String { (0..<Int(rng.next() % 8)).map { _ in pick(pieces) }.joined() }
        /// `member` inside zero to three arrays or objects, beside a member of plain text.
        func nested(_ member: JSONValue) -> JSONValue {
            var value = member
            for _ in 0..<Int(rng.next() % 4) {
                value = rng.next() % 2 == 0 ? .array([.string(context()), value]) : .object(["x": value, "note": .string(context())])
            }
            return value
        }
        for _ in 0..<5_000 {
            // A value set apart in that text; a secret under a secret's name, which hides anything it
            // names, and in a secret query parameter, whose value it hides: each nested.
            let (value, before, after) = (pick(Redaction.plantableValues), context(), context())
            let separators = (pick(Redaction.plantSeparators), pick(Redaction.plantSeparators))
            let (secret, name) = ("s3cr3t" + String(rng.next() % 1_000_000), pick(Redaction.plantSecretNames))
            for (planted, document) in Redaction.plantings(value: value, separators: separators, secret: secret, secretName: name,
                                                           before: before, after: after, nest: nested) {
                #expect(Redaction.leak(of: planted, in: document) == nil, "\(planted) survived in \(document.text)")
            }
        }
        // Card numbers and national ids sent as JSON numbers.
        for number in [4111111111111111.0, 5555555555554444, 8112189876, 198112189876] {
            let document = nested(["n": .number(number)])
            #expect(Redaction.leak(of: String(Int64(number)), in: document) == nil, "\(document.text)")
        }
    }

    @Test("a secret name part is found at any position and in any case")
    func secretNameParts() {
        for part in ["token", "secret", "passw", "apikey", "api_key", "api-key", "cvc", "cvv", "securitycode", "security_code",
                     "privatekey", "private_key"] {
            for name in [part, "x" + part, part + "Id", "upstream" + part.uppercased(), "ab" + part + "cd"] {
                #expect(Redaction.isSecretKey(name), "\(name)")
            }
        }
        for name in ["toke", "secre", "pass", "apike", "cv", "security", "private", "operations", "contentType"] {
            #expect(!Redaction.isSecretKey(name), "\(name)")
        }
    }

    @Test("tokens in paths and secrets in queries are cut; everything else is left byte for byte")
    func redactionOfStrings() {
        let token = String(repeating: "a1b2c3d4e5", count: 5)
        #expect(Redaction.redactTokens("/psp/paymentsessions/\(token)/methods") == "/psp/paymentsessions/…c3d4e5/methods")
        #expect(Redaction.redactTokens("x \(token) y \(token)") == "x …c3d4e5 y …c3d4e5")
        let id = String(repeating: "0123456789abcdef", count: 2)
        #expect(Redaction.redactTokens("session \(id) ok") == "session \(id) ok", "32-digit ids stay")
        #expect(Redaction.redactTokens("åäö – \(token)") == "åäö – …c3d4e5")
        #expect(Redaction.redactTokens("") == "")
        #expect(Redaction.redactURLQuery("https://x/y?token=s3cret&msisdn=%2B46739000001&a=b#f") == "https://x/y?token=[redacted]&msisdn=…0001&a=b#f")
        #expect(Redaction.redactURLQuery("a=b&c") == "a=b&c")
        #expect(Redaction.redactURLQuery("plain text, no query") == "plain text, no query")
        #expect(Redaction.redactURLQuery("swish://paymentrequest?token=abc&callbackurl=https%3A%2F%2Fshop") == "swish://paymentrequest?token=[redacted]&callbackurl=https%3A%2F%2Fshop")
        #expect(Redaction.redactURLQuery("x?Authorization=Bearer%20t;apikey=k") == "x?Authorization=[redacted];apikey=[redacted]")
        // Found by the fuzzer: a second pass cut "[redacted]" to "…ted]". Redacting is now stable.
        let once = Redaction.redactURLQuery("a?msisdn=123&phone=+46739000001")
        #expect(once == "a?msisdn=[redacted]&phone=…0001")
        #expect(Redaction.redactURLQuery(once) == once)
    }

    @Test("a payment session's GUID in a path is a token; payment order GUIDs and other GUIDs stay")
    func sessionGUIDsAreTokens() throws {
        // Seed 002's session link; its GUID is also the payment menu's token= in seed 000.
        let guid = "5a17c24e-d459-4567-bbad-aa0f17a76119"
        let href = "https://ecom.externalintegration.payex.com/psp/paymentsessions/\(guid)?_tc_tid=30f2168171e142d38bcd4af2c3721959"
        #expect(Redaction.redactText(href) == "https://ecom.externalintegration.payex.com/psp/paymentsessions/…a76119?_tc_tid=30f2168171e142d38bcd4af2c3721959")
        #expect(Redaction.redactTokens("POST /psp/paymentsessions/\(guid.uppercased())/prepare") == "POST /psp/paymentsessions/…A76119/prepare")
        #expect(Redaction.redactTokens("/psp/paymentorders/\(guid)") == "/psp/paymentorders/\(guid)", "order ids stay searchable")
        #expect(Redaction.redactTokens("id \(guid)") == "id \(guid)")
        // Not a GUID, or a longer run: no cut by this rule.
        #expect(Redaction.redactTokens("/psp/paymentsessions/\(guid)0") == "/psp/paymentsessions/\(guid)0")
        #expect(Redaction.redactTokens("/psp/paymentsessions/\(guid.dropLast())") == "/psp/paymentsessions/\(guid.dropLast())")
        #expect(Redaction.redactTokens("/psp/paymentsessions/x") == "/psp/paymentsessions/x")
        // Stable, and the same in a body redacted as bytes, a path with no query included.
        let once = Redaction.redactText(href)
        #expect(Redaction.redactText(once) == once)
        let body = #"{"path":"/psp/paymentsessions/\#(guid)/prepare","id":"/psp/paymentorders/\#(guid)","href":"\#(href)"}"#
        let redacted = try #require(Redaction.redactJSON(Array(body.utf8)))
        #expect(String(decoding: redacted, as: UTF8.self)
                == #"{"path":"/psp/paymentsessions/…a76119/prepare","id":"/psp/paymentorders/\#(guid)","href":"\#(once)"}"#)
        #expect(try JSONValue.parse(redacted) == Redaction.redact(try JSONValue.parse(Array(body.utf8))))
    }

    @Test("a run of bytes is found wherever it lies, from where the search starts, and only where all of it lies")
    func containsBytes() {
        for (text, expected) in [(#"{"type":"ping","id":1}"#, true), (#""ping""#, true), (#"{"id":1,"type":"ping"}"#, true),
                                 (#"{"type":"pin"}"#, false), (#""ping"#, false), ("", false), (#"x"pingpong""#, false), ("åä\"ping\"", true)] {
            #expect(text.containsBytes(of: #""ping""#) == expected, "\(text)")
            #expect(text.containsBytes(of: #""ping""#) == text.contains(#""ping""#), "\(text)")
        }
        #expect("abc".containsBytes(of: ""))
        // The search itself, as the load client reads a response head with it.
        let head = Array("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody".utf8)
        #expect(ByteSearch.firstIndex(of: [0x0D, 0x0A, 0x0D, 0x0A], in: head) == 21)
        #expect(ByteSearch.firstIndex(of: [0x0D, 0x0A], in: head) == 15)
        #expect(ByteSearch.firstIndex(of: [0x0D, 0x0A], in: head, from: 17) == 21)
        #expect(ByteSearch.firstIndex(of: Array("body".utf8), in: head, from: 25) == 25)
        #expect(ByteSearch.firstIndex(of: Array("body".utf8), in: head, from: 26) == nil)
        #expect(ByteSearch.firstIndex(of: [], in: head, from: 3) == 3)
        #expect(ByteSearch.firstIndex(of: Array("longer than it".utf8), in: Array("short".utf8)) == nil)
    }

    @Test("a thread made for batch scheduling runs under SCHED_BATCH with its name; a normal one keeps the default policy")
    func threadScheduling() async {
        func policyAndName(_ scheduling: ThreadScheduling) async -> (Int32, String) {
            await withCheckedContinuation { done in
                Thread.named("kassa-test-\(scheduling)", scheduling: scheduling) {
                    let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                    done.resume(returning: (sched_getscheduler(0), comm.trimmingCharacters(in: .whitespacesAndNewlines)))
                }.start()
            }
        }
        let batch = await policyAndName(.batch), normal = await policyAndName(.normal)
        #expect(batch.0 == Thread.schedBatch && batch.1 == "kassa-test-batc")
        #expect(normal.0 == 0 && normal.1 == "kassa-test-norm")
    }

    @Test("constant-time comparison agrees with ==")
    func constantTime() {
        // Time-ordered ids: 10 hex digits of milliseconds, then the random part; later sorts after.
        let early = Secrets.timeOrderedHex(nowMs: 1_700_000_000_000, randomBytes: 9)
        let late = Secrets.timeOrderedHex(nowMs: 1_700_000_000_001, randomBytes: 9)
        #expect(early.count == 28 && early.hasPrefix("8bcfe56800") && late.hasPrefix("8bcfe56801") && late > early)
        #expect(Secrets.timeOrderedHex(nowMs: 5, randomBytes: 1).prefix(10) == "0000000005")
        #expect(Secrets.timeOrderedHex(nowMs: 5, randomBytes: 9) != Secrets.timeOrderedHex(nowMs: 5, randomBytes: 9), "the random part differs")
        #expect(Secrets.timeOrderedHex(nowMs: 0x12_3456_789a_bcde, randomBytes: 0) == "56789abcde", "the time's low 40 bits")
        // Random ids in one draw: the length asked for, lower-case hex, every digit used, no repeats.
        let ids = (0..<2_000).map { _ in Secrets.randomHex(bytes: 32) }
        #expect(ids.allSatisfy { $0.utf8.count == 64 && $0.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } })
        #expect(Set(ids).count == ids.count && Set(ids.joined()).count == 16)
        #expect(Secrets.randomHex(bytes: 0).isEmpty && Secrets.randomHex(bytes: 3).utf8.count == 6)
        #expect(Secrets.constantTimeEquals("abc", "abc"))
        #expect(!Secrets.constantTimeEquals("abc", "abd"))
        #expect(!Secrets.constantTimeEquals("abc", "abcd"))
        #expect(!Secrets.constantTimeEquals("", "a"))
        #expect(!Secrets.constantTimeEquals("", String(repeating: "\0", count: 256)), "lengths 256 apart differ")
        #expect(!Secrets.constantTimeEquals("k", "k" + String(repeating: "\0", count: 512)))
        #expect(Secrets.matchesAny("k2", ["k1", "k2"]))
        #expect(!Secrets.matchesAny("k3", ["k1", "k2"]))
        #expect(Secrets.randomHex(bytes: 16).count == 32)
        #expect(Secrets.randomHex() != Secrets.randomHex())
    }

    @Test("a problem serialises as RFC 7807")
    func problemShape() throws {
        let problem = Problem.badRequest("amount must be a number", parameter: "amount")
        let json = try JSONValue.parse(problem.json.bytes)
        #expect(json["type"]?.stringValue == "urn:kassa:problem:bad-request")
        #expect(json["title"]?.stringValue == "Bad Request")
        #expect(json["status"]?.intValue == 400)
        #expect(json["detail"]?.stringValue == "amount must be a number")
        #expect(json["parameter"]?.stringValue == "amount")
    }
}

@Suite("Gateway: routing table")
struct RouterTests {
    let router = Router<Int>([
        Route(.GET, "/v1/sessions/{id}", "get") { _, _ in .text("") },
        Route(.POST, "/v1/sessions/{id}/abort", "abort") { _, _ in .text("") },
        Route(.GET, "/swedbank-pay-mobile/", "root") { _, _ in .text("") },
    ])

    @Test("matches parameters, tells 404 from 405")
    func matching() {
        guard case .found(let route, let parameters) = router.match(.GET, "/v1/sessions/abc") else { Issue.record("no match"); return }
        #expect(route.name == "get")
        #expect(parameters == ["id": "abc"])
        guard case .methodNotAllowed(let allowed) = router.match(.DELETE, "/v1/sessions/abc") else { Issue.record("expected 405"); return }
        #expect(allowed == [.GET])
        guard case .notFound = router.match(.GET, "/v1/sessions/abc/unknown") else { Issue.record("expected 404"); return }
        guard case .found = router.match(.GET, "/swedbank-pay-mobile/") else { Issue.record("root with slash"); return }
        guard case .notFound = router.match(.GET, "/swedbank-pay-mobile") else { Issue.record("root without slash is another path"); return }
        guard case .found = router.match(.HEAD, "/v1/sessions/x") else { Issue.record("HEAD follows GET"); return }
        // Literal segments compare as bytes: a path that only looks the same is another path.
        #expect(PathPattern("/caf\u{E9}/{id}").match("/cafe\u{301}/1") == nil)
        #expect(PathPattern("/caf\u{E9}/{id}").match("/caf\u{E9}/1") == ["id": "1"])
        // Segments are cut at each "/" byte, empty ones left out; a parameter keeps its bytes whole.
        #expect(PathPattern("/caf\u{E9}/{id}").match("//caf\u{E9}///\u{E9}t\u{E9}") == ["id": "\u{E9}t\u{E9}"])
        #expect(PathPattern("/v1/{id}/{op}").match("/v1/\u{301}a/b\u{1F600}") == ["id": "\u{301}a", "op": "b\u{1F600}"])
        #expect(PathPattern("/v1/{id}").match("/v1/a/") == nil && PathPattern("/v1/{id}").match("/v1//") == nil)
        #expect(PathPattern("/{a}/{b}").match("/x/y/z") == nil && PathPattern("/{a}/{b}").match("/x") == nil)
    }

    @Test("a path looked up whole answers as the scan would: table order, HEAD after GET, 405 for another method")
    func exactPaths() {
        let router = Router<Int>([
            Route(.GET, "/v1/sessions/{id}", "by-id") { _, _ in .text("") },
            Route(.GET, "/v1/sessions/states", "shadowed") { _, _ in .text("") },
            Route(.POST, "/v1/sessions/states", "post-states") { _, _ in .text("") },
            Route(.GET, "/kassa.js", "script") { _, _ in .text("") },
        ])
        func name(_ method: HTTPMethod, _ path: String) -> String? {
            if case .found(let route, _) = router.match(method, path) { return route.name }
            return nil
        }
        #expect(name(.GET, "/v1/sessions/states") == "by-id", "an earlier pattern that matches wins, as in the scan")
        #expect(name(.POST, "/v1/sessions/states") == "post-states")
        #expect(name(.GET, "/kassa.js") == "script" && name(.HEAD, "/kassa.js") == "script")
        guard case .methodNotAllowed(let allowed) = router.match(.DELETE, "/kassa.js") else { Issue.record("expected 405"); return }
        #expect(allowed == [.GET])
        #expect(name(.GET, "//kassa.js") == "script", "the scan still reads a doubled slash")
    }
}

@Suite("Core: tokens and hashes")
struct TokenTests {
    static let secret = "0123456789abcdef0123456789abcdef-one"
    static let href = "https://up.example/psp/paymentsessions/t0k"

    @Test("request, trace and span ids: the right length, lower-case hex, valid for W3C, and no repeats")
    func uniqueIDs() {
        let traces = (0..<20_000).map { _ in TraceContext.newTraceID() }
        #expect(Set(traces).count == traces.count)
        #expect(traces.allSatisfy(TraceContext.isTraceID))
        let spans = (0..<20_000).map { _ in TraceContext.newSpanID() }
        #expect(Set(spans).count == spans.count)
        #expect(spans.allSatisfy { $0.utf8.count == 16 && TraceContext.isSpanID($0) })
        let header = TraceContext.traceparent(traceID: traces[0])
        #expect(TraceContext.traceID(fromTraceparent: header) == traces[0])
        // Consecutive ids share no long prefix: the counter is mixed, not printed.
        #expect(spans[0].prefix(8) != spans[1].prefix(8))
        // Anything but 32 (16) lower-case hex digits is refused.
        // Ids with a letter, so that upper-casing changes them: a span id is all digits one time in
        // about 1 850 ((10/16)^16), and then this failed.
        let trace = traces.first { $0.contains(where: \.isLetter) }!, span = spans.first { $0.contains(where: \.isLetter) }!
        for bad in [trace.uppercased(), String(trace.dropLast()), trace + "0", "g" + trace.dropFirst(), "٣" + trace.dropFirst(), "é" + trace.dropFirst(2)] {
            #expect(!TraceContext.isTraceID(bad), "\(bad)")
        }
        #expect(!TraceContext.isSpanID(String(repeating: "0", count: 16)), "an all-zero span id is invalid")
        #expect(!TraceContext.isSpanID(span.uppercased()) && !TraceContext.isSpanID(String(span.dropLast())))
        #expect(TraceContext.traceID(fromTraceparent: "00-\(trace.uppercased())-\(span)-01") == nil)
        #expect(TraceContext.traceID(fromTraceparent: "00-\(trace)-\(span)-0g") == nil)
    }

    @Test("SHA-256 comes from swift-crypto and matches the standard test vectors")
    func vectors() {
        #expect(Hashing.sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Hashing.sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("a tag is the first 32 hex digits of HMAC-SHA256 under the sealing key, the same each time; any of our keys validates it")
    func tags() throws {
        let keys = try TokenKeys(secrets: [Self.secret])
        let rotated = try TokenKeys(secrets: ["fedcba9876543210fedcba9876543210-two", Self.secret])
        for text in ["", "3-D Secure notification for session abc123", String(repeating: "long text ", count: 30)] {
            let fresh = HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: keys.sealing.key)
            #expect(keys.tag(text) == String(Hashing.hex(Array(fresh)).prefix(32)), "\(text)")
            #expect(keys.tag(text) == keys.tag(text), "the keyed state is not changed by a tag")
            #expect(rotated.isValidTag(keys.tag(text), for: text) && !rotated.isValidTag(keys.tag(text), for: text + "x"))
        }
        #expect(keys.tag("a") != keys.tag("b"))
    }

    @Test("a client token opens only with its secret, unaltered, and hides the href")
    func sessionToken() throws {
        let keys = try TokenKeys(secrets: [Self.secret])
        let other = try TokenKeys(secrets: ["fedcba9876543210fedcba9876543210-two"])
        let token = SessionToken.issue(sessionID: "abc123", href: Self.href, expiresAt: 2_000_000_000, keys: keys)
        #expect(token.hasPrefix("kt1.\(keys.sealing.id).2000000000."))
        #expect(SessionToken.open(token, keys: keys) == SessionToken(sessionID: "abc123", href: Self.href, expiresAt: 2_000_000_000))
        #expect(SessionToken.open(token, keys: other) == nil)
        #expect(!token.contains("up.example"))
        // Any changed character of the sealed part, or a moved expiry, breaks the seal.
        var tampered = Array(token)
        tampered[token.count - 5] = tampered[token.count - 5] == "A" ? "B" : "A"
        #expect(SessionToken.open(String(tampered), keys: keys) == nil)
        #expect(SessionToken.open(token.replacingOccurrences(of: ".2000000000.", with: ".2000000001."), keys: keys) == nil)
        #expect(SessionToken.open("nonsense", keys: keys) == nil)
        #expect(token != SessionToken.issue(sessionID: "abc123", href: Self.href, expiresAt: 2_000_000_000, keys: keys))
        #expect(Base64URL.decode(Base64URL.encode(Array("hello, world?".utf8))) == Array("hello, world?".utf8))
        #expect(Base64URL.decode("a+b/") == nil)
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8" && Base64URL.decode("-_8") == [0xFB, 0xFF], "the URL alphabet, no padding")
        #expect(Base64URL.decode("-_8=") == nil && Base64URL.decode("-_8=a") == nil && Base64URL.decode("å") == nil)
        #expect(Base64URL.encode([]) == "" && Base64URL.decode("") == [])
    }

    @Test("rotation: the first secret seals, every listed secret opens")
    func rotation() throws {
        let old = try TokenKeys(secrets: ["fedcba9876543210fedcba9876543210-old"])
        let rotated = try TokenKeys(secrets: [Self.secret, "fedcba9876543210fedcba9876543210-old"])
        let issuedBefore = SessionToken.issue(sessionID: "s1", href: Self.href, expiresAt: 2_000_000_000, keys: old)
        #expect(SessionToken.open(issuedBefore, keys: rotated)?.sessionID == "s1")
        let issuedAfter = SessionToken.issue(sessionID: "s2", href: Self.href, expiresAt: 2_000_000_000, keys: rotated)
        #expect(SessionToken.header(issuedAfter)?.keyID == rotated.sealing.id)
        #expect(SessionToken.open(issuedAfter, keys: old) == nil)
    }

    @Test("short, repetitive or empty cluster secrets are refused")
    func weakSecrets() {
        #expect(throws: TokenKeys.WeakSecret.self) { try TokenKeys(secrets: ["shared-secret"]) }
        #expect(throws: TokenKeys.WeakSecret.self) { try TokenKeys(secrets: [String(repeating: "ab", count: 32)]) }
        #expect(throws: TokenKeys.WeakSecret.self) { try TokenKeys(secrets: [""]) }
        #expect(throws: TokenKeys.WeakSecret.self) { try TokenKeys(secrets: [Self.secret, "short"]) }
        #expect(TokenKeys.weakness(of: Secrets.randomHex(bytes: 32)) == nil)
    }

    @Test("the token format before kt1 (nonce.payload.mac) is not a token")
    func oldFormat() {
        let old = "0123456789abcdef0123456789abcdef.eyJzIjoiYWJjIn0.5f2b9c0e1d"
        #expect(SessionToken.header(old) == nil)
    }

    @Test("a token's header is read only from exactly four dot-separated parts of the current shape")
    func tokenShape() throws {
        let keys = try TokenKeys(secrets: [Self.secret])
        let token = SessionToken.issue(sessionID: "abc123", href: Self.href, expiresAt: 2_000_000_000, keys: keys)
        let id = keys.sealing.id
        #expect(SessionToken.header(token) == SessionToken.Header(keyID: id, expiresAt: 2_000_000_000))
        let sealed = String(token.split(separator: ".")[3])
        #expect(SessionToken.parts(token).map { String(Substring($0.head)) } == "kt1.\(id).2000000000")
        #expect(SessionToken.parts(token).map { String(Substring($0.sealed)) } == sealed)
        #expect(SessionToken.header("kt1.\(id).0.x") == SessionToken.Header(keyID: id, expiresAt: 0))
        #expect(SessionToken.header("kt1.\(id).999999999999.") == SessionToken.Header(keyID: id, expiresAt: 999_999_999_999), "an empty sealed part is still a shape")
        for bad in ["", ".", "...", "kt1.\(id).2000000000", "kt1.\(id).2000000000.\(sealed).more", "kt2.\(id).2000000000.\(sealed)",
                    "kt1.\(id)0.2000000000.\(sealed)", "kt1.\(id.dropLast()).2000000000.\(sealed)", "kt1.\(id).20000x0000.\(sealed)",
                    "kt1.\(id).-2000000000.\(sealed)", "kt1.\(id).1000000000000.\(sealed)", "kt1.\(id)..\(sealed)",
                    "kt1.\(id).2000000000.\(String(repeating: "A", count: 8193))", "kt1.\(id.dropLast())é.2000000000.\(sealed)",
                    ".kt1.\(id).2000000000.\(sealed)"] {
            #expect(SessionToken.header(bad) == nil, "\(bad.prefix(40))")
        }
    }
}

@Suite("Core: the session protocol, defined once")
struct SessionProtocolTests {
    @Test("a beacon's body, written without a tree, reads as the BeaconInput the SDKs post")
    func beaconBody() throws {
        var device = ClientDevice(platform: .android)
        device.userAgent = "App/1 \"quoted\""
        device.screenWidth = 1080
        let exchange = ClientEvent(.httpRequest, atMs: 1_764_000_000_123, durationMs: 42,
                                   http: .init(requestUrl: "https://x/psp/paymentsessions/a/prepare", method: "POST", responseStatusCode: nil))
        let body = try JSONValue.parse(exchange.body(device: device))
        #expect(body == ["type": "ClientEvent", "service": ["name": "Kassa", "version": .string(KassaVersion.string)],
                         "client": device.client,
                         "event": ["created": "2025-11-24T16:00:00.123Z", "action": "HttpRequest", "duration": 42],
                         "http": ["requestUrl": "https://x/psp/paymentsessions/a/prepare", "method": "POST", "responseStatusCode": .null]])
        #expect(body["client"] == ["userAgent": "App/1 \"quoted\"", "screenHeight": .null, "screenWidth": 1080, "screenColorDepth": 24])
        let command = try JSONValue.parse(ClientEvent(.sdkMethodInvoked, atMs: 0, methodName: "startPaymentAttempt", succeeded: false).body(device: ClientDevice()))
        #expect(command["method"] == ["name": "startPaymentAttempt", "sdk": "Kassa", "succeeded": false])
        #expect(command["event"] == ["created": "1970-01-01T00:00:00.000Z", "action": "SDKMethodInvoked"] && command["http"] == nil)
        #expect(command["client"]?["userAgent"] == .string("Kassa/\(KassaVersion.string)"))
    }

    @Test("every instrument reads back from its own wire form")
    func instrumentsRoundTrip() throws {
        let all: [Instrument] = [.swish(msisdn: nil), .swish(msisdn: "+46739000001"), .creditCard(paymentToken: "tok"),
                                 .newCreditCard(enabledPaymentDetailsConsentCheckbox: false), .applePay, .googlePay]
        for instrument in all {
            #expect(try Instrument.parse(instrument.json).get() == instrument)
        }
    }

    @Test("every command type but ping parses; an unknown one is refused with the list of known ones")
    func commandTypes() {
        let bodies: [CommandType: JSONValue] = [.attempt: ["instrument": Instrument.applePay.json], .threeDSecure: ["cres": "x"],
                                                .threeDSecureMethod: ["completed": true], .wallet: ["payload": "x"]]
        for type in CommandType.allCases where type != .ping {
            #expect((try? PaymentSessionMachine.Command.parse(type.rawValue, bodies[type] ?? [:]).get()) != nil, "\(type)")
        }
        guard case .failure(let problem) = PaymentSessionMachine.Command.parse("pay", [:]) else {
            Issue.record("an unknown command was accepted"); return
        }
        #expect(problem.status == 400)
        #expect(problem.detail?.contains("appLaunchFailed") == true)
    }

    @Test("terminal and problem pushes are named by the type, not by string matching")
    func pushKinds() {
        #expect(PushType.allCases.filter(\.isTerminal) == [.paymentSessionComplete, .paymentSessionCanceled])
        #expect(PushType.allCases.filter(\.isProblem) == [.sessionProblemOccurred, .sdkProblemOccurred])
    }
}

