import KassaCore

/// What one `kassa load` run does: a JSON file (bench/scenarios/README.md documents
/// every field). Every run is bounded, by a duration or by a count of flows per client.
public struct Scenario: Sendable {
    public enum Flow: String, Sendable, CaseIterable {
        /// Swish with an MSISDN: Fetched, attempt, Complete.
        case swish
        /// Card with a 3-D Secure challenge: Fetched, attempt, Show3DSecure, 3ds, Dismiss3DSecure, Complete.
        case card3ds
        /// A frictionless card: Fetched, attempt, Complete (the shortest full payment).
        case card
        /// Fetched, abort, Canceled.
        case abort
        /// Fetched, drop the stream, attempt over HTTP, reconnect with `since`: the missed
        /// Show3DSecure is replayed exactly once, then 3ds and Complete.
        case reconnect
        /// Fetched, then hold the subscription (optionally pinging) until `idle.holdSeconds` or the run's end.
        case idle
        /// Fetched, then `ping.count` ping frames, `ping.window` outstanding at a time: the stream's
        /// own request/answer round trip, the push workload compared with other servers.
        case ping
    }

    public var name: String
    /// Closed loop: the virtual clients. Open loop: the most flows in flight at once.
    public var clients: Int
    /// Open loop: flows start on a fixed schedule at this rate, whatever the answers' pace;
    /// nil: closed loop (each client starts its next flow when the last one ends).
    public var arrivalsPerSecond: Double?
    public var rampUpSeconds: Double
    public var durationSeconds: Double?
    public var iterations: Int?
    public var thinkTimeMs: ClosedRange<Int>
    public var stepThinkMs: ClosedRange<Int>
    public var stepTimeoutSeconds: Double
    public var flows: [(flow: Flow, weight: Int)]
    public var subscribersPerSession: Int
    public var idleHoldSeconds: Double
    public var idlePingSeconds: Double
    public var pingCount: Int
    public var pingWindow: Int
    public var threads: Int
    public var sourceAddresses: [String]
    public var amount: Int

    /// Open files the run can need at once: each virtual client's subscribers, its HTTP
    /// connection and, briefly, a replacement socket on reconnect; a quarter more and a few
    /// hundred for the runtime. The load client's contexts are sized by it (`WebSocketClient(descriptors:)`).
    public var openFilesWanted: Int {
        let sockets = clients * (subscribersPerSession + 2)
        return max(1_024, sockets + sockets / 4 + 256)
    }

    public static let maxClients = 50_000
    public static let maxDurationSeconds = 3_600.0
    public static let maxIterations = 1_000_000
    public static let arrivalsPerSecondRange = 0.1...100_000.0

    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    public init(json text: String) throws(Invalid) {
        let doc: JSONValue
        do { doc = try JSONValue.parse(text) } catch { throw Invalid(description: "the scenario is not JSON: \(error)") }
        guard case .object(let o) = doc else { throw Invalid(description: "the scenario is a JSON object") }
        let known: Set<String> = ["name", "description", "clients", "rampUpSeconds", "durationSeconds", "iterations", "thinkTimeMs",
                                  "stepThinkMs", "stepTimeoutSeconds", "flows", "subscribersPerSession", "idle", "ping", "threads",
                                  "sourceAddresses", "amount", "arrivalsPerSecond"]
        if let unknown = o.keys.sorted().first(where: { !known.contains($0) }) {
            throw Invalid(description: "unknown scenario field \(unknown)")
        }
        func number(_ key: String, in object: [String: JSONValue] = o, default value: Double, _ range: ClosedRange<Double>) throws(Invalid) -> Double {
            guard let raw = object[key] else { return value }
            guard let v = raw.doubleValue, range.contains(v) else { throw Invalid(description: "\(key) must be a number in \(range)") }
            return v
        }
        func span(_ key: String) throws(Invalid) -> ClosedRange<Int> {
            guard let raw = o[key] else { return 0...0 }
            if let v = raw.intValue, v >= 0 { return v...v }
            guard let lo = raw["min"]?.intValue, let hi = raw["max"]?.intValue, 0 <= lo, lo <= hi, hi <= 600_000 else {
                throw Invalid(description: "\(key) is a number of ms or {\"min\": ms, \"max\": ms}")
            }
            return lo...hi
        }
        name = o["name"]?.stringValue ?? "unnamed"
        clients = Int(try number("clients", default: 1, 1...Double(Self.maxClients)))
        rampUpSeconds = try number("rampUpSeconds", default: 0, 0...Self.maxDurationSeconds)
        durationSeconds = o["durationSeconds"] == nil ? nil : try number("durationSeconds", default: 0, 0.1...Self.maxDurationSeconds)
        iterations = o["iterations"] == nil ? nil : Int(try number("iterations", default: 0, 1...Double(Self.maxIterations)))
        guard durationSeconds != nil || iterations != nil else {
            throw Invalid(description: "a scenario is bounded: give durationSeconds, iterations (flows per client), or both")
        }
        arrivalsPerSecond = o["arrivalsPerSecond"] == nil ? nil : try number("arrivalsPerSecond", default: 0, Self.arrivalsPerSecondRange)
        if arrivalsPerSecond != nil {
            guard durationSeconds != nil, iterations == nil else {
                throw Invalid(description: "an open-loop scenario (arrivalsPerSecond) is bounded by durationSeconds alone")
            }
        }
        thinkTimeMs = try span("thinkTimeMs")
        stepThinkMs = try span("stepThinkMs")
        stepTimeoutSeconds = try number("stepTimeoutSeconds", default: 15, 0.1...600)
        guard case .object(let mix)? = o["flows"], !mix.isEmpty else {
            throw Invalid(description: "flows is an object of flow name to weight, e.g. {\"swish\": 3, \"card3ds\": 1}")
        }
        flows = []
        for (key, weight) in mix.sorted(by: { $0.key < $1.key }) {
            guard let flow = Flow(rawValue: key) else {
                throw Invalid(description: "unknown flow \(key); flows are \(Flow.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            guard let w = weight.intValue, w >= 0 else { throw Invalid(description: "the weight of \(key) is a whole number ≥ 0") }
            if w > 0 { flows.append((flow, w)) }
        }
        guard !flows.isEmpty else { throw Invalid(description: "at least one flow needs a weight above 0") }
        subscribersPerSession = Int(try number("subscribersPerSession", default: 1, 1...16))
        let idle = o["idle"]?.objectValue ?? [:]
        idleHoldSeconds = try number("holdSeconds", in: idle, default: 0, 0...Self.maxDurationSeconds)
        idlePingSeconds = try number("pingIntervalSeconds", in: idle, default: 0, 0...3_600)
        let ping = o["ping"]?.objectValue ?? [:]
        pingCount = Int(try number("count", in: ping, default: 100, 1...1_000_000))
        pingWindow = Int(try number("window", in: ping, default: 1, 1...1_000))
        threads = Int(try number("threads", default: 1, 1...64))
        sourceAddresses = o["sourceAddresses"]?.arrayValue?.compactMap(\.stringValue) ?? []
        amount = Int(try number("amount", default: 1500, 1...1_000_000_000))
        if amount % 1000 == 402 { throw Invalid(description: "amounts ending in 402 are declined by the simulator; pick another") }
    }

    /// Picks a flow by weight from a uniform draw in 0..<1.
    func flow(at draw: Double) -> Flow {
        let total = flows.reduce(0) { $0 + $1.weight }
        var point = draw * Double(total)
        for (flow, weight) in flows {
            point -= Double(weight)
            if point < 0 { return flow }
        }
        return flows[flows.count - 1].flow
    }
}
