import Foundation
import KassaCore
@testable import KassaSimulator
import KassaUpstream
import Testing

/// The simulator's PaymentSession API, driven the way the SDKs drive it:
/// each call goes to an operation's href from the previous answer.
@Suite("Simulator: PaymentSession API")
struct SimulatorSessionTests {
    let client = UpstreamClient()

    struct Session {
        let sim: Simulator
        let client: UpstreamClient
        var document: JSONValue = .null

        func operations() -> [JSONValue] {
            var all = document["operations"]?.arrayValue ?? []
            for method in document["paymentSession"]?["methods"]?.arrayValue ?? [] {
                all += (method["operations"]?.arrayValue ?? []).map { op in
                    var o = op.objectValue ?? [:]
                    o["paymentMethod"] = method["paymentMethod"]
                    return .object(o)
                }
            }
            return all
        }

        func operation(_ rel: String, method: String? = nil) -> JSONValue? {
            operations().first { $0["rel"]?.stringValue == rel && (method == nil || $0["paymentMethod"]?.stringValue == method) }
        }

        /// Calls an operation; returns the status.
        @discardableResult
        mutating func call(_ op: JSONValue?, body: JSONValue? = nil) async throws -> Int {
            let op = try #require(op)
            let r = try await client.send(UpstreamRequest(method: op["method"]?.stringValue ?? "GET", url: op["href"]?.stringValue ?? "",
                                                          headers: [("Authorization", "Bearer tok")], body: body?.bytes))
            if (200..<300).contains(r.status) { document = try JSONValue.parse(r.body) }
            return r.status
        }

        mutating func follow(_ rel: String, method: String? = nil, body: JSONValue? = nil) async throws -> Int {
            try await call(operation(rel, method: method), body: body)
        }
    }

    func open(amount: Int = 1500) async throws -> Session {
        let sim = try Simulator.start(Simulator.Configuration(port: 0, token: "tok", payerDelayMs: 100))
        var order = MerchantAPITests.paymentOrder()
        if case .object(var root) = order, case .object(var o)? = root["paymentorder"] {
            o["amount"] = .number(Double(amount))
            o["payeeInfo"] = ["payeeId": "p", "payeeReference": "ref"]
            o["urls"] = ["hostUrls": ["https://m.example"], "completeUrl": "https://m.example/complete",
                         "cancelUrl": "https://m.example/cancel", "paymentUrl": "https://m.example/payment"]
            root["paymentorder"] = .object(o)
            order = .object(root)
        }
        let created = try JSONValue.parse(try await client.send(UpstreamRequest(
            method: "POST", url: sim.baseURL + "/psp/paymentorders",
            headers: [("Authorization", "Bearer tok"), ("Content-Type", PaymentOrderVersion.v3_1.mediaType)], body: order.bytes)).body)
        let view = created["operations"]?.arrayValue?.first { $0["rel"]?.stringValue == "view-paymentsession" }
        var session = Session(sim: sim, client: client)
        #expect(try await session.call(view) == 200)
        return session
    }

    func waitForRedirect(_ session: inout Session) async throws -> String? {
        for _ in 0..<50 {
            if let redirect = session.operation("redirect-payer") { return redirect["href"]?.stringValue }
            try await Task.sleep(for: .milliseconds(50))
            try await session.follow("get-payment")
        }
        return nil
    }

    @Test("Swish with an MSISDN: prepare → expand → attempt → poll → redirect-payer(completeUrl)")
    func swishMSISDN() async throws {
        var s = try await open()
        #expect(s.operation("prepare-payment")?["next"]?.boolValue == true)
        #expect(try await s.follow("prepare-payment", body: ["integration": "App"]) == 200)
        let methods = s.document["paymentSession"]?["methods"]?.arrayValue?.compactMap { $0["paymentMethod"]?.stringValue }
        #expect(methods == ["Swish", "CreditCard", "ApplePay", "GooglePay", "Vipps"])
        #expect(s.document["paymentSession"]?["methods"]?.arrayValue?.first?["prefills"]?.arrayValue?.first?["msisdn"]?.stringValue == "+46739000001")
        #expect(try await s.follow("expand-method", method: "Swish", body: ["paymentMethod": "Swish"]) == 200)
        #expect(try await s.follow("start-payment-attempt", method: "Swish", body: ["msisdn": "+46739000001", "culture": "sv-SE"]) == 200)
        #expect(s.operation("get-payment") != nil)
        #expect(try await waitForRedirect(&s) == "https://m.example/complete")
        await s.sim.stop()
    }

    @Test("Swish local start carries a launch-client-app task with the seed 004 URL")
    func swishLocalStart() async throws {
        var s = try await open()
        try await s.follow("prepare-payment")
        try await s.follow("expand-method", method: "Swish")
        try await s.follow("start-payment-attempt", method: "Swish", body: ["culture": "sv-SE"])
        let task = s.operation("get-payment")?["tasks"]?.arrayValue?.first
        #expect(task?["rel"]?.stringValue == "launch-client-app")
        let href = try #require(task?["href"]?.stringValue)
        #expect(href.hasPrefix("swish://paymentrequest?token="))
        #expect(href.hasSuffix("&callbackurl=https%3A%2F%2Fm.example%2Fpayment"))
        #expect(try await waitForRedirect(&s) == "https://m.example/complete")
        await s.sim.stop()
    }

    @Test("a declined attempt is a problem with acknowledge-failed-attempt; then a new attempt is possible")
    func declinedThenRetry() async throws {
        var s = try await open()
        try await s.follow("prepare-payment")
        try await s.follow("expand-method", method: "Swish")
        try await s.follow("start-payment-attempt", method: "Swish", body: ["msisdn": "+46739000002"])
        for _ in 0..<40 where s.document["problem"] == .null {
            try await Task.sleep(for: .milliseconds(50))
            try await s.follow("get-payment")
        }
        #expect(s.document["problem"]?["type"]?.stringValue == SessionProblemType.declined)
        let ack = s.document["problem"]?["operation"]
        #expect(ack?["rel"]?.stringValue == "acknowledge-failed-attempt")
        #expect(try await s.call(ack) == 200)
        #expect(s.document["problem"] == .null)
        #expect(try await s.follow("start-payment-attempt", method: "Swish", body: ["msisdn": "+46739000001"]) == 200)
        #expect(try await waitForRedirect(&s) == "https://m.example/complete")
        await s.sim.stop()
    }

    @Test("card with 3-D Secure: create-authentication (with a method task for sim-card-method, else an indicator), then complete-authentication with a creq")
    func cardChallenge() async throws {
        var s = try await open()
        try await s.follow("prepare-payment")
        try await s.follow("expand-method", method: "CreditCard")
        try await s.follow("start-payment-attempt", method: "CreditCard", body: ["paymentToken": "sim-card-method"])
        let create = s.operation("create-authentication")
        #expect(create?["tasks"]?.arrayValue?.first?["rel"]?.stringValue == "sca-method-request")
        #expect(create?["expects"]?.arrayValue?.contains { $0["name"]?.stringValue == "NotificationUrl" } == true)
        #expect(create?["expects"]?.arrayValue?.contains { $0["name"]?.stringValue == "methodCompletionIndicator" } == false)
        // As strict as the real API: the indicator and an absolute notification URL are required.
        let refused = try await s.call(create, body: ["methodCompletionIndicator": "maybe", "notificationUrl": "n"])
        #expect(refused == 400)
        try await s.call(create, body: ["methodCompletionIndicator": "Y", "notificationUrl": "https://shop.example/notify"])
        let complete = s.operation("complete-authentication")
        #expect(complete?["tasks"]?.arrayValue?.first?["rel"]?.stringValue == "sca-redirect")
        try await s.call(complete, body: ["cRes": "ok"])
        #expect(s.operation("redirect-payer")?["href"]?.stringValue == "https://m.example/complete")
        await s.sim.stop()
    }

    @Test("a frictionless saved card completes at once; abort after the end is 409 operationnotallowed")
    func frictionlessAndAbort() async throws {
        var s = try await open()
        try await s.follow("prepare-payment")
        try await s.follow("expand-method", method: "CreditCard")
        try await s.follow("start-payment-attempt", method: "CreditCard", body: ["paymentToken": "sim-card-frictionless"])
        #expect(s.operation("redirect-payer")?["href"]?.stringValue == "https://m.example/complete")
        #expect(s.operation("start-payment-attempt") == nil, "an ended session offers no new attempt")
        await s.sim.stop()

        var t = try await open()
        let abort = t.operation("abort-payment")
        #expect(try await t.call(abort) == 200)
        #expect(t.operation("redirect-payer")?["href"]?.stringValue == "https://m.example/cancel")
        let again = try await client.send(UpstreamRequest(method: "POST", url: abort?["href"]?.stringValue ?? "", headers: [("Authorization", "Bearer tok")]))
        #expect(again.status == 409)
        #expect(try JSONValue.parse(again.body)["type"]?.stringValue == SessionProblemType.operationNotAllowed)
        await t.sim.stop()
    }

    @Test("the payment menu: customize-payment restricts the methods and offers view-payment")
    func paymentMenu() async throws {
        var s = try await open()
        try await s.follow("prepare-payment")
        try await s.follow("customize-payment", body: ["paymentMethod": .null, "restrictToPaymentMethods": ["CreditCard", "Vipps"]])
        #expect(s.operation("view-payment") != nil)
        let methods = s.document["paymentSession"]?["methods"]?.arrayValue?.compactMap { $0["paymentMethod"]?.stringValue }
        #expect(methods == ["CreditCard", "Vipps"])
        await s.sim.stop()
    }

    @Test("an invalid MSISDN is an input error")
    func invalidMSISDN() async throws {
        var s = try await open()
        try await s.follow("prepare-payment")
        try await s.follow("expand-method", method: "Swish")
        #expect(try await s.follow("start-payment-attempt", method: "Swish", body: ["msisdn": "+46 739 000 001"]) == 400)
        #expect(Simulator.isValidMSISDN("+46739000001"))
        #expect(!Simulator.isValidMSISDN("46739000001"))
        #expect(!Simulator.isValidMSISDN("+4673900000a"))
        await s.sim.stop()
    }
}
