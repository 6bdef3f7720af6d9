/// A circuit breaker for one upstream host: after `failureThreshold`
/// failures in a row it opens and calls fail at once for `openSeconds`; then
/// one trial call (half-open) decides whether it closes or opens again.
/// Pure: the caller passes the time.
public struct CircuitBreaker: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case closed
        case open(until: Double)
        case halfOpen
    }

    public var failureThreshold: Int
    public var openSeconds: Double
    public private(set) var state: State = .closed
    public private(set) var consecutiveFailures = 0

    public init(failureThreshold: Int = 5, openSeconds: Double = 10) {
        self.failureThreshold = failureThreshold
        self.openSeconds = openSeconds
    }

    public var isOpen: Bool { if case .open = state { return true } else { return false } }

    /// Whether a call may go out now. An open breaker past its time lets one trial through.
    public mutating func allow(now: Double) -> Bool {
        switch state {
        case .closed: return true
        case .halfOpen: return false
        case .open(let until):
            guard now >= until else { return false }
            state = .halfOpen
            return true
        }
    }

    /// What a call said about the upstream.
    public enum Outcome: Sendable { case success, failure, neutral }

    /// Records a call's outcome; returns the new state when it changed. A neutral outcome
    /// counts for nothing, but a half-open breaker whose trial ended so lets the next call try.
    @discardableResult
    public mutating func record(_ outcome: Outcome, now: Double) -> State? {
        switch outcome {
        case .success: return record(success: true, now: now)
        case .failure: return record(success: false, now: now)
        case .neutral:
            if state == .halfOpen { state = .open(until: now) }
            return nil
        }
    }

    /// Records a call's outcome; returns the new state when it changed.
    @discardableResult
    public mutating func record(success: Bool, now: Double) -> State? {
        let before = state
        if success {
            consecutiveFailures = 0
            state = .closed
        } else {
            consecutiveFailures += 1
            if state == .halfOpen || consecutiveFailures >= failureThreshold {
                state = .open(until: now + openSeconds)
            }
        }
        return state == before ? nil : state
    }
}
