import KassaCore
import KassaEdge
import KassaStore
import KassaUpstream
import Logging

/// The Merchant Backend API of the Swedbank Pay Mobile SDK (seed 000), with
/// the custom-backend rules of seed 001. Handlers throw the seed's problems;
/// the API key is checked by the middleware before they run.
struct MerchantAPI: Sendable {
    /// The API key header, as the seed's examples name it.
    static let apiKeyHeader = "your-api-key"
    static let root = "/swedbank-pay-mobile/"

    let configuration: GatewayConfiguration
    let store: Store
    let swedbankPay: SwedbankPayClient
    let clock: any WallClock
    let logger: Logger
}

/// The seed's Merchant Backend problem types.
enum MerchantProblem {
    static let base = "https://api.payex.com/psp/errordetail/mobilesdk/"

    static func unauthorized() -> Problem {
        Problem(type: base + "unauthorized", title: "Unauthorized", status: 401,
                detail: "the Your-Api-Key header is missing or holds no valid key")
    }

    static func badRequest(_ field: String, _ description: String) -> Problem {
        Problem(type: base + "badrequest", title: "Bad Request", status: 400, detail: "\(field) \(description)",
                extensions: ["problems": [["name": .string(field), "description": .string(description)]]])
    }

    static func badGateway(_ detail: String) -> Problem {
        Problem(type: base + "badgateway", title: "Bad Gateway", status: 502, detail: detail)
    }

    static func gatewayTimeout() -> Problem {
        Problem(type: base + "gatewaytimeout", title: "Gateway Timeout", status: 504,
                detail: "Swedbank Pay did not answer in time")
    }
}

extension MerchantAPI {
    /// The JSON body every Merchant API POST/PATCH starts with.
    func input(_ context: RequestContext) throws(Problem) -> JSONInput {
        switch JSONInput.parse(context.request.body) {
        case .success(let parsed): return parsed
        case .failure(let problem): throw MerchantProblem.badRequest(problem.field, problem.description)
        }
    }

    // MARK: Endpoints

    func root(_ context: RequestContext) async throws -> HTTPResponse {
        .json(["consumers": "/swedbank-pay-mobile/consumers", "paymentorders": "/swedbank-pay-mobile/paymentorders"])
    }

    func consumers(_ context: RequestContext) async throws -> HTTPResponse {
        var input = try input(context)
        _ = input.string("operation")
        _ = input.string("language")
        _ = input.strings("shippingAddressRestrictedToCountryCodes")
        if let first = input.problems.first { throw MerchantProblem.badRequest(first.field, first.description) }

        let (result, parsed) = await swedbankPay.send(SwedbankPayClient.Call(operation: "initiate-consumer-session", method: "POST",
                                                                           url: swedbankPay.url("/psp/consumers"), body: input.document,
                                                                           traceID: context.traceID))
        return try forward(result, parsed) { document in
            Self.operation(document, rel: "view-consumer-identification") != nil
                ? nil : "the Swedbank Pay answer holds no view-consumer-identification operation"
        }
    }

    func paymentOrders(_ context: RequestContext) async throws -> HTTPResponse {
        try await createPaymentOrder(try input(context), traceID: context.traceID).response
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
    func createPaymentOrder(_ input: JSONInput, traceID: String, sessionID: String? = nil) async throws -> CreatedPaymentOrder {
        var input = input
        guard var order = input.object("paymentorder") else {
            throw MerchantProblem.badRequest(input.problems[0].field, input.problems[0].description)
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
        if let first = input.problems.first { throw MerchantProblem.badRequest(first.field, first.description) }

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
        var response = try forward(result, parsed) { document in
            guard Self.operation(document, rel: "view-paymentorder") != nil else {
                return "the Swedbank Pay answer holds no view-paymentorder operation"
            }
            guard let id = document["paymentorder"]?["id"]?.stringValue else {
                return "the Swedbank Pay answer holds no paymentorder.id"
            }
            recorded = (id, Self.operation(document, rel: "update-paymentorder-setinstrument")?["href"]?.stringValue, document)
            return nil
        }
        guard let recorded else { throw MerchantProblem.badGateway("Swedbank Pay answered without a payment order") }
        do {
            try store.recordPaymentOrder(payeeReference: payeeReference, paymentOrderID: recorded.id,
                                         setInstrumentHref: recorded.setInstrument, atMs: clock.nowMs())
        } catch {
            logger.error("cannot store payment order", metadata: ["payee_reference": "\(payeeReference)", "error": "\(error)"])
            throw Problem.internalError("the payment order was created upstream but could not be stored")
        }
        store.eventLog.append(LogEvent(atMs: clock.nowMs(), sessionID: sessionID, kind: "paymentorder.created", summary: "payment order \(recorded.id)",
                                       traceID: traceID,
                                       data: ["payeeReference": .string(payeeReference), "paymentOrder": .string(recorded.id)]))
        if recorded.setInstrument != nil {
            response = Self.addMobileSDK(response, payeeReference: payeeReference)
        }
        return CreatedPaymentOrder(response: response, document: recorded.document, payeeReference: payeeReference,
                                   paymentOrderID: recorded.id)
    }

    func setInstrument(_ context: RequestContext) async throws -> HTTPResponse {
        var input = try input(context)
        // Exactly the operation SetInstrument and a string instrument, as the sample backends check.
        let order = input.object("paymentorder")
        let operation = input.string("paymentorder.operation")
        _ = input.string("paymentorder.instrument", maxLength: 64)
        if let operation, operation != "SetInstrument" { input.fail("paymentorder.operation", "must be SetInstrument") }
        if let order, Set(order.keys) != ["operation", "instrument"], input.problems.isEmpty {
            input.fail("paymentorder", "must hold only operation and instrument")
        }
        if let first = input.problems.first { throw MerchantProblem.badRequest(first.field, first.description) }

        let reference = context.parameters["id"] ?? ""
        let record: Store.PaymentOrderRecord?
        do { record = try store.paymentOrder(payeeReference: reference) } catch {
            throw Problem.internalError("the payment order store cannot be read")
        }
        guard let record else { throw Problem.notFound("no payment order \(reference)") }
        guard let href = record.setInstrumentHref else {
            throw MerchantProblem.badRequest("paymentorder", "the payment order is not in instrument mode")
        }
        guard swedbankPay.isAllowed(href) else { throw MerchantProblem.badGateway("the setinstrument operation points outside the upstream") }

        let (result, parsed) = await swedbankPay.send(SwedbankPayClient.Call(operation: "update-paymentorder-setinstrument", method: "PATCH",
                                                     url: href, body: input.document, traceID: context.traceID))
        let response = try forward(result, parsed) { _ in nil }
        return Self.addMobileSDK(response, payeeReference: reference)
    }

    func androidIntent(_ context: RequestContext) throws -> HTTPResponse {
        let request = context.request
        do { try PaymentURLHelper.checkQuery(request.query) } catch {
            throw Self.helperProblem(error)
        }
        guard let package = request.queryValue("package") else { throw MerchantProblem.badRequest("package", "is required") }
        guard PaymentURLHelper.isValidPackage(package) else {
            throw MerchantProblem.badRequest("package", "must be an Android package name such as com.example.app")
        }
        guard let host = publicHost(request) else { throw MerchantProblem.badRequest("Host", "is missing or not a host name") }
        let intent = PaymentURLHelper.androidIntentURL(host: host, path: request.path, query: request.query, package: package)
        return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8",
                            headers: [("cache-control", "no-store"), ("referrer-policy", "no-referrer")],
                            body: Array(PaymentURLHelper.androidPage(intentURL: intent).utf8))
    }

    func iosUniversalLink(_ context: RequestContext) throws -> HTTPResponse {
        let request = context.request
        do {
            try PaymentURLHelper.checkQuery(request.query)
            guard let host = publicHost(request) else { throw MerchantProblem.badRequest("Host", "is missing or not a host name") }
            let location = try PaymentURLHelper.iosRedirect(host: host, path: request.path, query: request.query,
                                                            trampolineURL: configuration.iosTrampolineURL)
            // 301 as the seed specifies (it notes 302 may replace it later).
            return HTTPResponse(status: 301, contentType: "text/plain; charset=utf-8",
                                headers: [("location", location), ("cache-control", "no-store")])
        } catch let failure as PaymentURLHelper.Failure {
            throw Self.helperProblem(failure)
        }
    }

    func appleAppSiteAssociation(_ context: RequestContext) -> HTTPResponse {
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

    static func helperProblem(_ error: PaymentURLHelper.Failure) -> Problem {
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
    func forward(_ result: Result<UpstreamResponse, UpstreamError>, _ document: JSONValue?, check: (JSONValue) -> String?) throws(Problem) -> HTTPResponse {
        switch result {
        case .failure(.timeout):
            throw MerchantProblem.gatewayTimeout()
        case .failure(let error):
            throw MerchantProblem.badGateway("Swedbank Pay could not be reached: \(error)")
        case .success(let response):
            if (200..<300).contains(response.status) {
                guard let document, case .object = document else {
                    throw MerchantProblem.badGateway("Swedbank Pay answered \(response.status) with a body that is not JSON")
                }
                if let refusal = check(document) { throw MerchantProblem.badGateway(refusal) }
                return HTTPResponse(status: response.status, contentType: "application/json", body: response.body)
            }
            if let document, let problem = Problem(forwarding: document, status: response.status) { throw problem }
            throw MerchantProblem.badGateway("Swedbank Pay answered \(response.status) without a problem document")
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
