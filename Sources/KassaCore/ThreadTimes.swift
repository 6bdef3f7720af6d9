import Foundation

/// A thread's time on a CPU, and its time runnable but waiting for one on the kernel's run queue
/// (`/proc/self/task/<tid>/schedstat`, in ns). A push waits for
/// the event log's writer and then the edge thread: when either waits for a CPU (a busy core, or
/// a host that takes the CPU away), the push waits with it, and this is where that shows.
public struct ThreadTimes: Sendable, Equatable {
    public var onCPUNanoseconds: UInt64 = 0
    public var waitingNanoseconds: UInt64 = 0

    public init(onCPUNanoseconds: UInt64 = 0, waitingNanoseconds: UInt64 = 0) {
        (self.onCPUNanoseconds, self.waitingNanoseconds) = (onCPUNanoseconds, waitingNanoseconds)
    }

    /// What this reading of a thread adds to `last`, its previous one. A thread id the kernel gave
    /// again to a new thread reads lower: then all of it is new.
    public func added(since last: ThreadTimes) -> ThreadTimes {
        let isNew = onCPUNanoseconds < last.onCPUNanoseconds || waitingNanoseconds < last.waitingNanoseconds
        let base = isNew ? ThreadTimes() : last
        return ThreadTimes(onCPUNanoseconds: onCPUNanoseconds - base.onCPUNanoseconds,
                           waitingNanoseconds: waitingNanoseconds - base.waitingNanoseconds)
    }

    /// The group a thread counts in, from its kernel name: Kassa's named threads each under their
    /// name (`top -H` and `perf` show the same), Swift's concurrency pool as one (Dispatch's
    /// workers carry their root queue's name, cut to its last 15 bytes such as `oot.default-qos`),
    /// any other thread as `other`. The set stays small: never a label per thread id.
    public static func group(ofThreadNamed name: String) -> String {
        if name.hasPrefix("kassa-") { return name }
        if name.hasSuffix("-qos") || name.hasSuffix("qos.overcommit") { return "swift-pool" }
        return "other"
    }

    /// A `schedstat` line's first two fields: ns on a CPU, ns waiting on a run queue (the third,
    /// the count of runs, is not used). Nil for anything else.
    public static func parse(schedstat: String) -> ThreadTimes? {
        let fields = schedstat.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count >= 2, let onCPU = UInt64(fields[0]), let waiting = UInt64(fields[1]) else { return nil }
        return ThreadTimes(onCPUNanoseconds: onCPU, waitingNanoseconds: waiting)
    }

    /// The process's threads now, by thread id, each with its group. Empty where the kernel keeps
    /// no `schedstat` (not Linux, or a kernel built without it). A thread that ends while it is
    /// read is skipped.
    public static func current() -> [Int: (group: String, times: ThreadTimes)] {
        let tasks = "/proc/self/task"
        guard let ids = try? FileManager.default.contentsOfDirectory(atPath: tasks) else { return [:] }
        var threads: [Int: (group: String, times: ThreadTimes)] = [:]
        for id in ids {
            guard let tid = Int(id),
                  let name = try? String(contentsOfFile: "\(tasks)/\(id)/comm", encoding: .utf8),
                  let line = try? String(contentsOfFile: "\(tasks)/\(id)/schedstat", encoding: .utf8),
                  let times = parse(schedstat: line) else { continue }
            threads[tid] = (group(ofThreadNamed: name.trimmingCharacters(in: .newlines)), times)
        }
        return threads
    }
}
