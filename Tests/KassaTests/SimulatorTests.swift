import Foundation
import KassaCore
@testable import KassaSimulator
import KassaUpstream
import Testing

@Suite("Simulator")
struct SimulatorTests {
    /// 8-4-4-4-12 hex digits.
    static func isGUID(_ s: String) -> Bool {
        let groups = s.split(separator: "-", omittingEmptySubsequences: false)
        return groups.map(\.count) == [8, 4, 4, 4, 12] && groups.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }

    let client = UpstreamClient()

    func start(seed: UInt64 = 7, faults: [FaultRule] = []) throws -> Simulator {
        try Simulator.start(Simulator.Configuration(port: 0, token: "tok", seed: seed, faults: faults, timeoutHoldSeconds: 2))
    }

    func createOrder(_ sim: Simulator, token: String = "tok", body: JSONValue = MerchantAPITests.paymentOrder(),
                     contentType: String = "application/json") async throws -> UpstreamResponse {
        var body = body
        if case .object(var root) = body, case .object(var order)? = root["paymentorder"] {
            var payee = order["payeeInfo"]?.objectValue ?? [:]
            payee["payeeReference"] = "ref1"
            order["payeeInfo"] = .object(payee)
            root["paymentorder"] = .object(order)
            body = .object(root)
        }
        return try await client.send(UpstreamRequest(method: "POST", url: sim.baseURL + "/psp/paymentorders",
                                                     headers: [("Authorization", "Bearer \(token)"), ("Content-Type", contentType)], body: body.bytes))
    }

    @Test("validates the bearer token like the real service")
    func bearer() async throws {
        let sim = try start()
        let r = try await createOrder(sim, token: "wrong")
        #expect(r.status == 401)
        #expect(try JSONValue.parse(r.body)["type"]?.stringValue == "https://api.payex.com/psp/errordetail/unauthorized")
        await sim.stop()
    }

    @Test("ids are fixed by the seed")
    func deterministic() async throws {
        var ids: [String] = []
        for _ in 0..<2 {
            let sim = try start(seed: 42)
            let doc = try JSONValue.parse(try await createOrder(sim).body)
            ids.append(doc["paymentorder"]?["id"]?.stringValue ?? "")
            await sim.stop()
        }
        #expect(ids[0] == ids[1])
        #expect(ids[0].hasPrefix("/psp/paymentorders/"))
        let other = try start(seed: 43)
        let doc = try JSONValue.parse(try await createOrder(other).body)
        #expect(doc["paymentorder"]?["id"]?.stringValue != ids[0])
        await other.stop()
    }

    @Test("invalid payment orders get Swedbank Pay input-error problems naming each field")
    func validation() async throws {
        let sim = try start()
        let r = try await createOrder(sim, body: ["paymentorder": ["currency": "sek", "amount": 0, "vatAmount": 5]])
        #expect(r.status == 400)
        let problem = try JSONValue.parse(r.body)
        #expect(problem["type"]?.stringValue == "https://api.payex.com/psp/errordetail/paymentorders/inputerror")
        let names = Set(problem["problems"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        #expect(names.isSuperset(of: ["paymentorder.currency", "paymentorder.amount", "paymentorder.description"]))
        await sim.stop()
    }

    @Test("a created order can be read back in its version: v2 (no header) has view-paymentorder and no session, v3 view-checkout and view-paymentsession")
    func getOrder() async throws {
        let sim = try start()
        let created = try JSONValue.parse(try await createOrder(sim).body)
        let id = try #require(created["paymentorder"]?["id"]?.stringValue)
        let r = try await client.send(UpstreamRequest(url: sim.baseURL + id, headers: [("Authorization", "Bearer tok")]))
        #expect(r.status == 200)
        #expect(r.header("content-type")?.hasSuffix("version=2.0") == true)
        let doc = try JSONValue.parse(r.body)
        let rels = doc["operations"]?.arrayValue?.compactMap { $0["rel"]?.stringValue } ?? []
        #expect(rels.contains("view-paymentorder") && !rels.contains("view-paymentsession"))
        // productName Checkout3 (the SDKs' way) and the 3.1 media type both make v3, spelled paymentOrder.
        var checkout3 = MerchantAPITests.paymentOrder()
        if case .object(var root) = checkout3, case .object(var order)? = root["paymentorder"] {
            order["productName"] = "Checkout3"
            root["paymentorder"] = .object(order)
            checkout3 = .object(root)
        }
        for (body, contentType, version) in [(checkout3, "application/json", "3.0"),
                                             (MerchantAPITests.paymentOrder(), PaymentOrderVersion.v3_1.mediaType, "3.1")] {
            let v3 = try await createOrder(sim, body: body, contentType: contentType)
            #expect(v3.status == 201)
            #expect(v3.header("content-type")?.hasSuffix("version=\(version)") == true)
            let v3doc = try JSONValue.parse(v3.body)
            #expect(v3doc["paymentOrder"]?["id"]?.stringValue != nil && v3doc["paymentorder"] == nil)
            let v3rels = v3doc["operations"]?.arrayValue?.compactMap { $0["rel"]?.stringValue } ?? []
            #expect(v3rels.contains("view-checkout") && v3rels.contains("view-paymentsession") && !v3rels.contains("view-paymentorder"))
            // Seed 002's session link: a GUID names the session, and the tracking id is 32 hex digits of its own.
            let link = try #require(v3doc["operations"]?.arrayValue?.first { $0["rel"]?.stringValue == "view-paymentsession" }?["href"]?.stringValue)
            let (path, query) = (link.prefix { $0 != "?" }, link.drop { $0 != "?" }.dropFirst())
            let sessionToken = String(path.split(separator: "/").last ?? "")
            #expect(path.hasSuffix("/psp/paymentsessions/" + sessionToken) && Self.isGUID(sessionToken), "\(link)")
            let trackingID = query.hasPrefix("_tc_tid=") ? String(query.dropFirst(8)) : ""
            #expect(trackingID.utf8.count == 32 && trackingID.allSatisfy(\.isHexDigit), "\(link)")
            #expect(!sessionToken.filter(\.isHexDigit).contains(trackingID.prefix(8)), "\(link)")
        }
        let missing = try await client.send(UpstreamRequest(url: sim.baseURL + "/psp/paymentorders/nope", headers: [("Authorization", "Bearer tok")]))
        #expect(missing.status == 404)
        await sim.stop()
    }

    @Test("fault rules apply at their rate, per route, and can be replaced over HTTP")
    func faultRules() async throws {
        let sim = try start(faults: [FaultRule(route: "paymentorders.create", fault: .status(502), rate: 0.5)])
        var statuses: [Int] = []
        for _ in 0..<40 { statuses.append(try await createOrder(sim).status) }
        let failed = statuses.filter { $0 == 502 }.count
        #expect(failed > 5 && failed < 35, "about half fail at rate 0.5, got \(failed)/40")
        #expect(Set(statuses).isSubset(of: [201, 502]))

        let put = try await client.send(UpstreamRequest(method: "PUT", url: sim.baseURL + "/sim/faults",
                                                        body: Array(#"[{"route":"*","fault":"latency=300"}]"#.utf8)))
        #expect(put.status == 200)
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try await createOrder(sim).status == 201)
        #expect(start.duration(to: clock.now) >= .milliseconds(290))

        let bad = try await client.send(UpstreamRequest(method: "PUT", url: sim.baseURL + "/sim/faults", body: Array(#"[{"fault":"explode"}]"#.utf8)))
        #expect(bad.status == 400)
        await sim.stop()
    }

    @Test("magic values select a fault for one request", arguments: [
        ("sim-fault:status=503", 503), ("sim-fault:malformed", 200),
    ])
    func magic(_ magic: String, _ status: Int) async throws {
        let sim = try start()
        let r = try await createOrder(sim, body: MerchantAPITests.paymentOrder(description: magic))
        #expect(r.status == status)
        if magic.hasSuffix("malformed") { #expect((try? JSONValue.parse(r.body)) == nil) }
        await sim.stop()
    }

    @Test("fault rule syntax")
    func parsing() {
        #expect(FaultRule("paymentorders.create:status=503:0.5") == FaultRule(route: "paymentorders.create", fault: .status(503), rate: 0.5))
        #expect(FaultRule("*:latency=100") == FaultRule(route: "*", fault: .latency(ms: 100), rate: 1))
        #expect(FaultRule("*:reset") != nil)
        #expect(FaultRule("*:status=99") == nil)
        #expect(FaultRule("*:latency=5:2") == nil)
        #expect(FaultRule("nothing") == nil)
    }

    @Test("kassa sim runs on its own port")
    func command() async throws {
        let p = try KassaProcess(["sim", "--listen", "127.0.0.1:0", "--token", "cli-token", "--fault", "consumers.create:status=500"])
        let listening = try await onThread { p.waitForLog(message: "listening") }
        let port = try #require(listening?["address"]?.stringValue?.split(separator: ":").last.flatMap { Int($0) })
        let r = try await client.send(UpstreamRequest(method: "POST", url: "http://127.0.0.1:\(port)/psp/consumers",
                                                      headers: [("Authorization", "Bearer cli-token")], body: Array("{}".utf8)))
        #expect(r.status == 500)
        p.signal(SIGTERM)
        #expect(try await onThread { p.waitForExit() } == 0)
    }
    @Test("the canned upstream replays the simulator's card payment with each payment's own ids, and refuses what it cannot answer")
    func canned() async throws {
        let canned = try await CannedUpstream.start(token: "tok")
        func call(_ method: String, _ path: String, token: String = "tok", body: String = "{}") async throws -> UpstreamResponse {
            try await client.send(UpstreamRequest(method: method, url: canned.baseURL + path,
                                                  headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json;version=3.1")],
                                                  body: Array(body.utf8)))
        }
        let first = try await call("POST", "/psp/paymentorders"), second = try await call("POST", "/psp/paymentorders")
        #expect(first.status == 201)
        #expect(first.headers.contains { $0.0 == "content-type" && $0.1.contains("version=3.1") })
        let orders = try [first, second].map { try JSONValue.parse($0.body) }
        let ids = orders.map { $0["paymentOrder"]?["id"]?.stringValue ?? "" }
        #expect(ids[0].hasPrefix("/psp/paymentorders/") && ids[0] != ids[1], "\(ids)")
        func href(_ doc: JSONValue?, _ rel: String) -> String? {
            doc?["operations"]?.arrayValue?.first { $0["rel"]?.stringValue == rel }?["href"]?.stringValue
        }
        // Each order's session link is its own, on the canned upstream's address.
        let links = orders.compactMap { href($0, "view-paymentsession") }
        #expect(links.count == 2 && links[0] != links[1] && links.allSatisfy { $0.hasPrefix(canned.baseURL + "/psp/paymentsessions/") })
        let session = String(links[1].dropFirst(canned.baseURL.count).prefix { $0 != "?" })
        #expect(try await call("GET", String(ids[1])).status == 200)

        // The session's answers follow a frictionless card payment, and every link names this session.
        let fetched = try JSONValue.parse(try await call("GET", session).body)
        #expect(href(fetched, "prepare-payment") == canned.baseURL + session + "/prepare")
        let prepared = try JSONValue.parse(try await call("POST", session + "/prepare").body)
        #expect(href(prepared, "prepare-payment") == nil)
        let card = prepared["paymentSession"]?["methods"]?.arrayValue?.first { $0["paymentMethod"]?.stringValue == "CreditCard" }
        #expect(href(card, "expand-method") == canned.baseURL + session + "/methods/CreditCard/expand")
        let expanded = try JSONValue.parse(try await call("POST", session + "/methods/CreditCard/expand").body)
        let expandedCard = expanded["paymentSession"]?["methods"]?.arrayValue?.first { $0["paymentMethod"]?.stringValue == "CreditCard" }
        #expect(href(expandedCard, "start-payment-attempt") == canned.baseURL + session + "/methods/CreditCard/attempts")
        let completed = try JSONValue.parse(try await call("POST", session + "/methods/CreditCard/attempts", body: #"{"paymentToken":"x"}"#).body)
        #expect(href(completed, "redirect-payer") == "https://shop.example/complete")
        #expect(try await call("POST", session + "/events").status == 204)

        // What it does not answer: a stranger's token, a wrong bearer, another method or route.
        #expect(try await call("GET", "/psp/paymentsessions/" + String(repeating: "a", count: 64)).status == 404)
        #expect(try await call("GET", session, token: "wrong").status == 401)
        #expect(try await call("POST", session + "/methods/Swish/attempts").status == 404)
        #expect(try await call("POST", "/psp/consumers").status == 404)
        await canned.stop()
    }

    @Test("the canned upstream's ids are scattered like random GUIDs, and each names its payment back")
    func cannedIDsScattered() {
        typealias IDs = CannedUpstream.PaymentIDs
        let numbers: [UInt64] = Array(1...2_000) + [0, (1 << 48) - 1, 1 << 47, 0xABCDEF012345]
        for n in numbers {
            let ids = IDs(n)
            #expect(IDs.number(orderID: ids.orderID) == n && IDs.number(sessionToken: ids.sessionToken) == n, "\(n)")
            #expect(Self.isGUID(ids.orderID) && Self.isGUID(ids.sessionToken) && ids.orderToken.utf8.count == 64 && ids.trackingID.utf8.count == 32)
        }
        // Consecutive payments' ids sort in no order: about half go up, as random ones would
        // (ids that counted up, as before, all go up).
        let orderIDs = (1...2_000).map { IDs(UInt64($0)).orderID }
        let up = zip(orderIDs, orderIDs.dropFirst()).filter { $0 < $1 }.count
        #expect((800...1_200).contains(up), "\(up) of 1 999 consecutive ids go up")
        #expect(Set(orderIDs).count == orderIDs.count)
        // Their tails are no long runs of digits: most hold a letter among their 12 hex digits.
        let allDigits = orderIDs.filter { $0.suffix(12).allSatisfy(\.isNumber) }.count
        #expect(allDigits < 100, "\(allDigits) of 2 000 tails are all digits")
    }
}

@Suite("Payment url helpers")
struct PaymentURLHelperTests {
    @Test("schemes that would redirect to the web or run script are refused")
    func schemes() {
        for good in ["yourecomapp", "com.example.app", "my-app+v2"] { #expect(PaymentURLHelper.isValidCustomScheme(good), "\(good)") }
        for bad in ["https", "HTTP", "javascript", "data", "file", "1app", "a/b", "a:b", "", "intent"] {
            #expect(!PaymentURLHelper.isValidCustomScheme(bad), "\(bad)")
        }
    }

    @Test("hosts and packages")
    func hostsAndPackages() {
        #expect(PaymentURLHelper.isValidHost("example.com"))
        #expect(PaymentURLHelper.isValidHost("127.0.0.1:8080"))
        #expect(!PaymentURLHelper.isValidHost("evil.example/x"))
        #expect(!PaymentURLHelper.isValidHost("a b"))
        #expect(!PaymentURLHelper.isValidHost("x:99999"))
        #expect(PaymentURLHelper.isValidPackage("your.ecom.app"))
        #expect(!PaymentURLHelper.isValidPackage("single"))
        #expect(!PaymentURLHelper.isValidPackage("a..b"))
        #expect(!PaymentURLHelper.isValidPackage("a.1b"))
    }

    @Test("the iOS redirect matches the seed's example")
    func seedExample() throws {
        let query: [(name: String, value: String)] = [("scheme", "yourecomapp"), ("language", "en-US"),
                                                      ("id", "abb50c53-53c1-4138-923f-59fcf0acd08d"), ("app", "Your Ecom App")]
        let location = try PaymentURLHelper.iosRedirect(host: "example.com", path: "/swedbank-pay-mobile/sdk-callback/ios-universal-link",
                                                        query: query, trampolineURL: "https://ecom.stage.payex.com/externalresourcehost/trampoline")
        #expect(location == "https://ecom.stage.payex.com/externalresourcehost/trampoline?target=https%3A%2F%2Fexample.com%2Fswedbank-pay-mobile%2Fsdk-callback%2Fios-universal-link%3Fscheme%3Dyourecomapp%26language%3Den-US%26id%3Dabb50c53-53c1-4138-923f-59fcf0acd08d%26app%3DYour%2520Ecom%2520App%26fallback%3Dtrue&language=en-US&app=Your%20Ecom%20App")
        let fallback = try PaymentURLHelper.iosRedirect(host: "example.com", path: "/swedbank-pay-mobile/sdk-callback/ios-universal-link",
                                                        query: query + [("fallback", "true")], trampolineURL: "https://t")
        #expect(fallback == "yourecomapp://example.com/swedbank-pay-mobile/sdk-callback/ios-universal-link?scheme=yourecomapp&language=en-US&id=abb50c53-53c1-4138-923f-59fcf0acd08d&app=Your%20Ecom%20App&fallback=true")
    }

    @Test("control characters anywhere in the query are refused")
    func controlCharacters() {
        #expect(throws: PaymentURLHelper.Failure.self) { try PaymentURLHelper.checkQuery([("language", "en\r\nX-Evil: 1")]) }
        #expect(throws: PaymentURLHelper.Failure.self) { try PaymentURLHelper.checkQuery([("x", String(repeating: "a", count: 3000))]) }
        #expect(throws: Never.self) { try PaymentURLHelper.checkQuery([("language", "en-US")]) }
    }
}
