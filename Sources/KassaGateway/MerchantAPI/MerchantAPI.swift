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

    /// `gatewayStatus` and `body` only when Swedbank Pay answered something unusable: the SDKs
    /// then report an invalid backend response, and without them a connection failure
    /// (swedbank-pay-sdk-ios SwedbankPaySDKMerchantBackend/Classes/Problems.swift;
    /// swedbank-pay-sdk-android mobilesdk-merchantbackend/…/internal/Problems.kt;
    /// swedbank-pay-sdk-mobile-example-merchant examples/node.js/util/problems.js).
    static func badGateway(_ detail: String, gatewayStatus: Int? = nil, body: [UInt8]? = nil) -> Problem {
        var extensions: [String: JSONValue] = [:]
        if let gatewayStatus { extensions["gatewayStatus"] = .number(Double(gatewayStatus)) }
        if let body { extensions["body"] = .string(Redaction.redactText(SwedbankPayClient.excerpt(body))) }
        return Problem(type: base + "badgateway", title: "Bad Gateway", status: 502, detail: detail, extensions: extensions)
    }

    /// The type the SDKs recognise as not found (examples/node.js/util/constants.js in the sample backend).
    static func notFound(_ detail: String) -> Problem {
        Problem(type: "https://api.payex.com/psp/errordetail/notfound", title: "Not Found", status: 404, detail: detail)
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

    /// The root may be cached, and the links it names stay valid (seed 000; the sample answers
    /// with max-age=31536000: examples/node.js/routes/index.js). A day is enough to spare the
    /// SDKs a round trip per payment and short enough to move the links.
    static let rootDocument = HTTPResponse.json(["consumers": "/swedbank-pay-mobile/consumers", "paymentorders": "/swedbank-pay-mobile/paymentorders"],
                                                headers: [("cache-control", "public, max-age=86400")])

    func consumers(_ context: RequestContext) async throws -> HTTPResponse {
        var input = try input(context)
        if let operation = input.string("operation"), operation != "initiate-consumer-session" {
            input.fail("operation", "must be initiate-consumer-session")
        }
        _ = input.string("language")
        _ = input.strings("shippingAddressRestrictedToCountryCodes")
        if let first = input.problems.first { throw MerchantProblem.badRequest(first.field, first.description) }

        let (result, parsed, _) = await swedbankPay.send(SwedbankPayClient.Call(operation: "initiate-consumer-session", method: "POST",
                                                                           url: swedbankPay.url("/psp/consumers"), body: .document(input.document),
                                                                           traceID: context.traceID))
        return try forward(result, parsed) { document in
            Self.operation(document, rel: "view-consumer-identification") != nil
                ? nil : "the Swedbank Pay answer holds no view-consumer-identification operation"
        }
    }

    /// The app's order goes upstream as it is: its `productName` picks the version, as with the SDKs.
    func paymentOrders(_ context: RequestContext) async throws -> HTTPResponse {
        try await createPaymentOrder(context.request.body, traceID: context.traceID).response
    }

    /// A payment order Kassa created upstream and stored.
    struct CreatedPaymentOrder {
        var response: HTTPResponse
        var payeeReference: String
        var paymentOrderID: String
        /// The PaymentSession of a v3 order (seed 002), nil for v2.
        var viewPaymentSession: String?
    }

    /// What Kassa reads from a payment order answer, in either spelling and either version.
    struct PaymentOrderAnswer {
        struct Refusal: Error { var reason: String }

        var id: String
        var setInstrumentHref: String?
        var viewPaymentSession: String?
        /// The order's `availableInstruments` (instrument mode's `mobileSDK.validInstruments`).
        var availableInstruments: JSONValue = .array([])

        /// Reads `paymentOrder` (v3; what the SDKs decode and seed 002 shows) or `paymentorder`
        /// (seed 000), with `view-checkout` (v3) or `view-paymentorder` (v2), as
        /// swedbank-pay-sdk-android mobilesdk-merchantbackend/…/MerchantBackendConfiguration.kt reads them.
        /// From the bytes, with no tree but the instruments (the answer itself is forwarded as it
        /// came); an operation is the first of its `rel`. Nil when the body is not one JSON object.
        static func decode(_ body: [UInt8]) -> Result<PaymentOrderAnswer, Refusal>? {
            typealias Order = (id: String?, instruments: JSONValue?)
            var camel: Order?, lower: Order?
            var operations: [String: String?] = [:]   // rel → the first such operation's href
            func order(_ r: inout JSONReader) throws(JSONParseError) -> Order {
                var order: Order = (nil, nil)
                _ = try r.object { r, member throws(JSONParseError) in
                    switch member {
                    case "id": order.id = try r.string()
                    case "availableInstruments": order.instruments = try r.value()
                    default: break
                    }
                }
                return order
            }
            guard (try? JSONReader.read(body, { r throws(JSONParseError) -> Bool in
                try r.object { r, member throws(JSONParseError) in
                    switch member {
                    case "paymentOrder": camel = try order(&r)
                    case "paymentorder": lower = try order(&r)
                    case "operations":
                        _ = try r.array { r throws(JSONParseError) in
                            var rel: String?, href: String?
                            _ = try r.object { r, member throws(JSONParseError) in
                                switch member {
                                case "rel": rel = try r.string()
                                case "href": href = try r.string()
                                default: break
                                }
                            }
                            if let rel, operations[rel] == nil { operations[rel] = .some(href) }
                        }
                    default: break
                    }
                }
            })) == true else { return nil }
            guard operations["view-checkout"] != nil || operations["view-paymentorder"] != nil else {
                return .failure(Refusal(reason: "the Swedbank Pay answer holds neither view-checkout nor view-paymentorder"))
            }
            let chosen = camel ?? lower
            guard let id = chosen?.id else { return .failure(Refusal(reason: "the Swedbank Pay answer holds no paymentOrder.id")) }
            let setInstrument = operations["set-instrument"] ?? operations["update-paymentorder-setinstrument"]
            return .success(PaymentOrderAnswer(id: id, setInstrumentHref: setInstrument ?? nil,
                                               viewPaymentSession: operations["view-paymentsession"] ?? nil,
                                               availableInstruments: chosen?.instruments ?? .array([])))
        }
    }

    /// Validates a `{"paymentorder": {…}}` document (its bytes), gives it Kassa's payee
    /// reference, creates it upstream and stores it (seed 000).
    /// `version`: asked for in the media types (nil: the body's productName decides, as the SDKs do).
    /// `sessionID`: the session it is made for, whose row the caller stores next and waits for:
    /// that commit carries the order's row too, so it is not waited for on its own.
    /// `hostURL`: an origin added to the order's hostUrls (`OrderToCreate`).
    func createPaymentOrder(_ document: [UInt8], traceID: String, sessionID: String? = nil,
                            version: PaymentOrderVersion? = nil, addingHostURL hostURL: String? = nil) async throws -> CreatedPaymentOrder {
        // The gateway's own unique id goes upstream as payeeInfo.payeeReference (seed 000). Time first,
        // like a session's id: two indexes are keyed by it, and random keys rewrote a leaf of each per order.
        let payeeReference = "K" + Secrets.timeOrderedHex(nowMs: clock.nowMs(), randomBytes: 9)
        let body = try OrderToCreate.upstreamBody(document, payeeReference: payeeReference, payeeID: configuration.payeeID,
                                                  addingHostURL: hostURL)
        let (result, problem, _) = await swedbankPay.send(SwedbankPayClient.Call(operation: "create-paymentorder", method: "POST",
                                                      url: swedbankPay.url("/psp/paymentorders"), body: .written(body), traceID: traceID,
                                                      sessionID: sessionID, version: version, parsesSuccessfulAnswer: false))
        let (response, recorded) = try createdAnswer(result, problem)
        // Named as the session's only when a session can be made from it (the caller refuses one
        // otherwise): an order that names no session is deleted by its own age, one that names a
        // session with it.
        let session = recorded.viewPaymentSession.map(swedbankPay.isAllowed) == true ? sessionID : nil
        do {
            try await store.recordPaymentOrder(payeeReference: payeeReference, paymentOrderID: recorded.id,
                                         setInstrumentHref: recorded.setInstrumentHref, apiVersion: version?.rawValue,
                                         sessionID: session, atMs: clock.nowMs(),
                                         waiting: sessionID == nil)
        } catch {
            logger.error("cannot store payment order", metadata: ["payee_reference": "\(payeeReference)", "error": "\(error)"])
            throw Problem.internalError("the payment order was created upstream but could not be stored")
        }
        return created(response, recorded, payeeReference: payeeReference, sessionID: sessionID, traceID: traceID)
    }

    // The steps around the awaits are plain functions, as in `SwedbankPayClient.send`.

    /// Swedbank Pay's answer to the create, as forwarded, and the order read from it.
    @inline(never)
    private func createdAnswer(_ result: Result<UpstreamResponse, UpstreamError>, _ problem: JSONValue?) throws
        -> (HTTPResponse, PaymentOrderAnswer) {
        var recorded: PaymentOrderAnswer?
        let response = try forward(result, problem) { body in
            switch PaymentOrderAnswer.decode(body) {
            case nil: return .notJSON
            case .failure(let refusal)?: return .refused(refusal.reason)
            case .success(let answer)?: recorded = answer; return .accepted
            }
        }
        guard let recorded else { throw MerchantProblem.badGateway("Swedbank Pay answered without a payment order") }
        return (response, recorded)
    }

    /// The stored order logged, and its answer with the SDK's additions.
    @inline(never)
    private func created(_ response: HTTPResponse, _ recorded: PaymentOrderAnswer, payeeReference: String, sessionID: String?,
                         traceID: String) -> CreatedPaymentOrder {
        var response = response
        store.eventLog.append(LogEvent(atMs: clock.nowMs(), sessionID: sessionID, kind: "paymentorder.created", summary: "payment order \(recorded.id)",
                                       traceID: traceID,
                                       data: ["payeeReference": .string(payeeReference), "paymentOrder": .string(recorded.id)]))
        if recorded.setInstrumentHref != nil {
            response = Self.addMobileSDK(response, instruments: recorded.availableInstruments, payeeReference: payeeReference)
        }
        return CreatedPaymentOrder(response: response, payeeReference: payeeReference, paymentOrderID: recorded.id,
                                   viewPaymentSession: recorded.viewPaymentSession)
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
        guard let record else { throw MerchantProblem.notFound("no payment order \(reference)") }
        guard let href = record.setInstrumentHref else {
            throw MerchantProblem.badRequest("paymentorder", "the payment order is not in instrument mode")
        }
        guard swedbankPay.isAllowed(href) else { throw MerchantProblem.badGateway("the setinstrument operation points outside the upstream") }

        let (result, parsed, _) = await swedbankPay.send(SwedbankPayClient.Call(operation: "update-paymentorder-setinstrument", method: "PATCH",
                                                     url: href, body: .document(input.document), traceID: context.traceID,
                                                     version: record.apiVersion.flatMap(PaymentOrderVersion.init)))
        let response = try forward(result, parsed) { _ in nil }
        let instruments = parsed.flatMap { ($0["paymentOrder"] ?? $0["paymentorder"])?["availableInstruments"] } ?? .array([])
        return Self.addMobileSDK(response, instruments: instruments, payeeReference: reference)
    }

    /// `PATCH …/patch {"href", "paymentorder": {"operation": "SetInstrument" | "Abort", …}}`: how the
    /// SDKs change a v3 order (swedbank-pay-sdk-android mobilesdk-merchantbackend/…/internal/remote/json/
    /// BackendOperation.kt; swedbank-pay-sdk-ios SwedbankPaySDKMerchantBackend/Classes/MerchantBackendConfiguration.swift;
    /// served by the sample at examples/node.js/routes/patch.js). Only an order Kassa created may be changed.
    func patch(_ context: RequestContext) async throws -> HTTPResponse {
        var input = try input(context)
        let href = input.string("href", maxLength: 2048)
        _ = input.object("paymentorder")
        let operation = input.string("paymentorder.operation")
        if let operation, operation != "SetInstrument" && operation != "Abort" {
            input.fail("paymentorder.operation", "must be SetInstrument or Abort")
        }
        if operation == "SetInstrument" { _ = input.string("paymentorder.instrument", maxLength: 64) }
        if operation == "Abort" { _ = input.string("paymentorder.abortReason", required: false, maxLength: 200) }
        if let first = input.problems.first { throw MerchantProblem.badRequest(first.field, first.description) }
        guard let href, let url = swedbankPay.allowedURL(href) else {
            throw MerchantProblem.badRequest("href", "must be an operation href on the Swedbank Pay host")
        }
        let record: Store.PaymentOrderRecord?
        do { record = try store.paymentOrder(id: url.path) } catch {
            throw Problem.internalError("the payment order store cannot be read")
        }
        guard let record else { throw MerchantProblem.notFound("no payment order \(url.path) was created here") }
        var body = input.document.objectValue ?? [:]
        body["href"] = nil
        let (result, parsed, _) = await swedbankPay.send(SwedbankPayClient.Call(
            operation: operation == "Abort" ? "abort" : "set-instrument", method: "PATCH", url: href, body: .document(.object(body)),
            traceID: context.traceID, version: record.apiVersion.flatMap(PaymentOrderVersion.init)))
        return try forward(result, parsed) { _ in nil }
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
        let intent = PaymentURLHelper.androidIntentURL(scheme: publicScheme, host: host, path: request.path,
                                                       query: request.query, package: package)
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

    /// Both styles in one file: `appID` and `paths` for iOS 12 and earlier, `appIDs` and
    /// `components` for iOS 13 and later, the new ones on the first detail (seed 001; the sample's
    /// examples/node.js/routes/apple-app-site-association.js).
    func appleAppSiteAssociation(_ context: RequestContext) -> HTTPResponse {
        let path = "/swedbank-pay-mobile/sdk-callback/*"
        var details: [JSONValue] = configuration.appleAppIDs.map { ["appID": .string($0), "paths": [.string(path)]] }
        if case .object(var first)? = details.first {
            first["appIDs"] = .array(configuration.appleAppIDs.map { .string($0) })
            first["components"] = [["/": .string(path), "comment": "the payment url helper's universal links"]]
            details[0] = .object(first)
        }
        return .json(["applinks": ["apps": [], "details": .array(details)]])
    }

    // MARK: Helpers

    /// The scheme the app's paymentUrl was written with: the public URL's, or
    /// https (what Swedbank Pay requires of a production paymentUrl).
    var publicScheme: String { configuration.publicBaseURL.hasPrefix("http://") ? "http" : "https" }

    /// `scheme://host` of this gateway as the payer's browser reaches it: `--public-url`, else the Host header.
    func publicBase(_ request: HTTPRequest) -> String? {
        if !configuration.publicBaseURL.isEmpty {
            var base = configuration.publicBaseURL
            while base.hasSuffix("/") { base.removeLast() }
            return base
        }
        return publicHost(request).map { (configuration.edgeServesTLS ? "https://" : "http://") + $0 }
    }

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

    /// What `forward` found a success body to be.
    enum Verdict { case accepted, notJSON, refused(String) }

    /// Turns an upstream exchange into the answer for the app: success and
    /// RFC 7807 problems pass through with their status; timeouts are 504;
    /// anything unusable is 502. `check` may refuse a success body, parsed as `document`.
    func forward(_ result: Result<UpstreamResponse, UpstreamError>, _ document: JSONValue?, check: (JSONValue) -> String?) throws(Problem) -> HTTPResponse {
        try forward(result, document) { _ in
            guard let document, case .object = document else { return .notJSON }
            return check(document).map { .refused($0) } ?? .accepted
        }
    }

    /// As above, with `judge` reading a success body's bytes; `document`: a failure's body, parsed.
    func forward(_ result: Result<UpstreamResponse, UpstreamError>, _ document: JSONValue?, judge: ([UInt8]) -> Verdict) throws(Problem) -> HTTPResponse {
        switch result {
        case .failure(.timeout):
            throw MerchantProblem.gatewayTimeout()
        case .failure(let error):
            throw MerchantProblem.badGateway("Swedbank Pay could not be reached: \(error)")
        case .success(let response):
            if (200..<300).contains(response.status) {
                switch judge(response.body) {
                case .accepted:
                    return HTTPResponse(status: response.status, contentType: "application/json", body: response.body)
                case .notJSON:
                    throw MerchantProblem.badGateway("Swedbank Pay answered \(response.status) with a body that is not JSON",
                                                     gatewayStatus: response.status, body: response.body)
                case .refused(let reason):
                    throw MerchantProblem.badGateway(reason, gatewayStatus: response.status, body: response.body)
                }
            }
            if let document, let problem = Problem(forwarding: document, status: response.status) { throw problem }
            throw MerchantProblem.badGateway("Swedbank Pay answered \(response.status) without a problem document",
                                             gatewayStatus: response.status, body: response.body)
        }
    }

    /// Adds the instrument-mode `mobileSDK` member (seed 000) to a payment order answer, with the
    /// order's `instruments`. The upstream bytes are kept as they came (member order, numbers):
    /// the member is spliced in before the closing brace of the answer, a JSON object.
    static func addMobileSDK(_ response: HTTPResponse, instruments: JSONValue, payeeReference: String) -> HTTPResponse {
        guard let opening = response.body.firstIndex(of: UInt8(ascii: "{")), let close = response.body.lastIndex(of: UInt8(ascii: "}")),
              opening < close else { return response }
        let member: JSONValue = ["validInstruments": instruments,
                                 "setInstrument": .string("/swedbank-pay-mobile/paymentorders/\(payeeReference)/setInstrument")]
        let isEmpty = !response.body[(opening + 1)..<close].contains { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        var updated = response
        updated.body = Array(response.body[..<close]) + Array(((isEmpty ? "" : ",") + "\"mobileSDK\":").utf8) + member.bytes
            + Array(response.body[close...])
        return updated
    }
}
