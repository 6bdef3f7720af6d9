import Foundation
import KassaCore
import KassaEdge

/// The PaymentSession API as the Mobile SDKs use it. Every call answers the whole
/// PaymentOutputModel; what operations it lists depends on the session's state.
struct SimulatedSession: Sendable {
    enum Outcome: String, Sendable { case success, declined, payerCancelled }
    enum Stage: Sendable, Equatable { case awaitingPayer, scaMethod, scaChallenge, walletSheet }

    struct Attempt: Sendable {
        var method: String
        var startedMs: Int64
        var outcome: Outcome
        var stage: Stage
        var launchURL: String?
        /// The card's issuer has a 3-D Secure method URL (`sim-card-method`).
        var methodStep = false
    }

    enum End: Sendable { case completed, canceled }

    var token: String
    var paymentOrderID: String
    var prepared = false
    var expanded: Set<String> = []
    var attempt: Attempt?
    var problem: (type: String, title: String, detail: String)?
    var acknowledgedProblems = 0
    var end: End?
    var instrumentModePaymentMethod: String?
    var restrictTo: [String]?
    var attempts = 0
    /// Where the challenge page posts the cRes: create-authentication's notificationUrl.
    var notificationURL: String?
}

/// Problem types the simulator invents where the SDK sources name none.
enum SessionProblemType {
    static let base = "https://api.payex.com/psp/errordetail/paymentorders/"
    static let declined = base + "paymentattemptdeclined"
    static let payerCancelled = base + "usercancelled"
    static let clientAppLaunchFailed = base + "clientapplaunchfailed"
    static let technicalError = base + "technicalerror"
    static let operationNotAllowed = "https://api.payex.com/psp/errordetail/paymentsessions/operationnotallowed"
}

extension Simulator {
    static let sessionMethods = ["Swish", "CreditCard", "ApplePay", "GooglePay", "Vipps"]
    static let savedCards: [JSONValue] = [
        ["rank": 1, "paymentToken": "sim-card-frictionless", "cardBrand": "Visa", "maskedPan": "492500******0004", "expiryDate": "2030-12-01T00:00:00Z"],
        ["rank": 2, "paymentToken": "sim-card-challenge", "cardBrand": "MasterCard", "maskedPan": "522661******0009", "expiryDate": "2031-06-01T00:00:00Z"],
        ["rank": 3, "paymentToken": "sim-card-method", "cardBrand": "Visa", "maskedPan": "401200******0016", "expiryDate": "2032-03-01T00:00:00Z"],
    ]
    static let swishPrefills: [JSONValue] = [["rank": 1, "msisdn": "+46739000001"]]

    /// Runs `body` on the session named by the path, after settling what time has decided.
    func withSession(_ context: RequestContext, _ body: (inout SimulatedSession, SimulatedPaymentOrder, String) -> HTTPResponse?) -> HTTPResponse {
        let token = context.parameters["token"] ?? ""
        let now = Self.nowMs()
        return state.withLock { s -> HTTPResponse in
            guard let orderID = s.sessionOrders[token], let order = s.paymentOrders[orderID], var session = s.sessions[token] else {
                return SwedbankProblem.notFound("paymentsessions", "Payment session")
            }
            settle(&session, now: now)
            let base = s.baseURL
            let answer = body(&session, order, base)
            s.sessions[token] = session
            return answer ?? .json(sessionDocument(session, order: order, base: base))
        }
    }

    /// A Swish or wallet attempt ends once the simulated payer has answered.
    func settle(_ session: inout SimulatedSession, now: Int64) {
        guard let attempt = session.attempt, attempt.stage == .awaitingPayer,
              now - attempt.startedMs >= Int64(configuration.payerDelayMs) else { return }
        finish(&session, attempt.outcome)
    }

    func finish(_ session: inout SimulatedSession, _ outcome: SimulatedSession.Outcome) {
        let method = session.attempt?.method ?? ""
        session.attempt = nil
        switch outcome {
        case .success:
            session.end = .completed
        case .declined:
            session.problem = (SessionProblemType.declined, "Payment attempt declined", "The \(method) payment was declined (simulated).")
        case .payerCancelled:
            session.problem = (SessionProblemType.payerCancelled, "Payer cancelled", "The payer cancelled the \(method) payment (simulated).")
        }
    }

    static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    // MARK: Handlers

    func getSession(_ c: RequestContext) -> HTTPResponse { withSession(c) { _, _, _ in nil } }

    func preparePayment(_ c: RequestContext) -> HTTPResponse {
        withSession(c) { session, _, _ in
            session.prepared = true
            return nil
        }
    }

    func expandMethod(_ c: RequestContext) -> HTTPResponse {
        withSession(c) { session, _, _ in
            let method = c.parameters["method"] ?? ""
            guard Self.sessionMethods.contains(method), session.end == nil else { return Self.notAllowed("expand-method") }
            session.expanded.insert(method)
            return nil
        }
    }

    /// Starts an attempt; the outcome is chosen by magic inputs (README: "Simulator").
    func startAttempt(_ c: RequestContext) -> HTTPResponse {
        let body = (try? JSONValue.parse(c.request.body)) ?? .object([:])
        return withSession(c) { session, order, _ in
            let method = c.parameters["method"] ?? ""
            guard session.end == nil, session.attempt == nil, session.problem == nil, session.prepared else {
                return Self.notAllowed("start-payment-attempt")
            }
            let amount = order.order["amount"]?.intValue ?? 0
            var outcome: SimulatedSession.Outcome = amount % 1000 == 402 ? .declined : .success
            var stage = SimulatedSession.Stage.awaitingPayer
            var launchURL: String?
            var methodStep = false
            switch method {
            case "Swish":
                if let msisdn = body["msisdn"]?.stringValue {
                    guard Self.isValidMSISDN(msisdn) else {
                        return SwedbankProblem.inputError("paymentsessions", [("msisdn", "must be + and the country code and number, digits only")])
                    }
                    if msisdn.hasSuffix("0002") { outcome = .declined }
                    if msisdn.hasSuffix("0003") { outcome = .payerCancelled }
                } else {
                    // Seed 004 (Swish's merchant manual, 5.2): `swish://paymentrequest?token=…&callbackurl=…`,
                    // the token from Swish's server in a form the manual does not show; here the 32 hex
                    // digits of the session's GUID.
                    let callback = order.order["urls"]?["paymentUrl"]?.stringValue
                    launchURL = "swish://paymentrequest?token=\(session.token.filter(\.isHexDigit))"
                        + (callback.map { "&callbackurl=" + PaymentURLHelper.percentEncode($0) } ?? "")
                }
            case "CreditCard":
                guard let token = body["paymentToken"]?.stringValue else {
                    return SwedbankProblem.inputError("paymentsessions", [("paymentToken", "is required")])
                }
                switch token {
                case "sim-card-challenge": stage = .scaMethod
                case "sim-card-method": stage = .scaMethod; methodStep = true
                case "sim-card-declined": outcome = .declined
                default: break
                }
            case "ApplePay", "GooglePay":
                // The wallet sheet's payload is required before anything is decided.
                stage = .walletSheet
            default:
                return Self.notAllowed("start-payment-attempt")
            }
            session.attempts += 1
            session.attempt = .init(method: method, startedMs: Self.nowMs(), outcome: outcome, stage: stage, launchURL: launchURL,
                                    methodStep: methodStep)
            // Frictionless cards are decided at once.
            if method == "CreditCard" && stage == .awaitingPayer { finish(&session, outcome) }
            return nil
        }
    }

    /// `{"paymentMethod": "ApplePay"|"GooglePay", "paymentPayload": "<base64>"}` (swedbank-pay-sdk-ios
    /// SwedbankPayAPIEndpointRouter.swift attemptPayload; swedbank-pay-sdk-android …/request/AttemptPayload.kt).
    /// `sim-wallet-declined` (base64 or not) is declined; any other payload completes.
    func attemptPayload(_ c: RequestContext) -> HTTPResponse {
        let body = (try? JSONValue.parse(c.request.body)) ?? .object([:])
        return withSession(c) { session, _, _ in
            let method = c.parameters["method"] ?? ""
            guard let attempt = session.attempt, attempt.method == method, attempt.stage == .walletSheet else {
                return Self.notAllowed("attempt-payload")
            }
            var problems: [(String, String)] = []
            if body["paymentMethod"]?.stringValue != method { problems.append(("paymentMethod", "must be \(method)")) }
            let payload = body["paymentPayload"]?.stringValue ?? ""
            if payload.isEmpty { problems.append(("paymentPayload", "is required")) }
            guard problems.isEmpty else { return SwedbankProblem.inputError("paymentsessions", problems) }
            let declined = payload == "sim-wallet-declined" || payload == "c2ltLXdhbGxldC1kZWNsaW5lZA=="
            finish(&session, declined ? .declined : attempt.outcome)
            return nil
        }
    }

    /// `{"methodCompletionIndicator": "Y"|"N"|"U", "notificationUrl": …, "requestWindowSize", "client", "browser"}`
    /// (swedbank-pay-sdk-android mobilesdk/…/paymentsession/api/model/request/CreateAuthentication.kt).
    func createAuthentication(_ c: RequestContext) -> HTTPResponse {
        let body = (try? JSONValue.parse(c.request.body)) ?? .object([:])
        return withSession(c) { session, _, _ in
            guard session.attempt?.stage == .scaMethod else { return Self.notAllowed("create-authentication") }
            var problems: [(String, String)] = []
            let indicator = body["methodCompletionIndicator"]?.stringValue ?? ""
            if !["Y", "N", "U"].contains(indicator) { problems.append(("methodCompletionIndicator", "must be Y, N or U")) }
            let notification = body["notificationUrl"]?.stringValue ?? ""
            if !(notification.hasPrefix("https://") || notification.hasPrefix("http://")) {
                problems.append(("notificationUrl", "must be an absolute http(s) URL"))
            }
            guard problems.isEmpty else { return SwedbankProblem.inputError("paymentsessions", problems) }
            session.notificationURL = notification
            session.attempt?.stage = .scaChallenge
            return nil
        }
    }

    /// The view-payment script: a page loads it and opens the menu with
    /// `payex.hostedView.checkout({integration: "App", container: {checkout: "checkout"}, …}).open("checkout")`,
    /// as the iOS SDK's v3 host page does (swedbank-pay-sdk-ios SwedbankPaySDK/Classes/Models/
    /// SwedbankPayWebContent.swift, paymentTemplateV3). A browser loads it with `<script src>`, so
    /// without a token. The simulated menu lists the methods the menu shows.
    func paymentMenuScript(_ c: RequestContext) -> HTTPResponse {
        let token = c.parameters["token"] ?? ""
        guard let session = state.withLock({ $0.sessions[token] }) else { return SwedbankProblem.notFound("paymentsessions", "Payment session") }
        let methods = session.instrumentModePaymentMethod.map { [$0] } ?? session.restrictTo ?? Self.sessionMethods
        let list = JSONValue.array(methods.map { .string($0) })
        let script = """
            (function () {
              var methods = \(String(decoding: list.bytes, as: UTF8.self));
              window.payex = window.payex || {};
              window.payex.hostedView = {
                checkout: function (options) {
                  return {
                    open: function (container) {
                      var id = container || (options.container && options.container.checkout) || "checkout";
                      var box = document.getElementById(id);
                      var title = document.createElement("p");
                      title.id = "sim-menu";
                      title.textContent = "Simulated payment menu: " + methods.join(", ");
                      box.appendChild(title);
                    }
                  };
                }
              };
            })();
            """
        return HTTPResponse(status: 200, contentType: "application/javascript; charset=utf-8", body: Array(script.utf8))
    }

    // MARK: The simulated issuer (ACS) pages

    /// The session whose 3-D Secure values end in its token's first eight characters.
    func session(tokenPrefix: Substring) -> String? {
        state.withLock { s in s.sessions.keys.first { $0.prefix(8) == tokenPrefix } }
    }

    /// The issuer's 3-D Secure method page, loaded in a hidden frame: form `threeDSMethodData`.
    /// A real one fingerprints the browser; this one only checks that it is one of its sessions'.
    func acsMethodPage(_ c: RequestContext) -> HTTPResponse {
        let data = FormURLEncoded.value("threeDSMethodData", in: c.request.body) ?? ""
        guard data.hasPrefix("sim-"), session(tokenPrefix: data.dropFirst(4)) != nil else {
            return HTTPResponse(status: 400, contentType: "text/html; charset=utf-8", body: Array("<p>unknown threeDSMethodData</p>".utf8))
        }
        return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8",
                            body: Array("<!DOCTYPE html><html><head><title>3-D Secure method</title></head><body></body></html>".utf8))
    }

    /// The issuer's challenge page for form `creq`: Approve and Decline post `cres` to the
    /// notificationUrl create-authentication gave, as an issuer's page does (EMV 3-D Secure).
    func acsChallengePage(_ c: RequestContext) -> HTTPResponse {
        let creq = FormURLEncoded.value("creq", in: c.request.body) ?? ""
        guard creq.hasPrefix("sim-creq-"), let token = session(tokenPrefix: creq.dropFirst(9)),
              let notification = state.withLock({ $0.sessions[token]?.notificationURL }) else {
            return HTTPResponse(status: 400, contentType: "text/html; charset=utf-8", body: Array("<p>unknown creq</p>".utf8))
        }
        let action = PaymentURLHelper.htmlEscape(notification)
        let page = """
            <!DOCTYPE html>
            <html><head><meta charset="utf-8"><title>Simulated issuer: confirm the payment</title></head>
            <body>
            <h1>Confirm the payment</h1>
            <form method="POST" action="\(action)"><input type="hidden" name="cres" value="sim-cres-\(token.prefix(8))"><button id="approve">Approve</button></form>
            <form method="POST" action="\(action)"><input type="hidden" name="cres" value="sim-cres-fail"><button id="decline">Decline</button></form>
            </body></html>
            """
        return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: Array(page.utf8))
    }

    /// `{"cRes": "…"}`: the simulated ACS's answer; `sim-cres-fail` fails the challenge.
    func completeAuthentication(_ c: RequestContext) -> HTTPResponse {
        let cres = (try? JSONValue.parse(c.request.body))?["cRes"]?.stringValue
        return withSession(c) { session, _, _ in
            guard session.attempt?.stage == .scaChallenge else { return Self.notAllowed("complete-authentication") }
            guard let cres, !cres.isEmpty else { return SwedbankProblem.inputError("paymentsessions", [("cRes", "is required")]) }
            finish(&session, cres == "sim-cres-fail" ? .declined : (session.attempt?.outcome ?? .success))
            return nil
        }
    }

    func getPayment(_ c: RequestContext) -> HTTPResponse { withSession(c) { _, _, _ in nil } }

    /// `{"problemType": "UserCancelled"|"TechnicalError"|"ClientAppLaunchFailed"}` from the app.
    func failAttempt(_ c: RequestContext) -> HTTPResponse {
        let problemType = (try? JSONValue.parse(c.request.body))?["problemType"]?.stringValue ?? "TechnicalError"
        return withSession(c) { session, _, _ in
            guard let method = session.attempt?.method else { return Self.notAllowed("fail-payment-attempt") }
            session.attempt = nil
            switch problemType {
            case "ClientAppLaunchFailed":
                session.problem = (SessionProblemType.clientAppLaunchFailed, "Client app launch failed", "The \(method) app could not be started.")
            case "UserCancelled":
                session.problem = (SessionProblemType.payerCancelled, "Payer cancelled", "The payer cancelled the \(method) payment.")
            default:
                session.problem = (SessionProblemType.technicalError, "Technical error", "The \(method) attempt failed on the device.")
            }
            return nil
        }
    }

    func acknowledgeFailedAttempt(_ c: RequestContext) -> HTTPResponse {
        withSession(c) { session, _, _ in
            guard session.problem != nil else { return Self.notAllowed("acknowledge-failed-attempt") }
            session.problem = nil
            session.acknowledgedProblems += 1
            return nil
        }
    }

    func abortPayment(_ c: RequestContext) -> HTTPResponse {
        withSession(c) { session, _, _ in
            guard session.end == nil else { return Self.notAllowed("abort-payment") }
            session.attempt = nil
            session.problem = nil
            session.end = .canceled
            return nil
        }
    }

    /// `{"paymentMethod": …|null, "restrictToPaymentMethods": [..]|null}`: the payment menu.
    func customizePayment(_ c: RequestContext) -> HTTPResponse {
        let body = (try? JSONValue.parse(c.request.body)) ?? .object([:])
        return withSession(c) { session, _, _ in
            guard session.end == nil else { return Self.notAllowed("customize-payment") }
            session.instrumentModePaymentMethod = body["paymentMethod"]?.stringValue
            session.restrictTo = body["restrictToPaymentMethods"]?.arrayValue?.compactMap(\.stringValue)
            return nil
        }
    }

    /// A beacon, shaped as swedbank-pay-sdk-android posts it (mobilesdk/src/main/java/com/swedbankpay/
    /// mobilesdk/logging/model/BeaconInput.kt, EventAction.kt): 204 with no body, as BeaconService.kt
    /// expects; a malformed one gets the input error a strict API would give.
    func eventLogging(_ c: RequestContext) -> HTTPResponse {
        let token = c.parameters["token"] ?? ""
        guard state.withLock({ $0.sessions[token] != nil }) else { return SwedbankProblem.notFound("paymentsessions", "Payment session") }
        guard let body = try? JSONValue.parse(c.request.body) else {
            return SwedbankProblem.inputError("paymentsessions", [("body", "must be a JSON object")])
        }
        var problems: [(String, String)] = []
        if !["ClientEvent", "ClientSla", "RemoteSla"].contains(body["type"]?.stringValue ?? "") {
            problems.append(("type", "must be ClientEvent, ClientSla or RemoteSla"))
        }
        if body["service"]?["name"]?.stringValue == nil { problems.append(("service.name", "is required")) }
        if body["client"]?["userAgent"]?.stringValue == nil { problems.append(("client.userAgent", "is required")) }
        if body["event"]?["created"]?.stringValue == nil { problems.append(("event.created", "is required")) }
        let action = body["event"]?["action"]?.stringValue ?? ""
        if !Self.beaconActions.contains(action) { problems.append(("event.action", "is not a known action")) }
        if action == "HttpRequest", body["http"]?["requestUrl"]?.stringValue == nil { problems.append(("http.requestUrl", "is required")) }
        if action.hasPrefix("SDK"), body["method"]?["name"]?.stringValue == nil { problems.append(("method.name", "is required")) }
        guard problems.isEmpty else { return SwedbankProblem.inputError("paymentsessions", problems) }
        return HTTPResponse(status: 204)
    }

    static let beaconActions: Set<String> = ["SDKMethodInvoked", "SDKCallbackInvoked", "HttpRequest", "LaunchClientApp",
                                             "ClientAppCallback", "SCAMethodRequest", "SCARedirectResult"]

    static func notAllowed(_ operation: String) -> HTTPResponse {
        let problem: JSONValue = [
            "type": .string(SessionProblemType.operationNotAllowed), "title": "Operation not allowed", "status": 409,
            "detail": .string("\(operation) is not allowed in the session's current state"),
        ]
        return HTTPResponse(status: 409, contentType: Problem.contentType, body: problem.bytes)
    }

    /// `+`, a country code and the number: digits only, 8 to 15 of them.
    static func isValidMSISDN(_ s: String) -> Bool {
        s.hasPrefix("+") && (8...15).contains(s.count - 1) && s.dropFirst().allSatisfy { $0.isASCII && $0.isNumber }
    }

    // MARK: The PaymentOutputModel

    func sessionDocument(_ s: SimulatedSession, order p: SimulatedPaymentOrder, base: String) -> JSONValue {
        let root = "\(base)/psp/paymentsessions/\(s.token)"
        func op(_ rel: String, _ method: String, _ path: String, next: Bool? = nil, contentType: String = "application/json",
                tasks: [JSONValue] = [], expects: [JSONValue] = []) -> JSONValue {
            var o: [String: JSONValue] = ["rel": .string(rel), "method": .string(method), "href": .string(root + path),
                                          "contentType": .string(contentType)]
            if let next { o["next"] = .bool(next) }
            if !tasks.isEmpty { o["tasks"] = .array(tasks) }
            if !expects.isEmpty { o["expects"] = .array(expects) }
            return .object(o)
        }
        let urls = p.order["urls"] ?? .object([:])
        var operations: [JSONValue] = []
        var methods: [JSONValue] = []
        var problem: JSONValue = .null

        switch s.end {
        case .completed?:
            operations = [["rel": "redirect-payer", "method": "GET", "next": true,
                           "href": urls["completeUrl"] ?? .string("\(base)/complete"), "contentType": "text/html"]]
        case .canceled?:
            operations = [["rel": "redirect-payer", "method": "GET", "next": true,
                           "href": urls["cancelUrl"] ?? .string("\(base)/cancel"), "contentType": "text/html"]]
        case nil:
            operations = [op("abort-payment", "POST", "/abort"), op("customize-payment", "POST", "/customize"),
                          op("event-logging", "POST", "/events")]
            if !s.prepared { operations.insert(op("prepare-payment", "POST", "/prepare", next: true), at: 0) }
            if s.instrumentModePaymentMethod != nil || s.restrictTo != nil {
                operations.append(op("view-payment", "GET", "/menu", contentType: "application/javascript"))
            }
            if let pending = s.problem {
                problem = ["type": .string(pending.type), "title": .string(pending.title), "status": 422,
                           "detail": .string(pending.detail),
                           // One href per failed attempt: the SDKs remember acknowledged problems by href
                           // (swedbank-pay-sdk-android SessionOperationHandler.kt alreadyUsedProblemUrls).
                           "operation": op("acknowledge-failed-attempt", "POST", "/attempts/acknowledge?attempt=\(s.attempts)")]
            }
            let enabled = s.restrictTo ?? Self.sessionMethods
            for method in Self.sessionMethods where enabled.contains(method) {
                var m: [String: JSONValue] = ["paymentMethod": .string(method), "amount": p.order["amount"] ?? 0]
                var mops: [JSONValue] = []
                if let attempt = s.attempt, attempt.method == method {
                    switch attempt.stage {
                    case .awaitingPayer:
                        var tasks: [JSONValue] = []
                        if let launch = attempt.launchURL {
                            tasks.append(["rel": "launch-client-app", "method": "GET", "href": .string(launch), "contentType": "text/html"])
                        }
                        mops.append(op("get-payment", "GET", "/payment", tasks: tasks))
                        mops.append(op("fail-payment-attempt", "POST", "/methods/\(method)/fail"))
                    case .scaMethod:
                        // A card whose issuer has a method URL lists the sca-method-request task; one without
                        // gives the indicator itself (swedbank-pay-sdk-android SessionOperationHandler.kt: both cases).
                        let methodTask: JSONValue = ["rel": "sca-method-request", "method": "POST", "href": .string("\(base)/sim/acs/method"),
                                                     "contentType": "application/x-www-form-urlencoded",
                                                     "expects": [["name": "threeDSMethodData", "type": "string", "value": .string("sim-\(s.token.prefix(8))")]]]
                        var expects: [JSONValue] = [["name": "NotificationUrl", "type": "string", "value": .string("\(base)/sim/acs/notification")]]
                        if !attempt.methodStep { expects.append(["name": "methodCompletionIndicator", "type": "string", "value": "U"]) }
                        mops.append(op("create-authentication", "POST", "/authentication",
                                       tasks: attempt.methodStep ? [methodTask] : [], expects: expects))
                    case .walletSheet:
                        // What each SDK opens its wallet sheet with: Apple Pay's names from swedbank-pay-sdk-ios
                        // SwedbankPaySDK/Classes/ApplePay/SwedbankPayAuthorization.swift, Google Pay's from
                        // swedbank-pay-sdk-android …/paymentsession/googlepay/util/GooglePayConstants.kt.
                        let amount = p.order["amount"]?.intValue ?? 0
                        let total = "\(amount / 100).\(String(amount % 100).leftPadded(to: 2))"
                        let currency = p.order["currency"] ?? "SEK"
                        let expects: [JSONValue] = method == "ApplePay"
                            ? [["name": "TotalAmount", "type": "string", "value": .string(total)],
                               ["name": "TotalAmountLabel", "type": "string", "value": p.order["payeeInfo"]?["payeeName"] ?? "Shop"],
                               ["name": "CurrencyCode", "type": "string", "value": currency],
                               ["name": "Locale", "type": "string", "value": p.order["language"] ?? "sv-SE"],
                               ["name": "SupportedNetworks", "type": "string[]", "value": ["visa", "masterCard"]],
                               ["name": "MerchantCapabilities", "type": "string[]", "value": ["supports3DS"]]]
                            : [["name": "TotalPrice", "type": "string", "value": .string(total)],
                               ["name": "TotalPriceStatus", "type": "string", "value": "FINAL"],
                               ["name": "CurrencyCode", "type": "string", "value": currency],
                               ["name": "CountryCode", "type": "string", "value": "SE"],
                               ["name": "EnvironmentNative", "type": "string", "value": "TEST"],
                               ["name": "Gateway", "type": "string", "value": "payex"],
                               ["name": "GatewayMerchantId", "type": "string", "value": "sim-gateway-merchant"],
                               ["name": "AllowedCardNetworks", "type": "string[]", "value": ["VISA", "MASTERCARD"]],
                               ["name": "AllowedCardAuthMethods", "type": "string[]", "value": ["PAN_ONLY", "CRYPTOGRAM_3DS"]]]
                        // The SDKs read only the task's expects and follow attempt-payload's href; the task's
                        // href and method, and this path, are the simulator's own placeholders.
                        mops.append(op("attempt-payload", "POST", "/methods/\(method)/payload",
                                       tasks: [["rel": "wallet-sdk", "method": "GET", "href": "", "contentType": "application/json",
                                                "expects": .array(expects)]]))
                        mops.append(op("fail-payment-attempt", "POST", "/methods/\(method)/fail"))
                    case .scaChallenge:
                        mops.append(op("complete-authentication", "POST", "/authentication/complete",
                                       tasks: [["rel": "sca-redirect", "method": "POST", "href": .string("\(base)/sim/acs/challenge"),
                                                "contentType": "application/x-www-form-urlencoded",
                                                "expects": [["name": "creq", "type": "string", "value": .string("sim-creq-\(s.token.prefix(8))")]]]]))
                    }
                } else if s.attempt == nil && s.problem == nil && s.prepared {
                    mops.append(s.expanded.contains(method)
                                ? op("start-payment-attempt", "POST", "/methods/\(method)/attempts")
                                : op("expand-method", "POST", "/methods/\(method)/expand"))
                }
                m["operations"] = .array(mops)
                switch method {
                case "Swish": m["prefills"] = .array(Self.swishPrefills)
                case "CreditCard": m["prefills"] = .array(Self.savedCards); m["cardBrands"] = ["Visa", "MasterCard"]
                case "ApplePay": m["cardBrands"] = ["Visa", "MasterCard"]; m["merchantCapabilities"] = ["supports3DS"]
                case "GooglePay": m["cardBrands"] = ["VISA", "MASTERCARD"]; m["allowedCardAuthMethods"] = ["PAN_ONLY", "CRYPTOGRAM_3DS"]; m["environment"] = "TEST"
                default: break
                }
                methods.append(.object(m))
            }
        }
        let session: JSONValue = [
            "id": .string(p.path), "culture": p.order["language"] ?? "sv-SE", "currency": p.order["currency"] ?? .null,
            "description": p.order["description"] ?? .null, "payeeName": p.order["payeeInfo"]?["payeeName"] ?? .null,
            "instrumentModePaymentMethod": s.instrumentModePaymentMethod.map { .string($0) } ?? .null,
            "settings": ["enabledPaymentMethods": .array((s.restrictTo ?? Self.sessionMethods).map { .string($0) })],
            "urls": urls, "methods": .array(methods),
        ]
        return ["paymentSession": session, "operations": .array(operations), "problem": problem]
    }
}
