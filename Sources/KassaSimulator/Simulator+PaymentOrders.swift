import Foundation
import KassaCore
import KassaEdge

/// A payment order as the simulator keeps it.
struct SimulatedPaymentOrder: Sendable {
    var id: String
    var token: String
    var sessionToken: String
    var order: [String: JSONValue]
    var instrument: String?
    var availableInstruments: [String]
    var created: String
    var updated: String
    var status = "Initialized"

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
        _ = input.string("paymentorder.payeeInfo.payeeId")
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
                id: s.random.uuid(), token: s.random.hex(bytes: 32), sessionToken: s.random.hex(bytes: 32), order: order,
                instrument: instrument, availableInstruments: instrument == nil ? [] : Self.instruments,
                created: now, updated: now)
            s.paymentOrders[paymentOrder.id] = paymentOrder
            s.sessions[paymentOrder.sessionToken] = SimulatedSession(token: paymentOrder.sessionToken, paymentOrderID: paymentOrder.id)
            s.sessionOrders[paymentOrder.sessionToken] = paymentOrder.id
            return (paymentOrder, s.baseURL)
        }
        return .json(document(for: stored, base: base), status: 201)
    }

    func getPaymentOrder(_ context: RequestContext) -> HTTPResponse {
        let id = context.parameters["id"] ?? ""
        guard let (stored, base) = state.withLock({ s in s.paymentOrders[id].map { ($0, s.baseURL) } }) else {
            return SwedbankProblem.notFound("paymentorders", "Payment order \(id)")
        }
        return .json(document(for: stored, base: base))
    }

    /// PATCH with `{"paymentorder": {"operation": "SetInstrument", "instrument": "…"}}`.
    func patchPaymentOrder(_ context: RequestContext) -> HTTPResponse {
        let id = context.parameters["id"] ?? ""
        guard case .success(var input) = JSONInput.parse(context.request.body) else {
            return SwedbankProblem.inputError("paymentorders", [("body", "must be a JSON object")])
        }
        let operation = input.string("paymentorder.operation")
        let instrument = input.string("paymentorder.instrument")
        if let operation, operation != "SetInstrument" { input.fail("paymentorder.operation", "must be SetInstrument") }
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
        case .some(let (stored, base)?): return .json(document(for: stored, base: base))
        }
    }

    /// The payment order resource with its operations, as Swedbank Pay shapes it.
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
        if let instrument = p.instrument {
            order["instrument"] = .string(instrument)
            order["availableInstruments"] = .array(p.availableInstruments.map { .string($0) })
        }
        let culture = p.order["language"]?.stringValue ?? "sv-SE"
        var operations: [JSONValue] = [
            ["method": "GET", "rel": "view-paymentorder", "contentType": "application/javascript",
             "href": .string("\(base)/paymentmenu/core/scripts/client/px.paymentmenu.client.js?token=\(p.token)&culture=\(culture)")],
            ["method": "GET", "rel": "view-paymentsession", "contentType": "application/json",
             "href": .string("\(base)/psp/paymentsessions/\(p.sessionToken)")],
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
