import Foundation
import KassaCore
import KassaEdge
@testable import KassaGateway
import KassaSimulator
import KassaUpstream
import Testing
@testable import kassa

/// Kassa driven end to end with request bodies shaped as the Swedbank Pay SDKs and the sample
/// merchant backends send them, against a simulator that answers in each API version's shapes.
@Suite("Contract: SDK- and sample-shaped requests, v2 and v3 answers")
struct ContractTests {
    let client = UpstreamClient()
    static let payeeID = "5cabf558-5283-482f-b252-4d58e06f6f3b"

    /// The order an SDK sends by default: payeeId and payeeReference empty, the Android payment
    /// url helper as paymentUrl (swedbank-pay-sdk-android mobilesdk/…/PaymentOrder.kt, PayeeInfo.kt,
    /// PaymentOrderUrls.kt), optionally in instrument mode and v3 by productName.
    static func sdkOrder(productName: String? = nil, instrument: String? = nil, base: String = "https://shop.example") -> JSONValue {
        var order: [String: JSONValue] = [
            "currency": "SEK", "amount": 1500, "vatAmount": 375, "description": "Purchase", "language": "sv-SE",
            "userAgent": "SwedbankPaySDK-Android/5.0.4", "operation": "Purchase",
            "urls": ["hostUrls": [.string(base)], "completeUrl": .string(base + "/complete"), "cancelUrl": .string(base + "/cancel"),
                     "paymentUrl": .string(base + "/swedbank-pay-mobile/sdk-callback/android-intent?package=com.example.app&id=1f2e")],
            "payeeInfo": ["payeeId": "", "payeeReference": ""],
            "generateRecurrenceToken": false, "disablePaymentMenu": false,
        ]
        if let productName { order["productName"] = .string(productName) }
        if let instrument { order["instrument"] = .string(instrument) }
        return ["paymentorder": .object(order)]
    }

    /// The sample backend's full order: payer, orderItems, riskIndicator (swedbank-pay-sdk-mobile-example-merchant
    /// examples/integration-tests/requests/paymentOrderRequest.json, shape only).
    static let fullOrder: JSONValue = [
        "operation": "Purchase", "currency": "SEK", "amount": 1500, "vatAmount": 375, "description": "Test purchase",
        "userAgent": "Mozilla/5.0", "language": "sv-SE",
        "urls": ["hostUrls": ["https://shop.example"], "completeUrl": "https://shop.example/complete",
                 "cancelUrl": "https://shop.example/cancel", "paymentUrl": "https://shop.example/pay"],
        "payeeInfo": ["payeeId": "", "payeeReference": "", "payeeName": "Shop", "orderReference": "or-123", "subsite": "main"],
        "payer": ["firstName": "Leia", "lastName": "Ahlström", "email": "leia@example.com", "msisdn": "+46739000001"],
        "orderItems": [["reference": "P1", "name": "Product1", "type": "PRODUCT", "class": "ProductGroup1", "quantity": 1,
                        "quantityUnit": "pcs", "unitPrice": 1500, "vatPercent": 2500, "amount": 1500, "vatAmount": 375,
                        "restrictedToInstruments": ["CreditCard"]]],
        "riskIndicator": ["deliveryEmailAddress": "leia@example.com", "deliveryTimeFrameIndicator": "01",
                          "pickUpAddress": ["name": "Leia", "streetAddress": "Helgestavägen 9", "zipCode": "19792", "city": "Bro", "countryCode": "SE"]],
    ]

    func send(_ t: TestNode, _ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> UpstreamResponse {
        try await client.send(UpstreamRequest(method: method, url: t.base + path,
                                              headers: [("Content-Type", "application/json"), ("Your-Api-Key", "test-key")],
                                              body: body?.bytes))
    }

    func upstreamOrder(_ t: TestNode, _ id: String) async throws -> UpstreamResponse {
        try await client.send(UpstreamRequest(url: t.simulator.baseURL + id, headers: [("Authorization", "Bearer \(Simulator.defaultToken)")]))
    }

    @Test("an SDK's default v3 order: payeeId filled in, the answer read as paymentOrder with view-checkout, forwarded byte for byte plus mobileSDK")
    func sdkDefaultOrderV3() async throws {
        try await withTestNode(configure: { $0.payeeID = Self.payeeID }) { t in
            let r = try await send(t, "POST", "/swedbank-pay-mobile/paymentorders", Self.sdkOrder(productName: "Checkout3", instrument: "CreditCard"))
            #expect(r.status == 201)
            let answer = try JSONValue.parse(r.body)
            let id = try #require(answer["paymentOrder"]?["id"]?.stringValue, "the SDKs decode paymentOrder.id")
            #expect(answer["operations"]?.arrayValue?.contains { $0["rel"]?.stringValue == "view-checkout" } == true)
            let setInstrument = try #require(answer["mobileSDK"]?["setInstrument"]?.stringValue)
            #expect(setInstrument.hasPrefix("/swedbank-pay-mobile/paymentorders/K"))

            // Upstream got the configured payee id for the SDK's "" and Kassa's own reference.
            let upstream = try JSONValue.parse(try await upstreamOrder(t, id).body)
            #expect(upstream["paymentOrder"]?["payeeInfo"]?["payeeId"]?.stringValue == Self.payeeID)
            #expect(upstream["paymentOrder"]?["payeeInfo"]?["payeeReference"]?.stringValue?.hasPrefix("K") == true)

            // Byte for byte: the answer up to the spliced member is the upstream document.
            let text = String(decoding: r.body, as: UTF8.self)
            let cut = try #require(text.range(of: ",\"mobileSDK\":"))
            let upstreamPart = try JSONValue.parse(Array((text[..<cut.lowerBound] + "}").utf8))
            #expect(upstreamPart == upstream, "the forwarded part is the order as Swedbank Pay answered it")
            // Instrument mode's valid instruments are the order's available ones (seed 000).
            let available = try #require(upstreamPart["paymentOrder"]?["availableInstruments"])
            #expect(available.arrayValue?.isEmpty == false && answer["mobileSDK"]?["validInstruments"] == available)

            // v3 instrument mode the SDKs' way: PATCH …/patch with the set-instrument href.
            let href = try #require(answer["operations"]?.arrayValue?.first { $0["rel"]?.stringValue == "set-instrument" }?["href"]?.stringValue)
            let patched = try await send(t, "PATCH", "/swedbank-pay-mobile/patch",
                                         ["href": .string(href), "paymentorder": ["operation": "SetInstrument", "instrument": "Swish"]])
            #expect(patched.status == 200)
            #expect(try JSONValue.parse(patched.body)["paymentOrder"]?["instrument"]?.stringValue == "Swish")
            // Only an order created here may be changed, and the 404 uses the type the SDKs know.
            let foreign = try await send(t, "PATCH", "/swedbank-pay-mobile/patch",
                                         ["href": .string(t.simulator.baseURL + "/psp/paymentorders/someone-elses"),
                                          "paymentorder": ["operation": "Abort", "abortReason": "CancelledByConsumer"]])
            #expect(foreign.status == 404)
            #expect(try JSONValue.parse(foreign.body)["type"]?.stringValue == "https://api.payex.com/psp/errordetail/notfound")
        }
    }

    @Test("a v2 order (no productName, no version) is forwarded as paymentorder with view-paymentorder and mobileSDK")
    func sdkDefaultOrderV2() async throws {
        try await withTestNode(configure: { $0.payeeID = Self.payeeID }) { t in
            let r = try await send(t, "POST", "/swedbank-pay-mobile/paymentorders", Self.sdkOrder(instrument: "CreditCard"))
            #expect(r.status == 201)
            let answer = try JSONValue.parse(r.body)
            #expect(answer["paymentorder"]?["id"]?.stringValue != nil)
            #expect(answer["operations"]?.arrayValue?.contains { $0["rel"]?.stringValue == "view-paymentorder" } == true)
            let setInstrument = try #require(answer["mobileSDK"]?["setInstrument"]?.stringValue)
            let patched = try await send(t, "PATCH", setInstrument, ["paymentorder": ["operation": "SetInstrument", "instrument": "Swish"]])
            #expect(patched.status == 200)
            #expect(try JSONValue.parse(patched.body)["paymentorder"]?["instrument"]?.stringValue == "Swish")
        }
    }

    @Test("refused before anything is sent: an empty payeeId with no --payee-id, a consumers call with another operation, unknown paths")
    func refusals() async throws {
        try await withTestNode { t in
            let order = try await send(t, "POST", "/swedbank-pay-mobile/paymentorders", Self.sdkOrder())
            #expect(order.status == 400)
            #expect(try JSONValue.parse(order.body)["problems"]?.arrayValue?.first?["name"]?.stringValue == "paymentorder.payeeInfo.payeeId")
            let consumers = try await send(t, "POST", "/swedbank-pay-mobile/consumers",
                                           ["operation": "something-else", "language": "sv-SE", "shippingAddressRestrictedToCountryCodes": ["SE"]])
            #expect(consumers.status == 400)
            #expect(try JSONValue.parse(consumers.body)["problems"]?.arrayValue?.first?["name"]?.stringValue == "operation")
            let missing = try await send(t, "GET", "/swedbank-pay-mobile/nothing-here")
            #expect(missing.status == 404)
            #expect(try JSONValue.parse(missing.body)["type"]?.stringValue == "https://api.payex.com/psp/errordetail/notfound")
            // The simulator is as strict as the real API: an empty payeeId is refused there too.
            var direct = Self.sdkOrder(productName: "Checkout3")
            if case .object(var root) = direct, case .object(var o)? = root["paymentorder"] {
                o["payeeInfo"] = ["payeeId": "", "payeeReference": "ref1"]
                root["paymentorder"] = .object(o)
                direct = .object(root)
            }
            let upstream = try await client.send(UpstreamRequest(method: "POST", url: t.simulator.baseURL + "/psp/paymentorders",
                                                                 headers: [("Authorization", "Bearer \(Simulator.defaultToken)")], body: direct.bytes))
            #expect(upstream.status == 400)
            #expect(try JSONValue.parse(upstream.body)["problems"]?.arrayValue?.contains { $0["name"]?.stringValue == "paymentorder.payeeInfo.payeeId" } == true)
        }
    }

    @Test("a session from the sample's full order: Kassa asks for version 3.1 and follows the view-paymentsession next to view-checkout")
    func sessionFromFullOrder() async throws {
        try await withTestNode(configure: { $0.payeeID = Self.payeeID }) { t in
            let c = t.sessions
            let r = try await c.createResponse(["paymentOrder": Self.fullOrder])
            #expect(r.status == 201)
            let id = try #require(try JSONValue.parse(r.body)["id"]?.stringValue)
            let record = try #require(try t.node.store.session(id: id))
            let orderID = try #require(record.paymentOrderID)
            let upstream = try await upstreamOrder(t, orderID)
            #expect(upstream.header("content-type")?.hasSuffix("version=3.1") == true)
            let doc = try JSONValue.parse(upstream.body)
            #expect(doc["paymentOrder"]?["orderItems"]?.arrayValue?.count == 1, "every member of the sample's order went upstream")
            #expect(doc["paymentOrder"]?["riskIndicator"]?["pickUpAddress"]?["city"]?.stringValue == "Bro")
            let view = doc["operations"]?.arrayValue?.first { $0["rel"]?.stringValue == "view-paymentsession" }?["href"]?.stringValue
            #expect(t.node.gateway.sessions.storedHref(record) == view)
            #expect(view.map { !record.viewHref.contains($0) } == true, "sealed at rest")
            // And the session runs to the instruments on that href.
            let token = try #require(try JSONValue.parse(r.body)["clientToken"]?.stringValue)
            let stream = try await c.stream(.init(id: id, token: token, streamUrl: "/v1/sessions/\(id)/stream"))
            let fetched = try await stream.event(.paymentSessionFetched)
            #expect(fetched["data"]?["availableInstruments"]?.arrayValue?.isEmpty == false)
        }
    }

    @Test("the sample's full order goes upstream whole, and neither the event log nor a log line keeps the payer's name or address")
    func fullOrderPayerNotLogged() async throws {
        try await withTestNode(configure: { $0.payeeID = Self.payeeID }) { t in
            let created = try await send(t, "POST", "/swedbank-pay-mobile/paymentorders", ["paymentorder": Self.fullOrder])
            #expect(created.status == 201)
            let answer = try JSONValue.parse(created.body)
            let id = try #require((answer["paymentOrder"] ?? answer["paymentorder"])?["id"]?.stringValue, "a v2 order: no productName")
            let upstream = try JSONValue.parse(try await upstreamOrder(t, id).body)
            #expect((upstream["paymentOrder"] ?? upstream["paymentorder"])?["riskIndicator"]?["pickUpAddress"]?["streetAddress"]?.stringValue == "Helgestavägen 9",
                    "Swedbank Pay gets the address as the app sent it")
            let session = try await t.sessions.createResponse(["paymentOrder": Self.fullOrder])
            #expect(session.status == 201)
            await t.node.store.eventLog.flush()
            let events = try t.node.store.eventLog.events()
            let bodies = events.filter { $0.kind == "upstream.request" }.map { String(decoding: ($0.data ?? .null).bytes, as: UTF8.self) }
            #expect(bodies.filter { $0.contains("Product1") }.count == 2, "both orders' bodies are in the log")
            let everything = events.map { $0.summary + String(decoding: ($0.data ?? .null).bytes, as: UTF8.self) }.joined()
            for personal in ["Leia", "Ahlstr", "Helgestav", "19792"] {
                #expect(!everything.contains(personal), "\(personal) in the event log")
                #expect(!t.logs.text.contains(personal), "\(personal) in a log line")
            }
        }
    }

    @Test("answers are read in either spelling; a v2 answer has no PaymentSession")
    func readsBothSpellings() throws {
        // Seed 000's v2 answer.
        let v2: JSONValue = ["paymentorder": ["id": "/psp/paymentorders/1"],
                             "operations": [["rel": "view-paymentorder", "method": "GET", "href": "https://ecom.example/paymentmenu/x"],
                                            ["rel": "update-paymentorder-setinstrument", "method": "PATCH", "href": "https://api.example/psp/paymentorders/1"]]]
        let a = try #require(MerchantAPI.PaymentOrderAnswer.decode(v2.bytes)).get()
        #expect(a.id == "/psp/paymentorders/1" && a.viewPaymentSession == nil)
        #expect(a.setInstrumentHref == "https://api.example/psp/paymentorders/1")
        // A v2 answer spelled paymentOrder (what the sample backend reads even for v2).
        let camel: JSONValue = ["paymentOrder": ["id": "/psp/paymentorders/2"],
                                "operations": [["rel": "view-paymentorder", "method": "GET", "href": "https://ecom.example/paymentmenu/y"]]]
        #expect((try? MerchantAPI.PaymentOrderAnswer.decode(camel.bytes)?.get())?.id == "/psp/paymentorders/2")
        // Seed 002's v3 answer.
        let v3: JSONValue = ["paymentOrder": ["id": "/psp/paymentorders/3"],
                             "operations": [["rel": "view-checkout", "method": "GET", "href": "https://ecom.example/checkout/z"],
                                            ["rel": "view-paymentsession", "method": "GET", "href": "https://ecom.example/psp/paymentsessions/t"],
                                            ["rel": "set-instrument", "method": "PATCH", "href": "https://api.example/psp/paymentorders/3"]]]
        let b = try #require(MerchantAPI.PaymentOrderAnswer.decode(v3.bytes)).get()
        #expect(b.viewPaymentSession == "https://ecom.example/psp/paymentsessions/t")
        #expect(b.setInstrumentHref == "https://api.example/psp/paymentorders/3")
        // Neither view operation: refused.
        #expect((try? MerchantAPI.PaymentOrderAnswer.decode((["paymentOrder": ["id": "x"], "operations": []] as JSONValue).bytes)?.get()) == nil)
        // Read from the bytes as the tree was read: the first operation of a rel counts, even without
        // an href; paymentOrder before paymentorder, wherever each stands; the instruments kept.
        let both = Array(#"{"operations":[{"rel":"view-checkout","href":"v"},{"rel":"set-instrument"},{"rel":"set-instrument","href":"late"},"#.utf8)
            + Array(#"{"rel":"update-paymentorder-setinstrument","href":"u"}],"paymentorder":{"id":"lower"},"#.utf8)
            + Array(#""paymentOrder":{"id":"camel","availableInstruments":["CreditCard","Swish"],"amount":1500}}"#.utf8)
        let read = try #require(MerchantAPI.PaymentOrderAnswer.decode(both)).get()
        #expect(read.id == "camel" && read.setInstrumentHref == nil && read.viewPaymentSession == nil)
        #expect(read.availableInstruments == ["CreditCard", "Swish"])
        let noID = Array(#"{"paymentOrder":{"amount":1},"paymentorder":{"id":"lower"},"operations":[{"rel":"view-paymentorder"}]}"#.utf8)
        #expect(throws: MerchantAPI.PaymentOrderAnswer.Refusal.self) { try MerchantAPI.PaymentOrderAnswer.decode(noID)?.get() }
        // Not one JSON object: nil (the gateway answers 502), as for a duplicate member.
        for body in ["[]", "", "{\"operations\":[]} x", "{\"a\":1,\"a\":2}", "\"text\""] {
            #expect(MerchantAPI.PaymentOrderAnswer.decode(Array(body.utf8)) == nil, "\(body)")
        }
        // The ecom sibling of Swedbank Pay's API host serves view-paymentsession (seed 002).
        #expect(SwedbankPayClient.hosts(servingSessionsFor: "api.externalintegration.payex.com")
                == ["api.externalintegration.payex.com", "ecom.externalintegration.payex.com"])
        #expect(SwedbankPayClient.hosts(servingSessionsFor: "127.0.0.1") == ["127.0.0.1"])
    }

    @Test("instrument mode's mobileSDK is spliced into the answer's bytes, which stay as they came; a body that is no object is left alone")
    func mobileSDKSplice() throws {
        func spliced(_ body: String) -> String {
            let response = HTTPResponse(status: 201, contentType: "application/json", body: Array(body.utf8))
            return String(decoding: MerchantAPI.addMobileSDK(response, instruments: ["Swish"], payeeReference: "K1").body, as: UTF8.self)
        }
        let member = #""mobileSDK":{"setInstrument":"/swedbank-pay-mobile/paymentorders/K1/setInstrument","validInstruments":["Swish"]}"#
        #expect(spliced(#"{"a":1.50,"b":[]}"#) == #"{"a":1.50,"b":[]"# + "," + member + "}")
        #expect(spliced("{ \n }") == "{ \n " + member + "}")
        #expect(try JSONValue.parse(Array(spliced(#" {"a":{"b":{}}} "#).utf8))["mobileSDK"]?["validInstruments"] == ["Swish"])
        for body in ["", "}", "}{", "[1]", "text"] { #expect(spliced(body) == body, "\(body)") }
    }

    // MARK: The client's device in upstream bodies, and beacons

    /// Waits for what the simulator received on a route to satisfy `done` (beacons are posted asynchronously).
    func received(_ simulator: Simulator, _ route: String, until done: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
        for _ in 0..<60 {
            let bodies = simulator.received(route)
            if done(bodies) { return bodies }
            try await Task.sleep(for: .milliseconds(50))
        }
        return simulator.received(route)
    }

    static let iPhone: JSONValue = [
        "platform": "ios", "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X)", "screenHeight": 2532,
        "screenWidth": 1170, "screenColorDepth": 32, "language": "en-US", "timeZoneOffset": 60, "acceptHeader": "text/html",
        "wallets": ["ApplePay"],
    ]

    @Test("the client's device reaches each upstream call in the shape the SDKs send, and each step is reported to event-logging")
    func deviceInUpstreamBodies() async throws {
        let t = try TestNode()
        let (_, stream) = try await t.sessions.fetched(client: Self.iPhone)
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-challenge"]])
        _ = try await stream.event(.show3DSecure)
        try await stream.send(["id": "2", "type": "3ds", "cres": "sim-cres"])
        _ = try await stream.event(.paymentSessionComplete)
        let sim = t.simulator
        let client: JSONValue = ["userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X)", "screenHeight": 2532,
                                 "screenWidth": 1170, "screenColorDepth": 32]
        let browser: JSONValue = ["acceptHeader": "text/html", "language": "en-US", "timeZoneOffset": 60, "javascriptEnabled": true]

        // swedbank-pay-sdk-android …/request/Integration.kt, util/RequestUtil.kt getIntegrationRequestData
        let prepare = try #require(sim.received("sessions.prepare").first)
        #expect(prepare["integration"] == "App")
        #expect(prepare["deviceAcceptedWallets"] == "ApplePay;ClickToPay")
        #expect(prepare["client"] == client)
        #expect(prepare["browser"] == browser)
        #expect(prepare["presentationSdk"]?["name"] == "iOS")
        #expect(prepare["service"]?["name"] == "Kassa")
        // …/request/CreditCardAttempt.kt: the session's culture and ClientWithType.
        let attempt = try #require(sim.received("sessions.attempt").first)
        var typed = client.objectValue!
        typed["clientType"] = "Native"
        #expect(attempt == ["culture": "sv-SE", "client": .object(typed), "paymentToken": "sim-card-challenge"])
        // …/request/CreateAuthentication.kt: Client (no type) and Browser.
        let create = try #require(sim.received("sessions.authentication").first)
        #expect(create["client"] == client && create["browser"] == browser)
        #expect(create["requestWindowSize"] == "FULLSCREEN")
        // …/request/CompleteAuthentication.kt: cRes and ClientMinimum only.
        #expect(sim.received("sessions.authentication.complete") == [["cRes": "sim-cres", "client": ["userAgent": client["userAgent"]!]]])

        // Beacons (…/logging/BeaconService.kt): every exchange, the command, every push; all accepted (204).
        let beacons = try await received(sim, "sessions.events") { bodies in
            bodies.filter { $0["event"]?["action"] == "SDKCallbackInvoked" }.count >= 4
                && bodies.filter { $0["event"]?["action"] == "SDKMethodInvoked" }.count >= 2
        }
        let actions = Set(beacons.compactMap { $0["event"]?["action"]?.stringValue })
        #expect(actions == ["HttpRequest", "SDKMethodInvoked", "SDKCallbackInvoked"])
        #expect(beacons.allSatisfy { $0["type"] == "ClientEvent" && $0["client"] == client && $0["service"]?["name"] == "Kassa" })
        let requests = beacons.filter { $0["event"]?["action"] == "HttpRequest" }
        #expect(requests.contains { $0["http"]?["requestUrl"]?.stringValue?.hasSuffix("/prepare") == true
                                     && $0["http"]?["method"] == "POST" && $0["http"]?["responseStatusCode"] == 200 })
        #expect(requests.allSatisfy { ($0["event"]?["duration"]?.intValue ?? -1) >= 0 })
        #expect(beacons.contains { $0["method"]?["name"] == "attempt CreditCard" && $0["method"]?["succeeded"] == true })
        // Beacons are posted one by one, each on its own, so they may arrive out of order; their
        // `created` stamps (ms, ISO 8601 in UTC: they sort as text) give the order.
        let callbacks = beacons.filter { $0["event"]?["action"] == "SDKCallbackInvoked" }
            .enumerated().sorted { ($0.element["event"]?["created"]?.stringValue ?? "", $0.offset) < ($1.element["event"]?["created"]?.stringValue ?? "", $1.offset) }
            .compactMap { $0.element["method"]?["name"]?.stringValue }
        #expect(callbacks == ["PaymentSessionFetched", "Show3DSecure", "Dismiss3DSecure", "PaymentSessionComplete"])
        let scrape = try await self.client.send(UpstreamRequest(url: t.base + "/metrics"))
        #expect(!scrape.text.contains("kassa_beacons_total{outcome=\"refused\"}"), "the simulator refused a beacon")
        await t.stop()
    }

    @Test("without a client object: a web client (ClickToPay, the session's culture, the SDKs' accept header); with event-logging off no beacon")
    func webDefaults() async throws {
        let t = try TestNode { $0.eventLogging = false }
        let (_, stream) = try await t.sessions.fetched()
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "Swish", "msisdn": "+46739000001"]])
        _ = try await stream.event(.paymentSessionComplete)
        let prepare = try #require(t.simulator.received("sessions.prepare").first)
        #expect(prepare["deviceAcceptedWallets"] == "ClickToPay")
        #expect(prepare["presentationSdk"]?["name"] == "Web")
        #expect(prepare["browser"]?["language"] == "sv-SE", "the session's culture")
        #expect(prepare["browser"]?["acceptHeader"]?.stringValue?.hasPrefix("text/html,") == true)
        #expect(prepare["client"]?["userAgent"]?.stringValue?.hasPrefix("Kassa/") == true)
        #expect(prepare["client"]?["screenHeight"] == .null)
        let attempt = try #require(t.simulator.received("sessions.attempt").first)
        #expect(attempt["msisdn"] == "+46739000001" && attempt["culture"] == "sv-SE")
        try await Task.sleep(for: .milliseconds(300))
        #expect(t.simulator.received("sessions.events").isEmpty)
        await t.stop()
    }

    @Test("the device is kept, sealed, with the session: a restarted node sends the same; bad device data is a 400 naming the member")
    func deviceSurvivesRestart() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let simulator = try Simulator.start(Simulator.Configuration(port: 0, payerDelayMs: 50))
        let secret = String(repeating: "0123456789abcdef", count: 4)
        let android: JSONValue = ["platform": "android", "userAgent": "Pixel-UA-7f3e", "timeZoneOffset": -300, "wallets": ["GooglePay"]]
        var t = try TestNode(upstreamURL: simulator.baseURL, directory: dir) {
            $0.upstreamToken = Simulator.defaultToken
            $0.clusterSecrets = [secret]
        }
        let (session, first) = try await t.sessions.fetched(client: android)
        _ = first
        let stored = try #require(try t.node.store.session(id: session.id)?.clientDeviceSealed)
        #expect(!stored.contains("Pixel") && !stored.contains("android"), "sealed at rest")
        await t.node.store.eventLog.flush()
        let everything = try t.node.store.eventLog.events().map { String(decoding: ($0.data ?? .null).bytes, as: UTF8.self) }.joined()
        #expect(!everything.contains("Pixel-UA-7f3e"), "the device is not logged, only its platform")
        await t.stop(keepDirectory: true)

        t = try TestNode(upstreamURL: simulator.baseURL, directory: dir) {
            $0.upstreamToken = Simulator.defaultToken
            $0.clusterSecrets = [secret]
        }
        let stream = try await t.sessions.stream(session, since: 1)
        try await stream.payByWallet("GooglePay", id: "g")
        #expect(stream.received.contains { $0["re"] == "g" && $0["ok"] == true }, "Google Pay is native on the restored Android session")
        _ = try await stream.event(.paymentSessionComplete)
        let attempt = try #require(simulator.received("sessions.attempt").last)
        #expect(attempt["client"]?["userAgent"] == "Pixel-UA-7f3e" && attempt["client"]?["clientType"] == "Native")

        for (bad, member) in [(["platform": "windows"], "client.platform"), (["platform": "ios", "screenHeight": 1e308], "client.screenHeight"),
                              (["platform": "ios", "timeZoneOffset": 841], "client.timeZoneOffset"),
                              (["platform": "ios", "screenWidth": 1.5], "client.screenWidth"),
                              (["platform": "ios", "userAgent": "a\u{0}b"], "client.userAgent"),
                              (["platform": "ios", "screenheight": 1], "client.screenheight"), ([:], "client.platform")] as [(JSONValue, String)] {
            let r = try await t.sessions.createResponse(["paymentOrder": SessionClient.order(), "client": bad])
            #expect(r.status == 400, "\(bad)")
            #expect((try? JSONValue.parse(r.body))?["parameter"]?.stringValue == member, "\(r.text)")
        }
        await t.stop(keepDirectory: true)
        await simulator.stop()
    }

    // MARK: Error classes end to end

    @Test("a 400 on start-payment-attempt is PaymentSessionAPIRequestFailed, retryable, and retry sends the attempt again")
    func refusedAttemptEndToEnd() async throws {
        let t = try TestNode()
        let (session, stream) = try await t.sessions.fetched()
        t.simulator.setFaults([FaultRule(route: "sessions.attempt", fault: .status(400))])
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "Swish", "msisdn": "+46739000001"]])
        let failed = try await stream.event(.sdkProblemOccurred)
        #expect(failed["data"]?["problem"]?["type"] == "PaymentSessionAPIRequestFailed")
        #expect(failed["data"]?["problem"]?["status"] == 400 && failed["data"]?["retryable"] == true)
        #expect(failed["data"]?["problem"]?["upstream"]?["type"]?.stringValue?.hasSuffix("/systemerror") == true)
        t.simulator.setFaults([])
        let retry = try await t.sessions.command(session, "retry")
        #expect(retry.status == 202)
        _ = try await stream.event(.paymentSessionComplete)
        #expect(t.simulator.received("sessions.attempt").map { $0["msisdn"] } == ["+46739000001"], "sent again, once")
        await t.stop()
    }

    @Test("a 409 of any type makes the session read itself again once; a second 409 on the same call fails it")
    func conflictEndToEnd() async throws {
        let t = try TestNode()
        let (_, stream) = try await t.sessions.fetched()
        t.simulator.setFaults([FaultRule(route: "sessions.attempt", fault: .status(409))])
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "Swish", "msisdn": "+46739000001"]])
        let failed = try await stream.event(.sdkProblemOccurred)
        #expect(failed["data"]?["problem"]?["type"] == "PaymentSessionAPIRequestFailed")
        #expect(failed["data"]?["problem"]?["status"] == 409)
        await t.node.store.eventLog.flush()
        let calls = try t.node.store.eventLog.events().filter { $0.kind == "upstream.request" }.compactMap { $0.data?["operation"]?.stringValue }
        let tail = Array(calls.suffix(3))
        #expect(tail == ["start-payment-attempt", "view-paymentsession", "start-payment-attempt"], "\(calls)")
        await t.stop()
    }

    @Test("card calls get the longer timeout: a slow create-authentication succeeds where an equally slow prepare-payment fails")
    func cardCallTimeouts() async throws {
        // 1.5 s for an exchange (room for a busy machine), 4.5 s for card calls; both answers take 2.5 s.
        let t = try TestNode(upstreamTimeoutMs: 1_500)
        let (_, card) = try await t.sessions.fetched()
        t.simulator.setFaults([FaultRule(route: "sessions.authentication", fault: .latency(ms: 2_500))])
        try await card.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-challenge"]])
        _ = try await card.event(.show3DSecure)

        t.simulator.setFaults([FaultRule(route: "sessions.prepare", fault: .latency(ms: 2_500))])
        let slow = try await t.sessions.stream(try await t.sessions.create())
        let failed = try await slow.event(.sdkProblemOccurred)
        #expect(failed["data"]?["problem"]?["operation"] == "prepare-payment")
        #expect(failed["data"]?["problem"]?["type"] == "PaymentSessionAPIRequestFailed")
        await t.stop()
    }
}
