import Foundation
import KassaCore
import KassaEdge
import Synchronization

/// A deterministic stand-in for the Swedbank Pay API, served by its own
/// libwebsockets edge: consumers, payment orders (create, get, set
/// instrument) and the PaymentSession resources, with fault injection.
///
/// ```swift
/// let sim = try Simulator.start(Simulator.Configuration(port: 0))
/// // sim.baseURL == "http://127.0.0.1:<port>", bearer token sim.configuration.token
/// ```
public final class Simulator: EdgeHandler {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// The bearer token callers must present.
        public var token: String
        /// Fixes ids and fault draws.
        public var seed: UInt64
        /// Faults active from the start.
        public var faults: [FaultRule]
        /// How long a `timeout` fault holds the connection.
        public var timeoutHoldSeconds: Double
        /// How long the simulated payer takes to answer a Swish or wallet attempt.
        public var payerDelayMs: Int

        public init(host: String = "127.0.0.1", port: Int = 0, token: String = Simulator.defaultToken, seed: UInt64 = 1,
                    faults: [FaultRule] = [], timeoutHoldSeconds: Double = 30, payerDelayMs: Int = 300) {
            self.payerDelayMs = payerDelayMs
            self.host = host
            self.port = port
            self.token = token
            self.seed = seed
            self.faults = faults
            self.timeoutHoldSeconds = timeoutHoldSeconds
        }
    }

    /// The token the embedded simulator accepts when none is configured.
    public static let defaultToken = "kassa-simulator-token"

    public let configuration: Configuration
    let router = Router<Simulator>(Simulator.routes)
    let state: Mutex<SimulatorState>
    private let edgeReference = Mutex<EdgeServer?>(nil)

    init(configuration: Configuration) {
        self.configuration = configuration
        state = Mutex(SimulatorState(random: SeededRandom(seed: configuration.seed), faults: configuration.faults))
    }

    /// Starts a simulator on its own port.
    public static func start(_ configuration: Configuration) throws(EdgeStartError) -> Simulator {
        let simulator = Simulator(configuration: configuration)
        var edgeConfiguration = EdgeConfiguration(host: configuration.host, port: configuration.port, maxBodyBytes: 1 << 20,
                                                  shutdownGraceSeconds: 0.5, customHeaderNames: ["traceparent"])
        // Its one client is a gateway, from one address, keeping up to 512 idle connections alive between
        // calls: the edge counts those as half-open, and its per-address default (256) closed them under load,
        // each close a "connection lost" that opened the gateway's circuit breaker.
        edgeConfiguration.maxHalfOpenPerAddress = 2_048
        edgeConfiguration.maxHalfOpen = 2_048
        let edge = EdgeServer(configuration: edgeConfiguration, handler: simulator)
        try edge.start()
        simulator.edgeReference.withLock { $0 = edge }
        simulator.state.withLock { $0.baseURL = "http://\(configuration.host):\(edge.port)" }
        return simulator
    }

    public var port: Int { edgeReference.withLock { $0?.port ?? 0 } }
    /// Where the simulator answers, e.g. `http://127.0.0.1:40123`.
    public var baseURL: String { state.withLock { $0.baseURL } }

    public func stop() async {
        let edge = edgeReference.withLock { $0 }
        await edge?.stop()
    }

    /// Replaces the active fault rules.
    public func setFaults(_ rules: [FaultRule]) { state.withLock { $0.faults = rules } }

    // MARK: EdgeHandler

    /// The bodies received on a PaymentSession route (e.g. `sessions.prepare`), oldest first:
    /// what Kassa sent, as it arrived.
    public func received(_ route: String) -> [JSONValue] {
        let bodies = state.withLock { $0.received.filter { $0.route == route }.map(\.body) }
        return bodies.map { (try? JSONValue.parse($0)) ?? .string(String(decoding: $0.prefix(200), as: UTF8.self)) }
    }

    /// The last `traceparent` header received (tests check that traces propagate).
    public var lastTraceparent: String? { state.withLock { $0.lastTraceparent } }

    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        let routeName = router.match(request.method, request.path).routeName
        if let traceparent = request.headers["traceparent"] { state.withLock { $0.lastTraceparent = traceparent } }
        let fault = state.withLock { $0.drawFault(route: routeName, request: request) }
        switch fault {
        case .latency(let ms)?:
            try? await Task.sleep(for: .milliseconds(ms))
        case .status(let status)?:
            return SwedbankProblem.systemError(status: status)
        case .timeout?:
            try? await Task.sleep(for: .seconds(configuration.timeoutHoldSeconds))
        case .reset?:
            var response = HTTPResponse(status: 500)
            response.abortConnection = true
            return response
        case .malformed?:
            return HTTPResponse(status: 200, contentType: "application/json", body: Array("<html>upstream proxy error</html>".utf8))
        case .truncated?, nil:
            break
        }
        // Beacons come without a token: the SDKs post them with none (swedbank-pay-sdk-android
        // mobilesdk/src/main/java/com/swedbankpay/mobilesdk/logging/BeaconService.kt makeLogRequest);
        // the menu script is loaded by a browser's <script src> (see paymentMenuScript).
        let open = routeName.hasPrefix("sim.") || ["root", "unmatched", "sessions.events", "sessions.menu"].contains(routeName)
        if !open && !authorized(request) {
            return SwedbankProblem.unauthorized()
        }
        if routeName.hasPrefix("sessions."), !request.body.isEmpty {
            // Kept as bytes, parsed only when a test reads them: load runs pass through here too.
            state.withLock { $0.remember(route: routeName, body: request.body) }
        }
        var response = await router.respond(self, request, requestID: "").response
        if fault == .truncated {
            response.body = Array(response.body.prefix(response.body.count / 2))
        }
        return response
    }

    func authorized(_ request: HTTPRequest) -> Bool {
        guard let header = request.headers["authorization"], header.hasPrefix("Bearer ") else { return false }
        return Secrets.constantTimeEquals(String(header.dropFirst(7)), configuration.token)
    }

    public func shouldAcceptWebSocket(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        .problem(.notFound("the simulator serves no WebSockets"))
    }
    public func webSocketOpened(_ upgrade: WebSocketUpgrade) {}
    public func webSocketReceived(_ connectionID: UInt64, text: String) {}
    public func webSocketClosed(_ connectionID: UInt64, code: UInt16?) {}
}

extension Router.Match {
    var routeName: String {
        if case .found(let route, _) = self { return route.name }
        return "unmatched"
    }
}

/// Everything the simulator remembers, behind one lock.
struct SimulatorState {
    var random: SeededRandom
    var faults: [FaultRule]
    var baseURL = ""
    var paymentOrders: [String: SimulatedPaymentOrder] = [:]
    /// Payment sessions by token, and the payment order each belongs to.
    var sessions: [String: SimulatedSession] = [:]
    var sessionOrders: [String: String] = [:]
    var consumerSessions = 0
    var lastTraceparent: String?
    /// PaymentSession request bodies by route, the latest `receivedLimit`.
    var received: [(route: String, body: [UInt8])] = []
    static let receivedLimit = 2_000

    mutating func remember(route: String, body: [UInt8]) {
        if received.count >= Self.receivedLimit { received.removeFirst(received.count / 2) }
        received.append((route, body))
    }

    /// The fault for this request: a `sim-fault:<fault>` magic value in the
    /// body or query wins, then the rules in order, each drawn at its rate.
    mutating func drawFault(route: String, request: HTTPRequest) -> SimulatedFault? {
        // Most requests carry no fault and no rules are set: say so without reading the body as text.
        let bodyMentionsFault = ByteSearch.firstIndex(of: Self.faultMarker, in: request.body) != nil
        guard bodyMentionsFault || !faults.isEmpty || !request.query.isEmpty else { return nil }
        let body = String(decoding: request.body, as: UTF8.self)
        let query = request.query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
        let source = bodyMentionsFault ? body : query
        if let range = source.range(of: "sim-fault:") {
            let tail = source[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "=" }
            if let fault = SimulatedFault(String(tail)) { return fault }
        }
        for rule in faults where rule.route == "*" || rule.route == route {
            if let magic = rule.magic, !body.contains(magic) && !query.contains(magic) { continue }
            let draw = Double(random.next() % 1_000_000) / 1_000_000
            if draw < rule.rate { return rule.fault }
        }
        return nil
    }

    static let faultMarker = Array("sim-fault:".utf8)

}
