/// A failure the simulator can inject in place of, or on top of, a normal answer.
public enum SimulatedFault: Sendable, Equatable, CustomStringConvertible {
    /// Answer normally, `ms` milliseconds late.
    case latency(ms: Int)
    /// Answer with this status and a Swedbank Pay system-error problem.
    case status(Int)
    /// Never answer in time (the connection is held until the client gives up).
    case timeout
    /// Drop the connection without an answer.
    case reset
    /// Answer 200 with a body that is not JSON.
    case malformed
    /// Answer normally but with only the first half of the body.
    case truncated

    /// `latency=200`, `status=503`, `timeout`, `reset`, `malformed`, `truncated`.
    public init?(_ text: String) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        switch (parts.first ?? "", parts.count > 1 ? parts[1] : nil) {
        case ("latency", let v?): guard let ms = Int(v), ms >= 0 else { return nil }; self = .latency(ms: ms)
        case ("status", let v?): guard let s = Int(v), (100...599).contains(s) else { return nil }; self = .status(s)
        case ("timeout", nil): self = .timeout
        case ("reset", nil): self = .reset
        case ("malformed", nil): self = .malformed
        case ("truncated", nil): self = .truncated
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .latency(let ms): return "latency=\(ms)"
        case .status(let s): return "status=\(s)"
        case .timeout: return "timeout"
        case .reset: return "reset"
        case .malformed: return "malformed"
        case .truncated: return "truncated"
        }
    }
}

/// When to inject a fault: on a route (by name, or `*` for all), at a rate,
/// optionally only for requests whose body or query contains `magic`.
public struct FaultRule: Sendable, Equatable {
    public var route: String
    public var fault: SimulatedFault
    public var rate: Double
    public var magic: String?

    public init(route: String = "*", fault: SimulatedFault, rate: Double = 1, magic: String? = nil) {
        self.route = route
        self.fault = fault
        self.rate = rate
        self.magic = magic
    }

    /// `ROUTE:FAULT[:RATE]`, e.g. `paymentorders.create:status=503:0.5` or `*:latency=100`.
    public init?(_ text: String) {
        let parts = text.split(separator: ":").map(String.init)
        guard parts.count == 2 || parts.count == 3, let fault = SimulatedFault(parts[1]) else { return nil }
        let rate = parts.count == 3 ? Double(parts[2]) : 1
        guard let rate, (0...1).contains(rate) else { return nil }
        self.init(route: parts[0], fault: fault, rate: rate)
    }
}
