import KassaCore

/// Keeps the database within its limits: events older than `maxAgeMs` go
/// (with ended sessions), then the oldest events until the live data fits
/// `maxBytes`. Run by the node every `intervalSeconds`.
public struct Retention: Sendable, Equatable {
    public var maxAgeMs: Int64
    public var maxBytes: Int64
    public var intervalSeconds: Double

    public init(maxAgeDays: Double = 30, maxBytes: Int64 = 1 << 30, intervalSeconds: Double = 60) {
        self.maxAgeMs = Int64(maxAgeDays * 86_400_000)
        self.maxBytes = maxBytes
        self.intervalSeconds = intervalSeconds
    }

    public static let endedPhases = ["completed", "canceled", "ended"]

    /// One pass; returns how many events it deleted.
    @discardableResult
    public func run(_ store: Store, nowMs: Int64) async throws -> Int {
        var deleted = try await store.deleteEvents(olderThanMs: nowMs - maxAgeMs, endedPhases: Self.endedPhases)
        var rounds = 0
        while case let used = try store.usedBytes(), used > maxBytes, rounds < 1_000 {
            // Delete about as many events as the excess holds, so the cut stays close to the limit.
            let perEvent = max(used / Int64(max(try store.eventCount(), 1)), 1)
            let n = try await store.deleteOldestEvents(Int(min(max((used - maxBytes) / perEvent + 1, 100), 50_000)))
            if n == 0 { break }
            deleted += n
            rounds += 1
        }
        if deleted > 0 {
            store.eventLog.append(LogEvent(atMs: nowMs, kind: "retention", summary: "deleted \(deleted) events",
                                           data: ["deleted": .number(Double(deleted)), "maxAgeMs": .number(Double(maxAgeMs)),
                                                  "maxBytes": .number(Double(maxBytes))]))
        }
        return deleted
    }
}
