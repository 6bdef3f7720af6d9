import Foundation
import KassaCore
import KassaEdge

/// A payment order as the simulator keeps it.
struct SimulatedPaymentOrder: Sendable {
    var id: String
    /// The checkout's token, in its hrefs' paths (v3) or `token=` (v2): 64 hex digits, the form of
    /// seed 000's consumer session token (`/consumers/sessions/7e380fbb…`). Seed 000 prints the
    /// payment menu's `token=` as a GUID; redaction cuts both forms there by the name.
    var token: String
    /// The GUID that names the order's PaymentSession in its path (seed 002:
    /// `/psp/paymentsessions/5a17c24e-d459-4567-bbad-aa0f17a76119`).
    var sessionToken: String
    /// The `_tc_tid` the v3 hrefs carry, 32 hex digits (seed 002: `_tc_tid=30f2168171e142d38bcd4af2c3721959`).
    var trackingID: String
    var order: [String: JSONValue]
    var instrument: String?
    var availableInstruments: [String]
    var created: String
    var updated: String
    var status = "Initialized"
    /// The API version the order was created in; every answer about it is in that version.
    var version: PaymentOrderVersion

    var path: String { "/psp/paymentorders/\(id)" }
}

extension Simulator {
    /// Instruments offered in instrument mode.
    static let instruments = ["CreditCard", "Swish", "Invoice-PayExFinancingSe", "ApplePay", "GooglePay", "Vipps"]

    func createConsumerSession(_ context: RequestContext) -> HTTPResponse {
        guard case .success(var input) = JSONInput.parse(context.request.body) else {
            return SwedbankProblem.inputError("consumers", [("body", "must be a JSON object")])
        }
        if let operation = input.string("operation"), operation != "initiate-consumer-session" {
            input.fail("operation", "must be initiate-consumer-session")
        }
        _ = input.string("language")
        if let codes = input.strings("shippingAddressRestrictedToCountryCodes"),
           !codes.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isUppercase) }) {
            input.fail("shippingAddressRestrictedToCountryCodes", "must be ISO 3166 alpha-2 codes")
        }
        guard input.problems.isEmpty else {
            return SwedbankProblem.inputError("consumers", input.problems.map { ($0.field, $0.description) })
        }
        let (token, base) = state.withLock { s -> (String, String) in
            s.consumerSessions += 1
            return (s.random.hex(bytes: 32), s.baseURL)
        }
        return .json([
            "token": .string(token),
            "operations": [
                ["method": "GET", "rel": "redirect-consumer-identification",
                 "href": .string("\(base)/consumers/sessions/\(token)"), "contentType": "text/html"],
                ["method": "GET", "rel": "view-consumer-identification",
                 "href": .string("\(base)/consumers/core/scripts/client/px.consumer.client.js?token=\(token)"),
                 "contentType": "application/javascript"],
            ],
        ])
    }

    func createPaymentOrder(_ context: RequestContext) -> HTTPResponse {
        guard case .success(var input) = JSONInput.parse(context.request.body) else {
            return SwedbankProblem.inputError("paymentorders", [("body", "must be a JSON object")])
        }
        guard let order = input.object("paymentorder") else {
            return SwedbankProblem.inputError("paymentorders", input.problems.map { ($0.field, $0.description) })
        }
        // The version: the media type's `version=`, else productName Checkout3 (3.0), else 2.0
        // (developer.swedbankpay.com checkout-v3/get-started/payment-request-3-1).
        let productName = input.string("paymentorder.productName", required: false)
        guard let version = PaymentOrderVersion.requested(contentType: context.request.headers["content-type"], productName: productName) else {
            return SwedbankProblem.inputError("paymentorders", [("Content-Type", "version must be 3.1, 3.0 or 2.0")])
        }
        if let productName, !PaymentOrderVersion.isCheckout3(productName) {
            input.fail("paymentorder.productName", "must be Checkout3")
        }
        if let operation = input.string("paymentorder.operation"), operation != "Purchase" && operation != "Verify" {
            input.fail("paymentorder.operation", "must be Purchase or Verify")
        }
        if let currency = input.string("paymentorder.currency"), currency.count != 3 || !currency.allSatisfy(\.isUppercase) {
            input.fail("paymentorder.currency", "must be an ISO 4217 code")
        }
        let amount = input.integer("paymentorder.amount", minimum: 1)
        if let vat = input.integer("paymentorder.vatAmount", minimum: 0), let amount, vat > amount {
            input.fail("paymentorder.vatAmount", "must not exceed amount")
        }
        _ = input.string("paymentorder.description", maxLength: 40)
        _ = input.string("paymentorder.userAgent")
        _ = input.string("paymentorder.language")
        _ = input.strings("paymentorder.urls.hostUrls")
        _ = input.string("paymentorder.urls.completeUrl")
        // An empty payeeId is refused like a missing one (the sample backends always set it:
        // swedbank-pay-sdk-mobile-example-merchant examples/node.js/routes/paymentorders.js).
        if let payeeID = input.string("paymentorder.payeeInfo.payeeId"), payeeID.isEmpty {
            input.fail("paymentorder.payeeInfo.payeeId", "must be the merchant's payee id")
        }
        if let reference = input.string("paymentorder.payeeInfo.payeeReference"),
           reference.count > 30 || !reference.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
            input.fail("paymentorder.payeeInfo.payeeReference", "must be 1 to 30 letters and digits")
        }
        let instrument = input.string("paymentorder.instrument", required: false)
        if let instrument, !Self.instruments.contains(instrument) {
            input.fail("paymentorder.instrument", "is not an available instrument")
        }
        guard input.problems.isEmpty else {
            return SwedbankProblem.inputError("paymentorders", input.problems.map { ($0.field, $0.description) })
        }
        let (stored, base) = state.withLock { s -> (SimulatedPaymentOrder, String) in
            let now = Self.timestamp()
            let paymentOrder = SimulatedPaymentOrder(
                id: s.random.uuid(), token: s.random.hex(bytes: 32), sessionToken: s.random.uuid(), trackingID: s.random.hex(bytes: 16), order: order,
                instrument: instrument, availableInstruments: instrument == nil ? [] : Self.instruments,
                created: now, updated: now, version: version)
            s.paymentOrders[paymentOrder.id] = paymentOrder
            // Only a v3 order has a PaymentSession (seed 002: view-paymentsession next to view-checkout).
            if version.isV3 {
                s.sessions[paymentOrder.sessionToken] = SimulatedSession(token: paymentOrder.sessionToken, paymentOrderID: paymentOrder.id)
                s.sessionOrders[paymentOrder.sessionToken] = paymentOrder.id
            }
            return (paymentOrder, s.baseURL)
        }
        return answer(stored, base: base, status: 201)
    }

    /// A payment order answer in the order's version: `Content-Type` names it, and
    /// `api-supported-versions` lists them all (developer.swedbankpay.com, old-implementations/checkout-v2
    /// features/technical-reference/payment-order, response headers).
    func answer(_ p: SimulatedPaymentOrder, base: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json; charset=utf-8; version=\(p.version.rawValue)",
                     headers: [("api-supported-versions", "3.1, 3.0, 2.0")], body: document(for: p, base: base).bytes)
    }

    func getPaymentOrder(_ context: RequestContext) -> HTTPResponse {
        let id = context.parameters["id"] ?? ""
        guard let (stored, base) = state.withLock({ s in s.paymentOrders[id].map { ($0, s.baseURL) } }) else {
            return SwedbankProblem.notFound("paymentorders", "Payment order \(id)")
        }
        return answer(stored, base: base)
    }

    /// PATCH with `{"paymentorder": {"operation": "SetInstrument", "instrument": "…"}}` (v2's
    /// update-paymentorder-setinstrument, v3's set-instrument: swedbank-pay-sdk-android
    /// mobilesdk-merchantbackend/…/internal/remote/json/BackendOperation.kt), or v3's
    /// `{"paymentorder": {"operation": "Abort", "abortReason": "…"}}` (swedbank-pay-sdk-mobile-example-merchant
    /// examples/node.js/tests/patch.test.js).
    func patchPaymentOrder(_ context: RequestContext) -> HTTPResponse {
        let id = context.parameters["id"] ?? ""
        guard case .success(var input) = JSONInput.parse(context.request.body) else {
            return SwedbankProblem.inputError("paymentorders", [("body", "must be a JSON object")])
        }
        let operation = input.string("paymentorder.operation")
        if operation == "Abort" {
            let outcome = state.withLock { s -> (SimulatedPaymentOrder, String)? in
                guard var stored = s.paymentOrders[id], stored.version.isV3 else { return nil }
                stored.status = "Aborted"
                stored.updated = Self.timestamp()
                s.paymentOrders[id] = stored
                return (stored, s.baseURL)
            }
            guard let (stored, base) = outcome else { return SwedbankProblem.notFound("paymentorders", "Payment order \(id)") }
            return answer(stored, base: base)
        }
        let instrument = input.string("paymentorder.instrument")
        if let operation, operation != "SetInstrument" { input.fail("paymentorder.operation", "must be SetInstrument or Abort") }
        if let instrument, !Self.instruments.contains(instrument) { input.fail("paymentorder.instrument", "is not an available instrument") }
        guard input.problems.isEmpty, let instrument else {
            return SwedbankProblem.inputError("paymentorders", input.problems.map { ($0.field, $0.description) })
        }
        let outcome = state.withLock { s -> (SimulatedPaymentOrder, String)?? in
            guard var stored = s.paymentOrders[id] else { return .none }
            guard stored.instrument != nil else { return .some(nil) }
            stored.instrument = instrument
            stored.updated = Self.timestamp()
            s.paymentOrders[id] = stored
            return .some((stored, s.baseURL))
        }
        switch outcome {
        case .none: return SwedbankProblem.notFound("paymentorders", "Payment order \(id)")
        case .some(nil): return SwedbankProblem.inputError("paymentorders", [("paymentorder.instrument", "the payment order is not in instrument mode")])
        case .some(let (stored, base)?): return answer(stored, base: base)
        }
    }

    /// The payment order resource with its operations, as Swedbank Pay shapes it in the order's version.
    func document(for p: SimulatedPaymentOrder, base: String) -> JSONValue {
        var order: [String: JSONValue] = [
            "id": .string(p.path), "created": .string(p.created), "updated": .string(p.updated),
            "operation": p.order["operation"] ?? "Purchase", "status": .string(p.status),
            "currency": p.order["currency"] ?? .null, "amount": p.order["amount"] ?? .null,
            "vatAmount": p.order["vatAmount"] ?? .null, "description": p.order["description"] ?? .null,
            "initiatingSystemUserAgent": p.order["userAgent"] ?? .null, "language": p.order["language"] ?? .null,
            "urls": p.order["urls"] ?? .null, "payeeInfo": p.order["payeeInfo"] ?? .null,
            "instrumentMode": .bool(p.instrument != nil),
        ]
        // Every other member the order was created with is echoed (orderItems, payer, riskIndicator, …).
        for (key, value) in p.order where order[key] == nil && key != "userAgent" { order[key] = value }
        if let instrument = p.instrument {
            order["instrument"] = .string(instrument)
            order["availableInstruments"] = .array(p.availableInstruments.map { .string($0) })
        }
        let culture = p.order["language"]?.stringValue ?? "sv-SE"
        var operations: [JSONValue]
        if p.version.isV3 {
            // v3: seed 002 (view-paymentsession next to view-checkout; its href carries a `_tc_tid`
            // tracking id and its contentType is application/javascript, as the seed prints it);
            // set-instrument in instrument mode (swedbank-pay-sdk-ios SwedbankPaySDK/Classes/
            // SwedbankPaySDK+Extensions/Operation.swift); abort (swedbank-pay-sdk-mobile-example-merchant
            // examples/node.js/tests/patch.test.js); redirect-checkout and the view-checkout script's
            // path (developer.swedbankpay.com checkout-v3/get-started/display-payment-ui; no SDK reads
            // more of them than the rel).
            operations = [
                ["method": "GET", "rel": "redirect-checkout", "contentType": "text/html",
                 "href": .string("\(base)/checkout/\(p.token)?_tc_tid=\(p.trackingID)")],
                ["method": "GET", "rel": "view-checkout", "contentType": "application/javascript",
                 "href": .string("\(base)/checkout/client/\(p.token)?culture=\(culture)&_tc_tid=\(p.trackingID)")],
                ["method": "GET", "rel": "view-paymentsession", "contentType": "application/javascript",
                 "href": .string("\(base)/psp/paymentsessions/\(p.sessionToken)?_tc_tid=\(p.trackingID)")],
                ["method": "PATCH", "rel": "abort", "contentType": "application/json", "href": .string("\(base)\(p.path)")],
            ]
            if p.instrument != nil {
                operations.append(["method": "PATCH", "rel": "set-instrument", "contentType": "application/json",
                                   "href": .string("\(base)\(p.path)")])
            }
            return ["paymentOrder": .object(order), "operations": .array(operations)]
        }
        // v2: seed 000 (view-paymentorder; update-paymentorder-setinstrument in instrument mode); no PaymentSession.
        operations = [
            ["method": "GET", "rel": "view-paymentorder", "contentType": "application/javascript",
             "href": .string("\(base)/paymentmenu/core/scripts/client/px.paymentmenu.client.js?token=\(p.token)&culture=\(culture)")],
        ]
        if p.instrument != nil {
            operations.append(["method": "PATCH", "rel": "update-paymentorder-setinstrument", "contentType": "application/json",
                               "href": .string("\(base)\(p.path)")])
        }
        return ["paymentorder": .object(order), "operations": .array(operations)]
    }

    static func timestamp() -> String {
        Timestamp.iso8601(ms: nowMs())
    }

    // MARK: Fault control

    func faultsDocument() -> HTTPResponse {
        let rules = state.withLock { $0.faults }
        return .json(.array(rules.map { rule in
            var o: [String: JSONValue] = ["route": .string(rule.route), "fault": .string(rule.fault.description), "rate": .number(rule.rate)]
            if let magic = rule.magic { o["magic"] = .string(magic) }
            return .object(o)
        }))
    }

    /// PUT a JSON array of `{route, fault, rate?, magic?}`.
    func replaceFaults(_ context: RequestContext) -> HTTPResponse {
        guard let list = (try? JSONValue.parse(context.request.body))?.arrayValue else {
            return .problem(.badRequest("the body must be a JSON array of fault rules", parameter: "body"))
        }
        var rules: [FaultRule] = []
        for (i, item) in list.enumerated() {
            guard let faultText = item["fault"]?.stringValue, let fault = SimulatedFault(faultText) else {
                return .problem(.badRequest("rule \(i): fault must be latency=MS, status=CODE, timeout, reset, malformed or truncated", parameter: "fault"))
            }
            let rate = item["rate"]?.doubleValue ?? 1
            guard (0...1).contains(rate) else { return .problem(.badRequest("rule \(i): rate must be within 0…1", parameter: "rate")) }
            rules.append(FaultRule(route: item["route"]?.stringValue ?? "*", fault: fault, rate: rate, magic: item["magic"]?.stringValue))
        }
        setFaults(rules)
        return faultsDocument()
    }
}
