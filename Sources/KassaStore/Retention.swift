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

    /// The phases a session ends in: the session machine's terminal phases (a test holds the two
    /// to each other). A session's row leaves the index of sessions in progress when its phase
    /// becomes one of them (`Store.unfinished`, `EventLog.apply`).
    public static let endedPhases = ["completed", "canceled", "ended"]

    /// Events deleted per transaction when trimming to size, and the pause after each: a
    /// transaction holds the write lock that every commit (so every push) waits for. In a soak,
    /// 50 000 at a time stalled pushes for 170–260 ms, 5 000 for 15–45 ms (up to 103).
    public static let trimChunk = 500
    public static let trimPause: Duration = .milliseconds(10)

    /// One pass; returns how many events it deleted.
    @discardableResult
    public func run(_ store: Store, nowMs: Int64) async throws -> Int {
        // How long each write transaction held the lock, for the pass's event: what retention cost pushes.
        let passStarted = ContinuousClock.now
        var transactions = 0
        var slowest = Duration.zero
        var slowestIndex = 0
        var firstMs: [JSONValue] = []
        func timed<T>(_ work: () async throws -> T) async rethrows -> T {
            let started = ContinuousClock.now
            defer {
                let took = started.duration(to: .now)
                if took > slowest { slowest = took; slowestIndex = transactions }
                if firstMs.count < 6 { firstMs.append(.number((took.inMilliseconds * 10).rounded() / 10)) }
                transactions += 1
            }
            return try await work()
        }
        let byAge = try await timed { try await store.deleteEvents(olderThanMs: nowMs - maxAgeMs, endedPhases: Self.endedPhases) }
        var deleted = byAge
        // Over the size limit: the oldest events go, down to 95 % of it, as many as one estimate
        // says (bytes per event from the span of ids, not a COUNT(*) scan), checked again at most
        // twice. Measuring after every transaction and going on while over once deleted three
        // times what the excess held: freed index pages lag the rows.
        trimming: for _ in 0..<3 {
            let used = try store.usedBytes()
            guard used > maxBytes else { break }
            let perEvent = max(used / max(try store.eventIDSpan(), 1), 1)
            var left = Int((used - maxBytes / 100 * 95) / perEvent) + 1
            while left > 0 {
                let n = try await timed { try await store.deleteOldestEvents(min(left, Self.trimChunk)) }
                if n == 0 { break trimming }
                deleted += n
                left -= n
                try? await Task.sleep(for: Self.trimPause)
                if Task.isCancelled { break trimming }
            }
        }
        if deleted > 0 {
            store.eventLog.append(LogEvent(atMs: nowMs, kind: "retention", summary: "deleted \(deleted) events",
                                           durationMs: passStarted.duration(to: .now).inMilliseconds,
                                           data: ["deleted": .number(Double(deleted)), "deletedByAge": .number(Double(byAge)),
                                                  "maxAgeMs": .number(Double(maxAgeMs)), "maxBytes": .number(Double(maxBytes)),
                                                  "transactions": .number(Double(transactions)), "slowestTransactionMs": .number(slowest.inMilliseconds),
                                                  "slowestTransaction": .number(Double(slowestIndex)), "firstTransactionsMs": .array(firstMs)]))
        }
        return deleted
    }
}
