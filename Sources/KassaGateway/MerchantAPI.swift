import KassaCore
import KassaEdge
import KassaStore
import KassaUpstream

/// The Merchant Backend API of the Swedbank Pay Mobile SDK (seed 000), with
/// the custom-backend rules of seed 001.
public enum MerchantAPI {
    /// The API key header, as the seed's examples name it.
    public static let apiKeyHeader = "your-api-key"
    public static let root = "/swedbank-pay-mobile/"
}

/// The seed's Merchant Backend problem types.
enum MerchantProblem {
    static let base = "https://api.payex.com/psp/errordetail/mobilesdk/"

    static func unauthorized() -> HTTPResponse {
        .problem(Problem(type: base + "unauthorized", title: "Unauthorized", status: 401,
                         detail: "the Your-Api-Key header is missing or holds no valid key"))
    }

    static func badRequest(_ field: String, _ description: String) -> HTTPResponse {
        .problem(Problem(type: base + "badrequest", title: "Bad Request", status: 400, detail: "\(field) \(description)",
                         extensions: ["problems": [["name": .string(field), "description": .string(description)]]]))
    }

    static func badGateway(_ detail: String) -> HTTPResponse {
        .problem(Problem(type: base + "badgateway", title: "Bad Gateway", status: 502, detail: detail))
    }

    static func gatewayTimeout() -> HTTPResponse {
        .problem(Problem(type: base + "gatewaytimeout", title: "Gateway Timeout", status: 504,
                         detail: "Swedbank Pay did not answer in time"))
    }
}

extension Gateway {
    // MARK: Authentication

    func hasValidAPIKey(_ request: HTTPRequest) -> Bool {
        guard let key = request.headers[MerchantAPI.apiKeyHeader], !key.isEmpty else { return false }
        return Secrets.matchesAny(key, configuration.apiKeys)
    }

    struct Refusal: Error { let response: HTTPResponse }

    /// The API key check and JSON parsing every Merchant API POST/PATCH starts with.
    func authorizedInput(_ context: RequestContext) -> Result<JSONInput, Refusal> {
        guard hasValidAPIKey(context.request) else { return .failure(Refusal(response: MerchantProblem.unauthorized())) }
        return JSONInput.parse(context.request.body).mapError { Refusal(response: MerchantProblem.badRequest($0.field, $0.description)) }
    }

    // MARK: Endpoints

    func merchantRoot(_ context: RequestContext) async -> HTTPResponse {
        guard hasValidAPIKey(context.request) else { return MerchantProblem.unauthorized() }
        return .json(["consumers": "/swedbank-pay-mobile/consumers", "paymentorders": "/swedbank-pay-mobile/paymentorders"])
    }

    func merchantConsumers(_ context: RequestContext) async -> HTTPResponse {
        var input: JSONInput
        switch authorizedInput(context) {
        case .success(let parsed): input = parsed
        case .failure(let refusal): return refusal.response
        }
        _ = input.string("operation")
        _ = input.string("language")
        _ = input.strings("shippingAddressRestrictedToCountryCodes")
        if let first = input.problems.first { return MerchantProblem.badRequest(first.field, first.description) }

        let (result, parsed) = await swedbankPay.send(SwedbankPayClient.Call(operation: "initiate-consumer-session", method: "POST",
                                                     url: swedbankPay.url("/psp/consumers"), body: input.document,
                                                     traceID: context.traceID))
        return forward(result, parsed) { document in
            Self.operation(document, rel: "view-consumer-identification") != nil
                ? nil : "the Swedbank Pay answer holds no view-consumer-identification operation"
        }
    }

    func merchantPaymentOrders(_ context: RequestContext) async -> HTTPResponse {
        let input: JSONInput
        switch authorizedInput(context) {
        case .success(let parsed): input = parsed
        case .failure(let refusal): return refusal.response
        }
        switch await createPaymentOrder(input, traceID: context.traceID) {
        case .failure(let refusal): return refusal.response
        case .success(let created): return created.response
        }
    }

    /// A payment order Kassa created upstream and stored.
    struct CreatedPaymentOrder {
        var response: HTTPResponse
        var document: JSONValue
        var payeeReference: String
        var paymentOrderID: String
    }

    /// Validates a `{"paymentorder": {…}}` document, gives it Kassa's payee
    /// reference, creates it upstream and stores it (seed 000).
    func createPaymentOrder(_ input: JSONInput, traceID: String, sessionID: String? = nil) async -> Result<CreatedPaymentOrder, Refusal> {
        var input = input
        guard var order = input.object("paymentorder") else {
            return .failure(Refusal(response: MerchantProblem.badRequest(input.problems[0].field, input.problems[0].description)))
        }
        _ = input.string("paymentorder.operation", required: false)
        _ = input.string("paymentorder.currency")
        _ = input.integer("paymentorder.amount", minimum: 0)
        _ = input.integer("paymentorder.vatAmount", minimum: 0)
        _ = input.string("paymentorder.description")
        _ = input.string("paymentorder.userAgent", required: false)
        _ = input.string("paymentorder.language", required: false)
        _ = input.string("paymentorder.instrument", required: false)
        _ = input.object("paymentorder.urls")
        _ = input.strings("paymentorder.urls.hostUrls")
        _ = input.string("paymentorder.urls.completeUrl")
        _ = input.object("paymentorder.payeeInfo", required: false)
        if let first = input.problems.first { return .failure(Refusal(response: MerchantProblem.badRequest(first.field, first.description))) }

        // The gateway's own unique id goes upstream as payeeInfo.payeeReference (seed 000).
        let payeeReference = "K" + Secrets.randomHex(bytes: 14)
        var payeeInfo = order["payeeInfo"]?.objectValue ?? [:]
        payeeInfo["payeeReference"] = .string(payeeReference)
        if payeeInfo["payeeId"] == nil, let payeeID = configuration.payeeID { payeeInfo["payeeId"] = .string(payeeID) }
        order["payeeInfo"] = .object(payeeInfo)
        order["operation"] = order["operation"] ?? "Purchase"
        var body = input.document.objectValue ?? [:]
        body["paymentorder"] = .object(order)

        let (result, parsed) = await swedbankPay.send(SwedbankPayClient.Call(operation: "create-paymentorder", method: "POST",
                                                     url: swedbankPay.url("/psp/paymentorders"), body: .object(body), traceID: traceID,
                                                     sessionID: sessionID))
        var recorded: (id: String, setInstrument: String?, document: JSONValue)?
        var response = forward(result, parsed) { document in
            guard Self.operation(document, rel: "view-paymentorder") != nil else {
                return "the Swedbank Pay answer holds no view-paymentorder operation"
            }
            guard let id = document["paymentorder"]?["id"]?.stringValue else {
                return "the Swedbank Pay answer holds no paymentorder.id"
            }
            recorded = (id, Self.operation(document, rel: "update-paymentorder-setinstrument")?["href"]?.stringValue, document)
            return nil
        }
        guard let recorded, (200..<300).contains(response.status) else { return .failure(Refusal(response: response)) }
        do {
            try store.recordPaymentOrder(payeeReference: payeeReference, paymentOrderID: recorded.id,
                                         setInstrumentHref: recorded.setInstrument, atMs: Self.nowMs())
        } catch {
            logger.error("cannot store payment order", metadata: ["payee_reference": "\(payeeReference)", "error": "\(error)"])
            return .failure(Refusal(response: .problem(.internalError("the payment order was created upstream but could not be stored"))))
        }
        store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: sessionID, kind: "paymentorder.created", summary: "payment order \(recorded.id)",
                                       traceID: traceID,
                                       data: ["payeeReference": .string(payeeReference), "paymentOrder": .string(recorded.id)]))
        if recorded.setInstrument != nil {
            response = Self.addMobileSDK(response, payeeReference: payeeReference)
        }
        return .success(CreatedPaymentOrder(response: response, document: recorded.document, payeeReference: payeeReference,
                                            paymentOrderID: recorded.id))
    }

    func merchantSetInstrument(_ context: RequestContext) async -> HTTPResponse {
        var input: JSONInput
        switch authorizedInput(context) {
        case .success(let parsed): input = parsed
        case .failure(let refusal): return refusal.response
        }
        // Exactly the operation SetInstrument and a string instrument, as the sample backends check.
        let order = input.object("paymentorder")
        let operation = input.string("paymentorder.operation")
        _ = input.string("paymentorder.instrument", maxLength: 64)
        if let operation, operation != "SetInstrument" { input.fail("paymentorder.operation", "must be SetInstrument") }
        if let order, Set(order.keys) != ["operation", "instrument"], input.problems.isEmpty {
            input.fail("paymentorder", "must hold only operation and instrument")
        }
        if let first = input.problems.first { return MerchantProblem.badRequest(first.field, first.description) }

        let reference = context.parameters["id"] ?? ""
        let record: Store.PaymentOrderRecord?
        do { record = try store.paymentOrder(payeeReference: reference) } catch {
            return .problem(.internalError("the payment order store cannot be read"))
        }
        guard let record else { return .problem(.notFound("no payment order \(reference)")) }
        guard let href = record.setInstrumentHref else {
            return MerchantProblem.badRequest("paymentorder", "the payment order is not in instrument mode")
        }
        guard swedbankPay.isAllowed(href) else { return MerchantProblem.badGateway("the setinstrument operation points outside the upstream") }

        let (result, parsed) = await swedbankPay.send(SwedbankPayClient.Call(operation: "update-paymentorder-setinstrument", method: "PATCH",
                                                     url: href, body: input.document, traceID: context.traceID))
        let response = forward(result, parsed) { _ in nil }
        guard (200..<300).contains(response.status) else { return response }
        return Self.addMobileSDK(response, payeeReference: reference)
    }

    func merchantAndroidIntent(_ context: RequestContext) async -> HTTPResponse {
        let request = context.request
        do { try PaymentURLHelper.checkQuery(request.query) } catch {
            return Self.helperProblem(error)
        }
        guard let package = request.queryValue("package") else { return MerchantProblem.badRequest("package", "is required") }
        guard PaymentURLHelper.isValidPackage(package) else {
            return MerchantProblem.badRequest("package", "must be an Android package name such as com.example.app")
        }
        guard let host = publicHost(request) else { return MerchantProblem.badRequest("Host", "is missing or not a host name") }
        let intent = PaymentURLHelper.androidIntentURL(host: host, path: request.path, query: request.query, package: package)
        return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8",
                            headers: [("cache-control", "no-store"), ("referrer-policy", "no-referrer")],
                            body: Array(PaymentURLHelper.androidPage(intentURL: intent).utf8))
    }

    func merchantIOSUniversalLink(_ context: RequestContext) async -> HTTPResponse {
        let request = context.request
        do {
            try PaymentURLHelper.checkQuery(request.query)
            guard let host = publicHost(request) else { return MerchantProblem.badRequest("Host", "is missing or not a host name") }
            let location = try PaymentURLHelper.iosRedirect(host: host, path: request.path, query: request.query,
                                                            trampolineURL: configuration.iosTrampolineURL)
            // 301 as the seed specifies (it notes 302 may replace it later).
            return HTTPResponse(status: 301, contentType: "text/plain; charset=utf-8",
                                headers: [("location", location), ("cache-control", "no-store")])
        } catch {
            return Self.helperProblem(error)
        }
    }

    func appleAppSiteAssociation(_ context: RequestContext) async -> HTTPResponse {
        let details: [JSONValue] = configuration.appleAppIDs.map {
            ["appID": .string($0), "paths": ["/swedbank-pay-mobile/sdk-callback/*"]]
        }
        return .json(["applinks": ["apps": [], "details": .array(details)]])
    }

    // MARK: Helpers

    /// The host payment urls are built on: the configured public URL's, else the request's Host header.
    func publicHost(_ request: HTTPRequest) -> String? {
        if !configuration.publicBaseURL.isEmpty {
            let trimmed = configuration.publicBaseURL.replacingOccurrences(of: "https://", with: "").replacingOccurrences(of: "http://", with: "")
            return trimmed.split(separator: "/").first.map(String.init)
        }
        guard let host = request.headers["host"], PaymentURLHelper.isValidHost(host) else { return nil }
        return host
    }

    static func helperProblem(_ error: PaymentURLHelper.Failure) -> HTTPResponse {
        switch error {
        case .invalid(let parameter, let reason): return MerchantProblem.badRequest(parameter, reason)
        }
    }

    static func operation(_ document: JSONValue, rel: String) -> JSONValue? {
        document["operations"]?.arrayValue?.first { $0["rel"]?.stringValue == rel }
    }

    /// Turns an upstream exchange into the answer for the app: success and
    /// RFC 7807 problems pass through with their status; timeouts are 504;
    /// anything unusable is 502. `check` may refuse a success body.
    func forward(_ result: Result<UpstreamResponse, UpstreamError>, _ document: JSONValue?, check: (JSONValue) -> String?) -> HTTPResponse {
        switch result {
        case .failure(.timeout):
            return MerchantProblem.gatewayTimeout()
        case .failure(let error):
            return MerchantProblem.badGateway("Swedbank Pay could not be reached: \(error)")
        case .success(let response):
            if (200..<300).contains(response.status) {
                guard let document, case .object = document else {
                    return MerchantProblem.badGateway("Swedbank Pay answered \(response.status) with a body that is not JSON")
                }
                if let refusal = check(document) { return MerchantProblem.badGateway(refusal) }
                return HTTPResponse(status: response.status, contentType: "application/json", body: response.body)
            }
            if let document, document["type"]?.stringValue != nil, document["status"]?.intValue != nil {
                return HTTPResponse(status: response.status, contentType: Problem.contentType, body: response.body)
            }
            return MerchantProblem.badGateway("Swedbank Pay answered \(response.status) without a problem document")
        }
    }

    /// Adds the instrument-mode `mobileSDK` member (seed 000) to a payment order answer.
    static func addMobileSDK(_ response: HTTPResponse, payeeReference: String) -> HTTPResponse {
        guard case .object(var document)? = try? JSONValue.parse(response.body) else { return response }
        let instruments = document["paymentorder"]?["availableInstruments"] ?? .array([])
        document["mobileSDK"] = ["validInstruments": instruments,
                                 "setInstrument": .string("/swedbank-pay-mobile/paymentorders/\(payeeReference)/setInstrument")]
        var updated = response
        updated.body = JSONValue.object(document).bytes
        return updated
    }
}
