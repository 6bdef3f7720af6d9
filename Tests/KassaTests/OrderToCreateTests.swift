import KassaCore
@testable import KassaGateway
import Testing

/// A merchant's order made into the upstream document from its bytes (`OrderToCreate`).
@Suite("Order to create")
struct OrderToCreateTests {
    static let reference = "K0123456789abcdef0123456789"

    static func upstream(_ document: String, payeeID: String? = "configured-payee") throws(Problem) -> JSONValue? {
        try? JSONValue.parse(OrderToCreate.upstreamBody(Array(document.utf8), payeeReference: reference, payeeID: payeeID))
    }

    static func problem(_ document: String, payeeID: String? = "configured-payee") -> String? {
        do {
            _ = try OrderToCreate.upstreamBody(Array(document.utf8), payeeReference: reference, payeeID: payeeID)
            return nil
        } catch {
            return error.extensions["problems"]?.arrayValue?.first?["name"]?.stringValue
        }
    }

    static let urls = #""urls":{"hostUrls":["https://shop.example"],"completeUrl":"https://shop.example/c","cancelUrl":"https://shop.example/x"}"#

    @Test("every member goes on as it came; payeeInfo carries Kassa's reference; operation is added only when missing")
    func membersKept() throws {
        let sent = """
            {"before":{"n":12345678901234567890},"paymentorder":{"currency":"SEK","amount":1.5e3,"vatAmount":0,"description":"caf\\u00e9 \\"x\\"",
            \(Self.urls),"metadata":{"big":12345678901234567890,"list":[1,2.50]},"payeeInfo":{"payeeId":"p-1","payeeReference":"theirs","payeeName":"Shop"}},
            "after":true}
            """
        let doc = try #require(try Self.upstream(sent))
        let order = try #require(doc["paymentorder"])
        #expect(order["payeeInfo"] == ["payeeId": "p-1", "payeeReference": .string(Self.reference), "payeeName": "Shop"])
        #expect(order["operation"] == "Purchase")
        #expect(order["amount"] == 1500 && order["description"] == #"café "x""#)
        #expect(order["urls"]?["cancelUrl"] == "https://shop.example/x")
        #expect(doc["after"] == true)
        // Bytes a tree would have changed go as they came: a number past a Double's precision, escapes.
        let text = String(decoding: try OrderToCreate.upstreamBody(Array(sent.utf8), payeeReference: Self.reference, payeeID: nil), as: UTF8.self)
        #expect(text.contains(#""before":{"n":12345678901234567890}"#) && text.contains(#""list":[1,2.50]"#))
        #expect(text.contains(#""description":"caf\u00e9 \"x\"""#) && text.contains(#""amount":1500,"#))
        #expect(!text.contains("theirs"))
    }

    @Test("a payeeId missing or empty is the configured one; a null operation stays null")
    func payeeIDAndOperation() throws {
        let base = #"{"paymentorder":{"operation":null,"currency":"SEK","amount":1,"vatAmount":0,"description":"d","# + Self.urls
        let missing = try #require(try Self.upstream(base + "}}"))
        #expect(missing["paymentorder"]?["payeeInfo"] == ["payeeId": "configured-payee", "payeeReference": .string(Self.reference)])
        #expect(missing["paymentorder"]?["operation"] == .null)
        let empty = try #require(try Self.upstream(base + #","payeeInfo":{"payeeId":""}}}"#))
        #expect(empty["paymentorder"]?["payeeInfo"]?["payeeId"] == "configured-payee")
        #expect(Self.problem(base + "}}", payeeID: nil) == "paymentorder.payeeInfo.payeeId")
    }

    @Test("a bad order names its first bad field, as the checks on a tree named it", arguments: [
        ("{", "body"), ("[1]", "body"), (#"{"a":1} x"#, "body"), (#"{"a":1,"a":2}"#, "body"),
        ("{}", "paymentorder"), (#"{"paymentorder":null}"#, "paymentorder"), (#"{"paymentorder":[]}"#, "paymentorder"),
        (#"{"paymentorder":{}}"#, "paymentorder.currency"),
        (#"{"paymentorder":{"operation":5,"currency":"SEK"}}"#, "paymentorder.operation"),
        (#"{"paymentorder":{"currency":"SEK","amount":-1}}"#, "paymentorder.amount"),
        (#"{"paymentorder":{"currency":"SEK","amount":1.5,"vatAmount":0}}"#, "paymentorder.amount"),
        (#"{"paymentorder":{"currency":"SEK","amount":1e300,"vatAmount":0}}"#, "paymentorder.amount"),
        (#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":null}}"#, "paymentorder.urls"),
        (#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":"u"}}"#, "paymentorder.urls"),
        (#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":{"hostUrls":[1],"completeUrl":"c"}}}"#,
         "paymentorder.urls.hostUrls"),
        (#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":{"hostUrls":[]}}}"#,
         "paymentorder.urls.completeUrl"),
        (#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":{"hostUrls":[],"completeUrl":"c"},"payeeInfo":3}}"#,
         "paymentorder.payeeInfo"),
        (#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":{"hostUrls":[],"completeUrl":"c"},"productName":1}}"#,
         "paymentorder.productName"),
    ])
    func badOrders(_ document: String, _ field: String) {
        #expect(Self.problem(document) == field)
    }

    @Test("any document, a good one changed at random: refused with a problem, or sent as JSON carrying Kassa's reference")
    func changedAtRandom() throws {
        let good = Array((#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","# + Self.urls
            + #","payeeInfo":{"payeeId":"p","payeeReference":"r"}},"x":[1,{"y":null}]}"#).utf8)
        var random = SeededRandom(seed: 22)
        let alphabet = Array(#"{}[]":,\ 0123456789.eE-+truefalsnul"abcK"#.utf8)
        var sent = 0
        for _ in 0..<5_000 {
            var document = good
            for _ in 0..<Int(random.next() % 3 + 1) {
                let at = Int(random.next() % UInt64(document.count))
                let byte = alphabet[Int(random.next() % UInt64(alphabet.count))]
                switch random.next() % 3 {
                case 0: document[at] = byte
                case 1: document.insert(byte, at: at)
                default: document.remove(at: at)
                }
            }
            guard let body = try? OrderToCreate.upstreamBody(document, payeeReference: Self.reference, payeeID: "c") else { continue }
            let parsed = try #require(try? JSONValue.parse(body), "\(String(decoding: document, as: UTF8.self))")
            #expect(parsed["paymentorder"]?["payeeInfo"]?["payeeReference"] == .string(Self.reference))
            #expect((try? JSONValue.parse(document))?["x"] == parsed["x"])
            sent += 1
        }
        #expect(sent > 100, "some changed documents still pass the checks")
    }

    @Test("the Sessions API's origin is added to hostUrls once; a missing or mistyped hostUrls becomes it")
    func hostURLAdded() throws {
        func hosts(_ urls: String) throws -> JSONValue? {
            let document = #"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":"# + urls + "}}"
            let body = try OrderToCreate.upstreamBody(Array(document.utf8), payeeReference: Self.reference, payeeID: "p",
                                                      addingHostURL: "https://kassa.example")
            return try JSONValue.parse(body)["paymentorder"]?["urls"]?["hostUrls"]
        }
        #expect(try hosts(#"{"hostUrls":["https://shop.example"],"completeUrl":"c"}"#) == ["https://shop.example", "https://kassa.example"])
        #expect(try hosts(#"{"hostUrls":["https://kassa.example"],"completeUrl":"c"}"#) == ["https://kassa.example"])
        #expect(try hosts(#"{"completeUrl":"c"}"#) == ["https://kassa.example"])
        #expect(try hosts(#"{"hostUrls":"x","completeUrl":"c"}"#) == ["https://kassa.example"])
        #expect(Self.problem(#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","urls":{"hostUrls":[]}}}"#)
                == "paymentorder.urls.completeUrl")
    }

    @Test("a good order passes")
    func goodOrder() {
        #expect(Self.problem(#"{"paymentorder":{"currency":"SEK","amount":1,"vatAmount":0,"description":"d","# + Self.urls + "}}") == nil)
    }
}
