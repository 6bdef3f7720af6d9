import Foundation
import Synchronization

/// Wall-clock time in milliseconds since 1970. The gateway takes one at start, so the rules
/// that depend on the date (token expiry, eviction, event times) can be tested on a fake clock.
public protocol WallClock: Sendable {
    func nowMs() -> Int64
    /// The same in microseconds (a live push's stamp).
    func nowUs() -> Int64
}

extension WallClock {
    public func nowUs() -> Int64 { nowMs() * 1000 }
}

/// The system's clock.
public struct SystemClock: WallClock {
    public init() {}
    public func nowMs() -> Int64 { nowUs() / 1000 }
    public func nowUs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
    }
}

/// A clock that moves only when told to: for tests.
public final class ManualClock: WallClock {
    private let now: Mutex<Int64>

    public init(nowMs: Int64) { now = Mutex(nowMs) }
    public func nowMs() -> Int64 { now.withLock { $0 } }
    public func advance(byMs ms: Int64) { now.withLock { $0 += ms } }
}
