/// When to try an upstream call again: exponential backoff with jitter,
/// bounded by a deadline. Pure, so the schedule is testable.
///
/// ```swift
/// let policy = RetryPolicy()
/// policy.delayMs(beforeRetry: 1, elapsedMs: 0, jitter: 0.5)  // ≈ 150 ms
/// ```
public struct RetryPolicy: Sendable, Equatable {
    public var baseDelayMs: Int
    public var maxDelayMs: Int
    /// No retry starts after this many milliseconds since the first try.
    public var deadlineMs: Int

    public init(baseDelayMs: Int = 200, maxDelayMs: Int = 2_000, deadlineMs: Int = 20_000) {
        self.baseDelayMs = baseDelayMs
        self.maxDelayMs = maxDelayMs
        self.deadlineMs = deadlineMs
    }

    /// The pause before retry number `retry` (1-based), or nil when the
    /// deadline would pass. `jitter` in 0…1 spreads the pause over 50–100 %.
    public func delayMs(beforeRetry retry: Int, elapsedMs: Int, jitter: Double) -> Int? {
        let exponent = min(max(retry - 1, 0), 20)
        let ceiling = min(maxDelayMs, baseDelayMs << exponent)
        let delay = Int(Double(ceiling) * (0.5 + 0.5 * min(max(jitter, 0), 1)))
        return elapsedMs + delay > deadlineMs ? nil : delay
    }

    /// Whether a failure may be retried: reads always; a write only when it
    /// surely never reached the server (no connection was made).
    public static func mayRetry(idempotent: Bool, neverSent: Bool) -> Bool { idempotent || neverSent }
}
