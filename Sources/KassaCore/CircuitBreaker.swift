/// A circuit breaker for one upstream host: after `failureThreshold`
/// failures in a row it opens and calls fail at once for `openSeconds`; then
/// one trial call (half-open) decides whether it closes or opens again.
/// Calls that were under way together and fail within `burstSeconds` of one another count as
/// one failure: one event (an upstream or its balancer dropping every connection at once) fails
/// all of them, and that is one piece of evidence, not several. A call started after the last
/// counted failure always counts (a caller that tried again once it knew).
/// Pure: the caller passes the time.
public struct CircuitBreaker: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case closed
        case open(until: Double)
        case halfOpen
    }

    public var failureThreshold: Int
    public var openSeconds: Double
    public var burstSeconds: Double
    public private(set) var state: State = .closed
    public private(set) var consecutiveFailures = 0
    /// When the last failure that counted was recorded.
    private var lastCountedFailure: Double?

    public init(failureThreshold: Int = 5, openSeconds: Double = 10, burstSeconds: Double = 0.1) {
        self.failureThreshold = failureThreshold
        self.openSeconds = openSeconds
        self.burstSeconds = burstSeconds
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

    /// Records the outcome of a call started at `startedAt` (now, unless given); returns the new
    /// state when it changed. A neutral outcome counts for nothing, but a half-open breaker whose
    /// trial ended so lets the next call try.
    @discardableResult
    public mutating func record(_ outcome: Outcome, startedAt: Double? = nil, now: Double) -> State? {
        switch outcome {
        case .success: return record(success: true, startedAt: startedAt, now: now)
        case .failure: return record(success: false, startedAt: startedAt, now: now)
        case .neutral:
            if state == .halfOpen { state = .open(until: now) }
            return nil
        }
    }

    /// `record(_:startedAt:now:)` for a success or a failure.
    @discardableResult
    public mutating func record(success: Bool, startedAt: Double? = nil, now: Double) -> State? {
        let before = state
        if success {
            consecutiveFailures = 0
            lastCountedFailure = nil
            state = .closed
        } else {
            switch state {
            case .halfOpen:
                state = .open(until: now + openSeconds)
            case .open:
                break   // a call under way when it opened: nothing the opening did not know
            case .closed:
                guard counts(failureStartedAt: startedAt ?? now, now: now) else { break }
                consecutiveFailures += 1
                lastCountedFailure = now
                if consecutiveFailures >= failureThreshold { state = .open(until: now + openSeconds) }
            }
        }
        return state == before ? nil : state
    }

    /// Whether a failure is news: its call began after the last counted failure, or it came
    /// `burstSeconds` or more from it (either way: a wall clock set back counts as later).
    private func counts(failureStartedAt startedAt: Double, now: Double) -> Bool {
        guard let last = lastCountedFailure else { return true }
        return startedAt >= last || abs(now - last) >= burstSeconds
    }
}
