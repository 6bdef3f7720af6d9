import Foundation
import KassaCore
import KassaEdge
import KassaStore
import Tracing

/// The Sessions API (`/v1/sessions`): create a PaymentSession, read it, and
/// send it commands over HTTP — the same commands the WebSocket takes.
extension Gateway {
    static func unauthorized(_ detail: String) -> ProblemError { unauthorized(.unauthorized(detail)) }

    static func unauthorized(_ problem: Problem) -> ProblemError {
        ProblemError(problem, headers: [("www-authenticate", "Bearer")])
    }

    static func clientToken(_ headers: HTTPHeaders, query: [(name: String, value: String)]) -> String? {
        if let authorization = headers["authorization"], authorization.hasPrefix("Bearer ") {
            return String(authorization.dropFirst(7))
        }
        return query.first { $0.name == "token" }?.value
    }

    // MARK: Create

    func createSession(_ context: RequestContext) async throws -> HTTPResponse {
        let keyScope = "create:" + Hashing.sha256Hex(context.request.headers[MerchantAPI.apiKeyHeader] ?? "")
        return try await idempotent(scope: keyScope, context, replaying: { [self] stored in
            // The stored answer has no client token: a replay gets a new one for the same session.
            guard var answer = (try? JSONValue.parse(stored.body))?.objectValue, let id = answer["id"]?.stringValue,
                  let token = sessions.reissuedToken(sessionID: id) else {
                throw Problem.serviceUnavailable("the session of this Idempotency-Key cannot be read back; try again")
            }
            answer["clientToken"] = .string(token)
            return HTTPResponse(status: stored.status, contentType: stored.contentType, headers: stored.headers, body: JSONValue.object(answer).bytes)
        }) { [self] in try await self.createSessionNow(context) }
    }

    private func createSessionNow(_ context: RequestContext) async throws -> HTTPResponse {
        let (source, device) = try sessionRequest(context)
        let id = sessions.newID()
        let upstream: (href: String, payeeReference: String?, paymentOrderID: String?)
        switch source {
        case .href(let given):
            upstream = (given, nil, nil)
        case .order(let document, let version):
            let created = try await merchant.createPaymentOrder(document, traceID: context.traceID, sessionID: id, version: version,
                                                                addingHostURL: merchant.publicBase(context.request))
            upstream = try sessionUpstream(created)
        }
        let actor: SessionActor, token: String
        do {
            (actor, token) = try await sessions.create(id: id, href: upstream.href, payeeReference: upstream.payeeReference,
                                                       paymentOrderID: upstream.paymentOrderID, device: device,
                                                       publicBase: merchant.publicBase(context.request), traceID: context.traceID,
                                                       root: ServiceContext.current ?? .topLevel)
        } catch {
            throw Problem.serviceUnavailable("the session cannot be stored: \(Store.reason(error))")
        }
        Exchange.current?.sessionID = id
        // The session starts on its first use (stream, command or read), on whichever node of a
        // cluster its id routes to: that node picks it up with the token if it did not create it.
        return .json(["id": .string(id), "clientToken": .string(token), "streamUrl": .string("/v1/sessions/\(id)/stream"),
                      "state": .string(await actor.phase.rawValue)], status: 201)
    }

    // The steps around the awaits are plain functions, as in `SwedbankPayClient.send`.

    /// Where a new session's PaymentSession comes from: an href the merchant has, or an order to
    /// create (its `{"paymentorder": …}` document, as the Merchant API takes it).
    private enum SessionSource {
        case href(String)
        case order([UInt8], version: PaymentOrderVersion?)
    }

    /// A create request read and checked: where its PaymentSession comes from, and the client's device.
    @inline(never)
    private func sessionRequest(_ context: RequestContext) throws -> (SessionSource, ClientDevice?) {
        if configuration.maxSessions > 0, sessions.count >= configuration.maxSessions {
            throw ProblemError(.kassa("capacity", "Service Unavailable", 503,
                                      detail: "this node holds its maximum of \(configuration.maxSessions) sessions; try again later or another node"),
                               headers: [("retry-after", "5")])
        }
        if let failure = store.eventLog.lastWriteError {
            // A payment nobody could explain later is worse than one not started.
            throw ProblemError(.serviceUnavailable("the event log cannot be written (\(failure)); no new sessions until it can"),
                               headers: [("retry-after", "5")])
        }
        // Read from the bytes: the order goes on as the client wrote it (`OrderToCreate`), with no tree.
        var client: JSONValue?, view: JSONValue?, order: (kind: JSONValue, document: [UInt8], productName: JSONValue?)?
        let isObject: Bool
        do {
            isObject = try JSONReader.read(context.request.body) { r throws(JSONParseError) -> Bool in
                try r.object { r, name throws(JSONParseError) in
                    switch name {
                    case "client": client = try r.value()
                    case "viewPaymentSession": view = try r.value()
                    case "paymentOrder":
                        var productName: JSONValue?
                        let (isOrder, raw) = try r.spanning { r throws(JSONParseError) in
                            try r.object { r, name throws(JSONParseError) in if name == "productName" { productName = try r.value() } }
                        }
                        order = (OrderToCreate.kind(isObject: isOrder, raw),
                                 Array(#"{"paymentorder":"#.utf8) + raw + [UInt8(ascii: "}")], productName)
                    default: break
                    }
                }
            }
        } catch {
            throw Problem.badRequest("the body is not valid JSON: \(error)", parameter: "body")
        }
        guard isObject else { throw Problem.badRequest("the body must be a JSON object", parameter: "body") }
        var device: ClientDevice?
        if let client, client != .null {
            device = try ClientDevice.parse(client).get()
        }
        var input = JSONInput(.null)   // its checks only: the values come from the reader
        if let given = input.string(view, field: "viewPaymentSession", required: false, maxLength: 2048) {
            guard swedbankPay.isAllowed(given) else {
                throw Problem.badRequest("viewPaymentSession must be an http(s) URL on an allowed upstream host", parameter: "viewPaymentSession")
            }
            return (.href(given), device)
        }
        guard let order, input.object(order.kind, field: "paymentOrder", required: false) != nil else {
            if let first = input.problems.first { throw Problem.badRequest("\(first.field) \(first.description)", parameter: first.field) }
            throw Problem.badRequest("send viewPaymentSession (a view-paymentsession href) or paymentOrder", parameter: "body")
        }
        // A PaymentSession needs a v3 order: ask for 3.1 unless the order names Checkout3 itself
        // (which makes it 3.0; 3.1 has no productName). See PaymentOrderVersion. The payment menu's
        // host page (/menu/) is served from here: its origin goes into hostUrls (createSessionNow).
        let version: PaymentOrderVersion? = PaymentOrderVersion.isCheckout3(order.productName?.stringValue) ? nil : .v3_1
        return (.order(order.document, version: version), device)
    }

    /// The created order's view-paymentsession, checked, with the order's references.
    @inline(never)
    private func sessionUpstream(_ created: MerchantAPI.CreatedPaymentOrder) throws -> (href: String, payeeReference: String?, paymentOrderID: String?) {
        guard let view = created.viewPaymentSession else {
            throw Problem.kassa("payment-order-not-v3", "Payment Order Is Not v3", 422,
                                detail: "Swedbank Pay created a v2 payment order (view-paymentorder, no view-paymentsession); "
                                    + "a PaymentSession needs a v3 order: send productName Checkout3, or leave it out and Kassa asks for version 3.1",
                                extensions: ["paymentOrder": .string(created.paymentOrderID),
                                             "payeeReference": .string(created.payeeReference)])
        }
        guard swedbankPay.isAllowed(view) else {
            throw MerchantProblem.badGateway("the payment order's view-paymentsession points outside the allowed upstream hosts")
        }
        return (view, created.payeeReference, created.paymentOrderID)
    }

    // MARK: The issuer's 3-D Secure notification

    /// The issuer's challenge page posts `cres` here (form-urlencoded, as EMV 3-D Secure does; a
    /// `cres` query is taken too): the session goes on as if the client had sent the `3ds` command,
    /// so a web client only shows the challenge in a frame. The page it answers is what that frame shows.
    func threeDSNotification(_ context: RequestContext) async throws -> HTTPResponse {
        let id = context.parameters["id"] ?? ""
        guard PaymentURLHelper.isSafeID(id),
              sessions.tokenKeys.isValidTag(context.parameters["tag"] ?? "", for: SessionService.notificationPurpose + id),
              let actor = sessions.session(id) else { throw Problem.notFound("no 3-D Secure notification URL like this") }
        Exchange.current?.sessionID = id
        let cres = FormURLEncoded.value("cres", in: context.request.body) ?? context.request.queryValue("cres") ?? ""
        guard !cres.isEmpty else { throw Problem.badRequest("cres is required (the issuer's form field)", parameter: "cres") }
        if let problem = await actor.command(.threeDSecureResult(cres: cres), source: "issuer") { throw problem }
        return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8",
                            headers: [("cache-control", "no-store"), ("referrer-policy", "no-referrer"),
                                      ("content-security-policy", "default-src 'none'")],
                            body: Array(Self.notificationPage.utf8))
    }

    static let notificationPage = """
        <!DOCTYPE html>
        <html><head><meta charset="utf-8"><title>Verified</title></head>
        <body><p>Verified. The payment continues.</p></body></html>
        """

    // MARK: The payment menu's host page

    /// `GET /menu/?url=<ShowPaymentMenu's url>`: a page that loads Swedbank Pay's view-payment
    /// script and opens the menu in it. Its origin must be in the order's `hostUrls` (Kassa adds
    /// its own when it creates the order). The url must be on an allowed upstream host; the CSP
    /// lets in scripts, frames and connections from that origin only.
    func paymentMenuPage(_ context: RequestContext) throws -> HTTPResponse {
        guard let url = context.request.queryValue("url"), url.utf8.count <= 2048, swedbankPay.isAllowed(url),
              let origin = Self.origin(of: url) else {
            throw Problem.badRequest("url must be the view-payment url of a ShowPaymentMenu event", parameter: "url")
        }
        let page = """
            <!DOCTYPE html>
            <html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Payment</title></head>
            <body><div id="checkout"></div>
            <script src="\(PaymentURLHelper.htmlEscape(url))"></script>
            <script src="/menu/menu.js"></script>
            </body></html>
            """
        let policy = "default-src 'none'; script-src 'self' \(origin); frame-src \(origin); connect-src \(origin); "
            + "img-src 'self' data: \(origin); style-src 'self' 'unsafe-inline' \(origin); font-src \(origin); base-uri 'none'; form-action \(origin)"
        return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8",
                            headers: [("content-security-policy", policy), ("cache-control", "no-store"), ("referrer-policy", "no-referrer")],
                            body: Array(page.utf8))
    }

    /// `scheme://host[:port]` of an http(s) URL, when it is nothing but that (it goes into a CSP).
    static func origin(of url: String) -> String? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http", !authority.isEmpty,
              authority.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-:[]".contains($0)) }) else { return nil }
        return scheme + "://" + authority
    }

    // MARK: Read and command

    /// The session named in the path, if the request carries its client token.
    func authorizedSession(_ context: RequestContext) throws -> SessionActor {
        let id = context.parameters["id"] ?? ""
        if PaymentURLHelper.isSafeID(id) { Exchange.current?.sessionID = id }
        let token = Self.clientToken(context.request.headers, query: context.request.query)
        guard let actor = sessions.session(id) ?? sessions.adopt(id, token: token, since: 0) else { throw Problem.notFound("no session \(id)") }
        if let refusal = sessions.tokenRefusal(token, actor) { throw Self.unauthorized(refusal) }
        return actor
    }

    func getSession(_ context: RequestContext) async throws -> HTTPResponse {
        .json(await (try authorizedSession(context)).snapshot())
    }

    func sessionCommand(_ context: RequestContext, type: CommandType) async throws -> HTTPResponse {
        let actor = try authorizedSession(context)
        return try await idempotent(scope: "session:\(actor.id):\(type.rawValue)", context) {
            let body = context.request.body.isEmpty ? JSONValue.object([:]) : ((try? JSONValue.parse(context.request.body)) ?? .null)
            guard case .object = body else { throw Problem.badRequest("the body must be a JSON object", parameter: "body") }
            let command = try PaymentSessionMachine.Command.parse(type.rawValue, body).get()
            if let problem = await actor.command(command, source: "http") { throw problem }
            return .json(["ok": true, "session": await actor.snapshot()], status: 202)
        }
    }

    // MARK: Idempotency-Key

    /// A JSON answer's body as an idempotency key keeps it.
    static func redactedBody(_ response: HTTPResponse) -> [UInt8] {
        guard Routing.isJSON(response.contentType), let body = try? JSONValue.parse(response.body) else { return [] }
        return Redaction.redactedBytes(body)
    }

    /// Runs `work` once per Idempotency-Key and scope; a repeat gets the first answer. The answer
    /// is stored redacted (`Redaction`: no secret, no personal data, no client token);
    /// `replaying` puts back what a replay needs.
    func idempotent(scope: String, _ context: RequestContext,
                    replaying: (HTTPResponse) async throws -> HTTPResponse = { $0 },
                    _ work: () async throws -> HTTPResponse) async throws -> HTTPResponse {
        guard let given = context.request.headers["idempotency-key"] else { return try await work() }
        guard !given.isEmpty, given.utf8.count <= 200, given.utf8.allSatisfy({ $0 >= 0x21 && $0 < 0x7F }) else {
            throw Problem.badRequest("Idempotency-Key must be 1 to 200 visible ASCII characters", parameter: "Idempotency-Key")
        }
        // Kept as a digest: a merchant may build keys from an order's or a payer's data.
        let key = Hashing.sha256Hex(given)
        // The key is bound to its request, as Stripe's API binds it: method, path and body.
        let request = context.request
        let fingerprint = Hashing.sha256Hex(request.method.rawValue + "\n" + request.path + "\n" + String(decoding: request.body, as: UTF8.self))
        if let stored = try? store.idempotentAnswer(scope: scope, key: key) {
            if let first = stored.requestSHA256, !Secrets.constantTimeEquals(first, fingerprint) {
                throw Problem.kassa("idempotency-key-reused", "Idempotency Key Reused", 422,
                                    detail: "this Idempotency-Key was used for another request (method, path or body differ); use a new key")
            }
            return try await replaying(HTTPResponse(status: stored.status, contentType: stored.contentType,
                                                    headers: [("idempotent-replayed", "true")], body: stored.body))
        }
        let claimed = idempotencyInFlight.withLock { $0.insert(scope + "\u{0}" + key).inserted }
        guard claimed else {
            throw Problem.kassa("idempotency-conflict", "Conflict", 409, detail: "a request with this Idempotency-Key is still running")
        }
        defer { _ = idempotencyInFlight.withLock { $0.remove(scope + "\u{0}" + key) } }
        let response: HTTPResponse
        var thrown: (any Error)?
        do { response = try await work() } catch {
            response = HTTPResponse.problem(for: error)
            thrown = error
        }
        // Only what took effect is the key's answer: a refusal (4xx) or failure (5xx) leaves the
        // key free, so the corrected request can use it.
        if response.status < 400 {
            try? await store.rememberAnswer(scope: scope, key: key,
                                            Store.StoredAnswer(status: response.status, contentType: response.contentType,
                                                               body: Self.redactedBody(response), requestSHA256: fingerprint),
                                            atMs: clock.nowMs())
        }
        if let thrown { throw thrown }
        return response
    }
}

