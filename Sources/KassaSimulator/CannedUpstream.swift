import KassaCore
import KassaEdge
import Synchronization

/// A benchmark's upstream: the simulator's answers for one frictionless card payment, rendered
/// once at start-up and replayed with each payment's ids spliced in, on the edge's service
/// thread (no task, no state, no JSON). Every attempt succeeds. The shapes, and the sources
/// they follow, are the simulator's: this only replays them, so what a benchmark measures
/// is the gateway rather than its stand-in.
///
/// Routes: create and get a payment order; get, prepare, expand and attempt a PaymentSession;
/// beacons. Anything else is a 404 in Swedbank Pay's problem shape.
public final class CannedUpstream: EdgeHandler {
    public let token: String
    private let edge = Mutex<EdgeServer?>(nil)
    private let answers = Mutex<[Answer: CannedAnswer]>([:])
    private let created = Atomic<UInt64>(0)

    enum Answer: Hashable, Sendable {
        case orderCreated, order, session, prepared, expanded, completed, beacon
    }

    /// The ids one payment's answers carry, all derived from its number, so a later request
    /// names its payment by the token or id in its path. The number is scattered first
    /// (`scatter`): Swedbank Pay's ids are random GUIDs and tokens, so consecutive payments' ids
    /// must not sort in order (an index of them would take each new one at its right edge) nor
    /// read as long runs of digits (which redaction looks at closely).
    struct PaymentIDs: Sendable {
        let orderID: String
        let orderToken: String
        let sessionToken: String
        let trackingID: String

        // The forms the simulator draws, each cited there (`SimulatedPaymentOrder`): the order id
        // and the session's token are GUIDs (seeds 000 and 002), the checkout's token 64 hex
        // digits, the tracking id 32.
        static let orderIDStem = "ca11ed00-0000-4000-a000-"
        static let orderTokenStem = "0c0a11ed" + String(repeating: "0", count: 44)
        static let sessionTokenStem = "5e5510ed-0000-4000-a000-"
        static let trackingIDStem = "7ac1d" + String(repeating: "0", count: 15)
        /// Each id ends in its payment's scattered number, in this many hex digits (48 bits).
        static let numberDigits = 12

        init(_ number: UInt64) {
            let scattered = String(Self.scatter(number), radix: 16).leftPadded(to: Self.numberDigits)
            self.init(orderID: Self.orderIDStem + scattered, orderToken: Self.orderTokenStem + scattered,
                      sessionToken: Self.sessionTokenStem + scattered, trackingID: Self.trackingIDStem + scattered)
        }

        init(orderID: String, orderToken: String, sessionToken: String, trackingID: String) {
            (self.orderID, self.orderToken, self.sessionToken, self.trackingID) = (orderID, orderToken, sessionToken, trackingID)
        }

        /// The payment a session token or payment order id names, if it is one of ours.
        static func number(sessionToken: String) -> UInt64? { number(in: sessionToken, after: sessionTokenStem) }

        static func number(orderID: String) -> UInt64? { number(in: orderID, after: orderIDStem) }

        private static func number(in id: String, after stem: String) -> UInt64? {
            guard id.utf8.count == stem.utf8.count + numberDigits, id.hasPrefix(stem) else { return nil }
            return UInt64(id.suffix(numberDigits), radix: 16).map(gather)
        }

        /// A one-to-one mixing of 48-bit numbers (two odd multipliers, each followed by a fold of
        /// the high half onto the low), so that consecutive numbers land far apart; `gather` undoes it.
        static func scatter(_ number: UInt64) -> UInt64 {
            var x = (number & mask) &* multipliers.0 & mask
            x ^= x >> 24
            x = x &* multipliers.1 & mask
            return x ^ x >> 24
        }

        static func gather(_ scattered: UInt64) -> UInt64 {
            // Folding the high half onto the low twice gives the number back (the shift is half the width).
            var x = scattered & mask
            x ^= x >> 24
            x = x &* inverses.1 & mask
            x ^= x >> 24
            return x &* inverses.0 & mask
        }

        static let mask: UInt64 = (1 << 48) - 1
        static let multipliers: (UInt64, UInt64) = (0x9E37_79B9_7F4B, 0xC2B2_AE3D_27D5)
        static let inverses = (inverse(multipliers.0), inverse(multipliers.1))

        /// The inverse of an odd number modulo 2^48, by Newton's iteration (each step doubles the
        /// bits that are right, from 3 to past 48).
        static func inverse(_ odd: UInt64) -> UInt64 {
            var y = odd
            for _ in 0..<5 { y = y &* (2 &- odd &* y) }
            return y & mask
        }

        /// Each value, longest first. (A card payment's answers print no part of one alone: the
        /// simulator's 3-D Secure values and Swish tokens, made from the session's token, are not
        /// in them.)
        var values: [String] { [orderToken, sessionToken, orderID, trackingID] }
    }

    init(token: String) { self.token = token }

    /// Starts a canned upstream on its own port; its answers are rendered before this returns.
    public static func start(host: String = "127.0.0.1", port: Int = 0, token: String = Simulator.defaultToken) async throws(EdgeStartError) -> CannedUpstream {
        let canned = CannedUpstream(token: token)
        var configuration = EdgeConfiguration(host: host, port: port, maxBodyBytes: 1 << 20, shutdownGraceSeconds: 0.5)
        // One client, a gateway, keeping many idle connections (as the simulator allows).
        configuration.maxHalfOpenPerAddress = 2_048
        configuration.maxHalfOpen = 2_048
        let edge = EdgeServer(configuration: configuration, handler: canned)
        try edge.start()
        canned.edge.withLock { $0 = edge }
        let rendered = await render(base: "http://\(host):\(edge.port)", token: token)
        canned.answers.withLock { $0 = rendered }
        return canned
    }

    public var port: Int { edge.withLock { $0?.port ?? 0 } }
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public func stop() async {
        let edge = edge.withLock { $0 }
        await edge?.stop()
    }

    /// Plays one frictionless card payment through a private simulator and keeps each answer
    /// with its ids cut out.
    static func render(base: String, token: String) async -> [Answer: CannedAnswer] {
        let simulator = Simulator(configuration: Simulator.Configuration(token: token))
        simulator.state.withLock { $0.baseURL = base }
        func call(_ method: HTTPMethod, _ path: String, _ body: String = "", contentType: String = "application/json") async -> HTTPResponse {
            let request = HTTPRequest(method: method, path: path, headers: HTTPHeaders([("authorization", "Bearer \(token)"), ("content-type", contentType)]),
                                      body: Array(body.utf8))
            return await simulator.router.respond(simulator, request, requestID: "").response
        }
        // A payment order as Kassa creates one for a card payment (see MerchantAPI's paymentOrders).
        let orderCreated = await call(.POST, "/psp/paymentorders", """
            {"paymentorder":{"operation":"Purchase","currency":"SEK","amount":1500,"vatAmount":0,"description":"Kassa benchmark",\
            "userAgent":"kassa-load","language":"sv-SE","productName":"Checkout3","urls":{"hostUrls":["https://shop.example"],\
            "completeUrl":"https://shop.example/complete","cancelUrl":"https://shop.example/cancel"},\
            "payeeInfo":{"payeeId":"bench-payee","payeeReference":"bench1","payeeName":"Kassa bench"}}}
            """, contentType: "application/json;version=3.1")
        guard let order = simulator.state.withLock({ $0.paymentOrders.values.first }) else {
            preconditionFailure("the simulator refused the canned payment order: \(orderCreated.status)")
        }
        let ids = PaymentIDs(orderID: order.id, orderToken: order.token, sessionToken: order.sessionToken, trackingID: order.trackingID).values
        let session = "/psp/paymentsessions/\(order.sessionToken)"
        let rendered: [(Answer, HTTPResponse)] = [
            (.orderCreated, orderCreated),
            (.order, await call(.GET, "/psp/paymentorders/\(order.id)")),
            (.session, await call(.GET, session)),
            (.prepared, await call(.POST, session + "/prepare", "{}")),
            (.expanded, await call(.POST, session + "/methods/CreditCard/expand", "{}")),
            (.completed, await call(.POST, session + "/methods/CreditCard/attempts", #"{"paymentToken":"sim-card-frictionless"}"#)),
            // 204 with no body, as swedbank-pay-sdk-android mobilesdk/src/main/java/com/swedbankpay/
            // mobilesdk/logging/BeaconService.kt expects (the simulator's eventLogging answers the same).
            (.beacon, HTTPResponse(status: 204)),
        ]
        return Dictionary(uniqueKeysWithValues: rendered.map { ($0.0, CannedAnswer($0.1, cutting: ids)) })
    }

    // MARK: EdgeHandler

    /// Every answer is made on the service thread.
    public func respondNow(to request: HTTPRequest) -> HTTPResponse? {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[0] == "psp" else { return Self.notFound }
        // Beacons come without a token (see Simulator.respond).
        if !(parts.last == "events" && request.method == .POST) {
            guard let header = request.headers["authorization"], header.hasPrefix("Bearer "),
                  Secrets.constantTimeEquals(String(header.dropFirst(7)), token) else { return SwedbankProblem.unauthorized() }
        }
        let answer: Answer
        let number: UInt64?
        switch (request.method, parts[1], parts.count) {
        case (.POST, "paymentorders", 2):
            answer = .orderCreated
            number = created.add(1, ordering: .relaxed).newValue
        case (.GET, "paymentorders", 3):
            answer = .order
            number = PaymentIDs.number(orderID: String(parts[2]))
        case (_, "paymentsessions", 3...):
            number = PaymentIDs.number(sessionToken: String(parts[2]))
            switch (request.method, parts[3...].joined(separator: "/")) {
            case (.GET, ""): answer = .session
            case (.POST, "prepare"): answer = .prepared
            case (.POST, "methods/CreditCard/expand"): answer = .expanded
            case (.POST, "methods/CreditCard/attempts"): answer = .completed
            case (.POST, "events"): answer = .beacon
            default: return Self.notFound
            }
        default:
            return Self.notFound
        }
        guard let number, let canned = answers.withLock({ $0[answer] }) else { return Self.notFound }
        return canned.response(for: PaymentIDs(number))
    }

    static let notFound = SwedbankProblem.notFound("paymentsessions", "The canned upstream answers one frictionless card payment only; this")

    public func respond(to request: HTTPRequest) async -> HTTPResponse { respondNow(to: request) ?? Self.notFound }
    public func shouldAcceptWebSocket(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        .problem(.notFound("the canned upstream serves no WebSockets"))
    }
    public func webSocketOpened(_ upgrade: WebSocketUpgrade) {}
    public func webSocketReceived(_ connectionID: UInt64, text: String) {}
    public func webSocketClosed(_ connectionID: UInt64, code: UInt16?) {}
}

/// One rendered answer: its status and headers, and its body as literal bytes with holes
/// where the payment's ids go.
struct CannedAnswer: Sendable {
    enum Part: Sendable, Equatable {
        case bytes([UInt8])
        /// The index into `PaymentIDs.values`.
        case id(Int)
    }

    let status: Int
    let contentType: String
    let headers: [(String, String)]
    let parts: [Part]

    /// Cuts every occurrence of `ids` (longest first, as `PaymentIDs.values` orders them) out of the body.
    init(_ response: HTTPResponse, cutting ids: [String]) {
        status = response.status
        contentType = response.contentType
        headers = response.headers
        var parts: [Part] = [.bytes(response.body)]
        for (index, id) in ids.enumerated() {
            let needle = Array(id.utf8)
            parts = parts.flatMap { part -> [Part] in
                guard case .bytes(let bytes) = part else { return [part] }
                return Self.split(bytes, on: needle, id: index)
            }
        }
        self.parts = parts.filter { $0 != .bytes([]) }
    }

    static func split(_ bytes: [UInt8], on needle: [UInt8], id: Int) -> [Part] {
        var parts: [Part] = []
        var start = 0, i = 0
        while i + needle.count <= bytes.count {
            if bytes[i] == needle[0] && bytes[i..<(i + needle.count)].elementsEqual(needle) {
                parts.append(.bytes(Array(bytes[start..<i])))
                parts.append(.id(id))
                i += needle.count
                start = i
            } else {
                i += 1
            }
        }
        parts.append(.bytes(Array(bytes[start...])))
        return parts
    }

    func response(for ids: CannedUpstream.PaymentIDs) -> HTTPResponse {
        let values = ids.values
        var body: [UInt8] = []
        body.reserveCapacity(4_096)
        for part in parts {
            switch part {
            case .bytes(let bytes): body.append(contentsOf: bytes)
            case .id(let index): body.append(contentsOf: values[index].utf8)
            }
        }
        return HTTPResponse(status: status, contentType: contentType, headers: headers, body: body)
    }
}
