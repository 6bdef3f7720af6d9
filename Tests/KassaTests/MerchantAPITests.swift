import Foundation
import GRDB
import KassaCore
@testable import KassaGateway
import KassaSimulator
import KassaUpstream
import Testing
@testable import kassa

/// The Merchant Backend API end to end: real HTTP to the gateway, real curl
/// from the gateway to the simulator, a real SQLite file.
@Suite("Merchant Backend API")
struct MerchantAPITests {
    let client = UpstreamClient()
    static let key = ("Your-Api-Key", "test-key")
    static let json = ("Content-Type", "application/json")
    static let mobileSDK = "https://api.payex.com/psp/errordetail/mobilesdk/"

    static func paymentOrder(instrument: String? = nil, description: String = "Test purchase") -> JSONValue {
        var order: [String: JSONValue] = [
            "operation": "Purchase", "currency": "SEK", "amount": 1500, "vatAmount": 375,
            "description": .string(description), "userAgent": "KassaTests/1", "language": "sv-SE",
            "urls": ["hostUrls": ["https://merchant.example"], "completeUrl": "https://merchant.example/complete",
                     "cancelUrl": "https://merchant.example/cancel"],
            "payeeInfo": ["payeeId": "5cabf558-5283-482f-b252-4d58e06f6f3b", "payeeName": "Merchant"],
        ]
        if let instrument { order["instrument"] = .string(instrument) }
        return ["paymentorder": .object(order)]
    }

    func post(_ t: TestNode, _ path: String, _ body: JSONValue, key: String? = "test-key") async throws -> UpstreamResponse {
        var headers = [("Content-Type", "application/json")]
        if let key { headers.append(("Your-Api-Key", key)) }
        return try await client.send(UpstreamRequest(method: "POST", url: t.base + path, headers: headers, body: body.bytes))
    }

    func problemType(_ r: UpstreamResponse) -> String? { (try? JSONValue.parse(r.body))?["type"]?.stringValue }

    @Test("an order made for a session names it only when a session can be made from it (a v3 answer with view-paymentsession)")
    func orderNamesItsSessionOnlyWhenOneCanFollow() async throws {
        let t = try TestNode()
        // No version and no productName: Swedbank Pay makes a v2 order, which has no payment session.
        let v2 = try await t.node.gateway.merchant.createPaymentOrder(Self.paymentOrder().bytes, traceID: "t", sessionID: "s-v2")
        let v3 = try await t.node.gateway.merchant.createPaymentOrder(Self.paymentOrder().bytes, traceID: "t", sessionID: "s-v3",
                                                                      version: .v3_1)
        #expect(v2.viewPaymentSession == nil && v3.viewPaymentSession != nil)
        await t.node.store.eventLog.flush()
        #expect(try t.node.store.paymentOrder(payeeReference: v3.payeeReference)?.sessionID == "s-v3")
        // Named as no session's, it is deleted by its own age rather than kept for a session never stored.
        let v2Record = try #require(try t.node.store.paymentOrder(payeeReference: v2.payeeReference))
        #expect(v2Record.sessionID == nil)
        await t.stop()
    }

    @Test("the root lists the endpoints; a missing or wrong key gets the seed's 401 problem")
    func rootAndAuth() async throws {
        let t = try TestNode()
        let root = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/", headers: [("Your-Api-Key", "second-key")]))
        #expect(root.status == 200)
        #expect(root.header("cache-control") == "public, max-age=86400", "the SDKs cache the root (seed 000)")
        let links = try JSONValue.parse(root.body)
        #expect(links["consumers"]?.stringValue == "/swedbank-pay-mobile/consumers")
        #expect(links["paymentorders"]?.stringValue == "/swedbank-pay-mobile/paymentorders")

        for headers in [[], [("Your-Api-Key", "wrong")], [("Your-Api-Key", "test-ke")], [("Your-Api-Key", "")]] {
            let denied = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/", headers: headers))
            #expect(denied.status == 401)
            #expect(denied.header("content-type") == "application/problem+json")
            #expect(problemType(denied) == Self.mobileSDK + "unauthorized")
        }
        let deniedPost = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder(), key: nil)
        #expect(deniedPost.status == 401)
        await t.stop()
    }

    @Test("consumers are forwarded to /psp/consumers and must come back with view-consumer-identification")
    func consumers() async throws {
        let t = try TestNode()
        let body: JSONValue = ["operation": "initiate-consumer-session", "language": "sv-SE",
                               "shippingAddressRestrictedToCountryCodes": ["NO", "SE", "DK"]]
        let r = try await post(t, "/swedbank-pay-mobile/consumers", body)
        #expect(r.status == 200)
        let doc = try JSONValue.parse(r.body)
        #expect(doc["operations"]?.arrayValue?.contains { $0["rel"]?.stringValue == "view-consumer-identification" } == true)

        let missing = try await post(t, "/swedbank-pay-mobile/consumers", ["operation": "initiate-consumer-session", "language": "sv-SE"])
        #expect(missing.status == 400)
        #expect(problemType(missing) == Self.mobileSDK + "badrequest")
        #expect(try JSONValue.parse(missing.body)["detail"]?.stringValue?.contains("shippingAddressRestrictedToCountryCodes") == true)

        // An upstream problem (bad country codes) is forwarded with its status.
        let upstreamProblem = try await post(t, "/swedbank-pay-mobile/consumers",
                                             ["operation": "initiate-consumer-session", "language": "sv-SE",
                                              "shippingAddressRestrictedToCountryCodes": ["sweden"]])
        #expect(upstreamProblem.status == 400)
        #expect(problemType(upstreamProblem) == "https://api.payex.com/psp/errordetail/consumers/inputerror")
        await t.stop()
    }

    @Test("a session made from a payment order answers with both rows stored: the session's commit carries the order's")
    func sessionCarriesOrderRow() async throws {
        let t = try TestNode()
        for _ in 0..<5 {
            let created = try await t.sessions.createResponse(["paymentOrder": SessionClient.order()])
            #expect(created.status == 201)
            let id = try #require(try JSONValue.parse(created.body)["id"]?.stringValue)
            let session = try #require(try t.node.store.session(id: id))
            let reference = try #require(session.payeeReference)
            #expect(try t.node.store.paymentOrder(payeeReference: reference)?.paymentOrderID == session.paymentOrderID)
        }
        await t.stop()
    }

    @Test("a payment order gets Kassa's payee reference, is stored, and is forwarded")
    func paymentOrders() async throws {
        let t = try TestNode()
        let r = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder())
        #expect(r.status == 201)
        let doc = try JSONValue.parse(r.body)
        let id = try #require(doc["paymentorder"]?["id"]?.stringValue)
        #expect(id.hasPrefix("/psp/paymentorders/"))
        #expect(doc["operations"]?.arrayValue?.contains { $0["rel"]?.stringValue == "view-paymentorder" } == true)
        #expect(doc["mobileSDK"] == nil, "no instrument mode, no mobileSDK")
        let reference = try #require(doc["paymentorder"]?["payeeInfo"]?["payeeReference"]?.stringValue)
        #expect(reference.count <= 30)
        let stored = try t.node.store.paymentOrder(payeeReference: reference)
        #expect(stored?.paymentOrderID == id)

        // "K", the creation time (10 hex digits), 72 random bits (18 hex digits).
        #expect(reference.count == 29 && reference.first == "K" && reference.dropFirst().allSatisfy(\.isHexDigit))
        // Two orders never share a reference, and a later one sorts after (time first: see `timeOrderedHex`).
        try await Task.sleep(for: .milliseconds(2))
        let second = try JSONValue.parse(try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder()).body)
        let secondReference = try #require(second["paymentorder"]?["payeeInfo"]?["payeeReference"]?.stringValue)
        #expect(secondReference != reference && secondReference > reference)
        await t.stop()
    }

    @Test("malformed or incomplete payment orders get 400 badrequest naming the field", arguments: [
        ("not json", "body"), ("[1,2]", "body"), ("{}", "paymentorder"), (#"{"paymentorder": 5}"#, "paymentorder"),
        (#"{"paymentorder": {"currency": "SEK", "amount": "1500", "vatAmount": 0, "description": "d", "urls": {"hostUrls": [], "completeUrl": "c"}}}"#, "paymentorder.amount"),
        (#"{"paymentorder": {"currency": "SEK", "amount": 1500, "vatAmount": 0, "urls": {"hostUrls": [], "completeUrl": "c"}}}"#, "paymentorder.description"),
        (#"{"paymentorder": {"currency": "SEK", "amount": 1500, "vatAmount": 0, "description": "d", "urls": {"completeUrl": "c"}}}"#, "paymentorder.urls.hostUrls"),
    ])
    func badPaymentOrders(_ body: String, _ field: String) async throws {
        let t = try TestNode()
        let r = try await client.send(UpstreamRequest(method: "POST", url: t.base + "/swedbank-pay-mobile/paymentorders",
                                                      headers: [Self.key, Self.json], body: Array(body.utf8)))
        #expect(r.status == 400)
        let problem = try JSONValue.parse(r.body)
        #expect(problem["type"]?.stringValue == Self.mobileSDK + "badrequest")
        #expect(problem["problems"]?.arrayValue?.first?["name"]?.stringValue == field)
        await t.stop()
    }

    @Test("instrument mode: mobileSDK lists the instruments, and setInstrument PATCHes upstream")
    func instrumentMode() async throws {
        let t = try TestNode()
        let r = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder(instrument: "CreditCard"))
        #expect(r.status == 201)
        let doc = try JSONValue.parse(r.body)
        let setInstrument = try #require(doc["mobileSDK"]?["setInstrument"]?.stringValue)
        #expect(doc["mobileSDK"]?["validInstruments"]?.arrayValue?.contains("Swish") == true)

        let patch = try await client.send(UpstreamRequest(
            method: "PATCH", url: t.base + setInstrument, headers: [Self.key, Self.json],
            body: (["paymentorder": ["operation": "SetInstrument", "instrument": "Swish"]] as JSONValue).bytes))
        #expect(patch.status == 200)
        #expect(try JSONValue.parse(patch.body)["paymentorder"]?["instrument"]?.stringValue == "Swish")

        let wrongOperation = try await client.send(UpstreamRequest(
            method: "PATCH", url: t.base + setInstrument, headers: [Self.key, Self.json],
            body: (["paymentorder": ["operation": "Abort", "instrument": "Swish"]] as JSONValue).bytes))
        #expect(wrongOperation.status == 400)
        #expect(problemType(wrongOperation) == Self.mobileSDK + "badrequest")

        let unknown = try await client.send(UpstreamRequest(
            method: "PATCH", url: t.base + "/swedbank-pay-mobile/paymentorders/nope/setInstrument", headers: [Self.key, Self.json],
            body: (["paymentorder": ["operation": "SetInstrument", "instrument": "Swish"]] as JSONValue).bytes))
        #expect(unknown.status == 404)

        // The PATCH went upstream: the committed event log shows it.
        await t.node.store.eventLog.flush()
        let events = try t.node.store.eventLog.events()
        #expect(events.contains { $0.kind == "upstream.request" && $0.data?["method"]?.stringValue == "PATCH" })
        await t.stop()
    }

    @Test("upstream faults: timeout → 504; reset, garbage, truncated → 502; a 500 problem is forwarded as it is", arguments: [
        ("timeout", 504, mobileSDK + "gatewaytimeout"), ("reset", 502, mobileSDK + "badgateway"),
        ("malformed", 502, mobileSDK + "badgateway"), ("truncated", 502, mobileSDK + "badgateway"),
        ("status=500", 500, "https://api.payex.com/psp/errordetail/systemerror"),
    ])
    func upstreamFaults(_ fault: String, _ status: Int, _ type: String) async throws {
        // Long enough that only the timeout fault times out, even with the suite's other tests running.
        let t = try TestNode(upstreamTimeoutMs: 1_500)
        let r = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder(description: "sim-fault:\(fault)"))
        #expect(r.status == status)
        #expect(problemType(r) == type)
        // gatewayStatus only when Swedbank Pay answered something unusable (the SDKs then report an invalid
        // backend response); a reset or a timeout is a connection failure to them, without it.
        let gatewayStatus = try JSONValue.parse(r.body)["gatewayStatus"]
        if fault == "reset" || fault == "timeout" { #expect(gatewayStatus == nil) }
        if fault == "malformed" {
            #expect(gatewayStatus?.intValue == 200)
            #expect(try JSONValue.parse(r.body)["body"]?.stringValue != nil)
        }
        // The next request, without the fault, goes through.
        let ok = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder())
        #expect(ok.status == 201)
        await t.stop()
    }

    @Test("an unreachable upstream gives 502 badgateway")
    func unreachable() async throws {
        let t = try TestNode(upstreamURL: "http://127.0.0.1:1")
        let r = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder())
        #expect(r.status == 502)
        #expect(problemType(r) == Self.mobileSDK + "badgateway")
        await t.stop()
    }

    @Test("a success without view-paymentorder is a bad gateway; rule-based faults apply per route")
    func missingOperationAndRules() async throws {
        let t = try TestNode()
        t.simulator.setFaults([FaultRule(route: "paymentorders.create", fault: .status(503), rate: 1)])
        let r = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder())
        #expect(r.status == 503, "an upstream problem is forwarded with its status")
        #expect(problemType(r) == "https://api.payex.com/psp/errordetail/systemerror")
        let consumers = try await post(t, "/swedbank-pay-mobile/consumers",
                                       ["operation": "initiate-consumer-session", "language": "sv-SE",
                                        "shippingAddressRestrictedToCountryCodes": ["SE"]])
        #expect(consumers.status == 200, "the rule applies to its route only")
        await t.stop()
    }

    @Test("every upstream exchange is in the event log, redacted; no secret is stored or logged")
    func eventLogAndSecrets() async throws {
        let t = try TestNode()
        _ = try await post(t, "/swedbank-pay-mobile/paymentorders", Self.paymentOrder())
        _ = try await post(t, "/swedbank-pay-mobile/consumers", ["operation": "initiate-consumer-session", "language": "sv-SE",
                                                                 "shippingAddressRestrictedToCountryCodes": ["SE"]])
        await t.node.store.eventLog.flush()
        let events = try t.node.store.eventLog.events()
        let responses = events.filter { $0.kind == "upstream.response" }
        #expect(responses.count == 2)
        #expect(responses.allSatisfy { $0.status != nil && $0.durationMs != nil && $0.data?["path"] != nil })
        #expect(responses.contains { $0.data?["path"]?.stringValue == "/psp/paymentorders" && $0.status == 201 })
        #expect(events.filter { $0.kind == "upstream.request" }.count == 2)

        // Scan the whole database file and the log output for the secrets.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: t.dir.file("kassa.sqlite")))
        let wal = (try? Data(contentsOf: URL(fileURLWithPath: t.dir.file("kassa.sqlite-wal")))) ?? Data()
        let all = String(decoding: bytes + wal, as: UTF8.self)
        #expect(!all.contains(Simulator.defaultToken))
        #expect(!all.contains("test-key"))
        #expect(!t.logs.text.contains(Simulator.defaultToken))
        #expect(!t.logs.text.contains("test-key"))
        // The consumer token upstream returned is a secret too.
        let consumerBody = responses.first { $0.data?["path"]?.stringValue == "/psp/consumers" }?.data?["body"]
        #expect(consumerBody?["token"]?.stringValue == Redaction.placeholder)
        await t.stop()
    }

    @Test("Android helper: an intent page for a valid package, 400 for anything unsafe")
    func androidIntent() async throws {
        let t = try TestNode()
        let url = t.base + "/swedbank-pay-mobile/sdk-callback/android-intent?package=your.ecom.app&id=abb50c53-53c1-4138-923f-59fcf0acd08d"
        let r = try await client.send(UpstreamRequest(url: url))
        #expect(r.status == 200)
        #expect(r.header("content-type")?.hasPrefix("text/html") == true)
        let expected = "intent://127.0.0.1:\(t.node.port)/swedbank-pay-mobile/sdk-callback/android-intent?package=your.ecom.app&amp;id=abb50c53-53c1-4138-923f-59fcf0acd08d#Intent;scheme=https;action=com.swedbankpay.mobilesdk.VIEW_PAYMENTORDER;package=your.ecom.app;end;"
        #expect(r.text.contains(#"<meta http-equiv="refresh" content="0;url=\#(expected)">"#))
        #expect(r.text.contains(#"<a href="\#(expected)">"#))

        // The SDK compares the URL it gets back with its paymentUrl as a string.
        // These ids are written as OkHttp's addQueryParameter writes them
        // (swedbank-pay-sdk-android mobilesdk/…/PaymentOrderUrls.kt buildPaymentUrl):
        // `:` `+` space `~` `'` `%` and non-ASCII encoded, `*` `-` `.` `_` kept.
        for id in ["a%3Ab", "a%2Bb", "a%20b", "a%7Eb", "a%27b", "100%25", "%C3%A5*-._"] {
            let query = "package=your.ecom.app&id=" + id
            let page = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/sdk-callback/android-intent?" + query))
            #expect(page.status == 200)
            #expect(page.text.contains("/android-intent?package=your.ecom.app&amp;id=\(id)#Intent;"), "\(id)")
        }
        // A public http URL (development) keeps its scheme, so the strings still match.
        let plain = try TestNode { $0.publicBaseURL = "http://shop.example:8080" }
        let local = try await client.send(UpstreamRequest(url: plain.base + "/swedbank-pay-mobile/sdk-callback/android-intent?package=a.b&id=1"))
        #expect(local.text.contains("intent://shop.example:8080/swedbank-pay-mobile/sdk-callback/android-intent?package=a.b&amp;id=1#Intent;scheme=http;"))
        await plain.stop()

        for bad in ["package=", "package=not%20a%20package", "package=com.x%22%3E%3Cscript%3E", "id=1",
                    "package=a.b&x=" + String(repeating: "y", count: 3000)] {
            let refused = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/sdk-callback/android-intent?" + bad))
            #expect(refused.status == 400, "\(bad)")
            #expect(problemType(refused) == Self.mobileSDK + "badrequest")
        }
        await t.stop()
    }

    @Test("iOS helper: 301 to the trampoline, with fallback=true to the custom scheme, 400 for unsafe input")
    func iosUniversalLink() async throws {
        // The seed's examples use the stage trampoline; the default is production's.
        let t = try TestNode { $0.iosTrampolineURL = GatewayConfiguration.stageTrampolineURL }
        let path = "/swedbank-pay-mobile/sdk-callback/ios-universal-link"
        let query = "scheme=yourecomapp&language=en-US&id=abb50c53-53c1-4138-923f-59fcf0acd08d&app=Your%20Ecom%20App"
        let host = "127.0.0.1:\(t.node.port)"
        let first = try await client.send(UpstreamRequest(url: t.base + path + "?" + query))
        #expect(first.status == 301)
        let target = PaymentURLHelper.percentEncode("https://\(host)\(path)?\(query)&fallback=true")
        #expect(first.header("location") == "https://ecom.stage.payex.com/externalresourcehost/trampoline?target=\(target)&language=en-US&app=Your%20Ecom%20App")

        let fallback = try await client.send(UpstreamRequest(url: t.base + path + "?" + query + "&fallback=true"))
        #expect(fallback.status == 301)
        #expect(fallback.header("location") == "yourecomapp://\(host)\(path)?\(query)&fallback=true")

        for bad in ["language=en-US", "scheme=yourecomapp", "scheme=https&language=en-US&fallback=true",
                    "scheme=javascript&language=en-US&fallback=true", "scheme=http&language=en-US",
                    "scheme=a%2F%2Fevil.example&language=en-US&fallback=true", "scheme=app&language=en-US&fallback=maybe",
                    "scheme=app&language=en%20US", "scheme=app&language=en-US&app=" + String(repeating: "a", count: 200),
                    "scheme=app&language=en-US&x=" + String(repeating: "y", count: 3000)] {
            let refused = try await client.send(UpstreamRequest(url: t.base + path + "?" + bad))
            #expect(refused.status == 400, "\(bad)")
            #expect(refused.header("location") == nil)
        }
        // A hostile Host header is refused, not echoed into a Location.
        let port = t.node.port
        let hostile = try await onThread { () -> Int in
            let s = try RawSocket(port: port)
            try s.send("GET \(path)?scheme=app&language=en-US HTTP/1.1\r\nHost: evil.example/x?\r\n\r\n")
            return s.readHTTPResponse()?.status ?? 0
        }
        #expect(hostile == 400)
        await t.stop()
    }

    @Test("the helpers need no key and change nothing")
    func helpersHaveNoSideEffects() async throws {
        let t = try TestNode()
        for _ in 0..<3 {
            let r = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/sdk-callback/android-intent?package=a.b"))
            #expect(r.status == 200)
        }
        let count = try await t.node.store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM payment_orders") }
        #expect(count == 0)
        await t.stop()
    }

    @Test("apple-app-site-association lists the configured app ids")
    func aasa() async throws {
        let t = try TestNode()
        let r = try await client.send(UpstreamRequest(url: t.base + "/.well-known/apple-app-site-association"))
        #expect(r.status == 200)
        let doc = try JSONValue.parse(r.body)
        let detail = doc["applinks"]?["details"]?.arrayValue?.first
        #expect(detail?["appID"]?.stringValue == "TEAMID.com.example.app")
        #expect(detail?["paths"] == ["/swedbank-pay-mobile/sdk-callback/*"])
        // The iOS 13+ style next to the old one (seed 001).
        #expect(detail?["appIDs"] == ["TEAMID.com.example.app"])
        #expect(detail?["components"]?.arrayValue?.first?["/"]?.stringValue == "/swedbank-pay-mobile/sdk-callback/*")
        #expect(doc["applinks"]?["apps"] == [])
        await t.stop()
    }
}
