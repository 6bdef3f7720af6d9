/// Token buckets by key (a client address, an API key): `ratePerSecond`
/// tokens refill continuously up to `burst`; a request takes one. Pure: the
/// caller passes the time. Idle buckets are forgotten so the map stays small.
public struct RateLimiter: Sendable {
    public let ratePerSecond: Double
    public let burst: Double
    private var buckets: [String: (tokens: Double, at: Double)] = [:]
    private var lastSweep = 0.0

    public init(ratePerSecond: Double, burst: Double? = nil) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst ?? max(ratePerSecond, 1)
    }

    /// nil when the request may go; otherwise the seconds until it could.
    public mutating func take(_ key: String, now: Double) -> Double? {
        if now - lastSweep > 60 { sweep(now: now) }
        var bucket = buckets[key] ?? (burst, now)
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.at) * ratePerSecond)
        bucket.at = now
        defer { buckets[key] = bucket }
        if bucket.tokens >= 1 {
            bucket.tokens -= 1
            return nil
        }
        return (1 - bucket.tokens) / ratePerSecond
    }

    /// What `take` would answer, without taking.
    public func wait(_ key: String, now: Double) -> Double? {
        guard let bucket = buckets[key] else { return nil }
        let tokens = min(burst, bucket.tokens + (now - bucket.at) * ratePerSecond)
        return tokens >= 1 ? nil : (1 - tokens) / ratePerSecond
    }

    /// Drops buckets that have refilled completely: they hold nothing a new one would not.
    mutating func sweep(now: Double) {
        lastSweep = now
        buckets = buckets.filter { _, b in b.tokens + (now - b.at) * ratePerSecond < burst }
    }

    public var trackedKeys: Int { buckets.count }
}
