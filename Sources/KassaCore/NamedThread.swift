import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How the kernel schedules one of Kassa's threads.
public enum ThreadScheduling: Sendable {
    /// The default policy (`SCHED_OTHER`): the thread's wake-ups may preempt the thread running.
    case normal
    /// `SCHED_BATCH`: the thread's wake-ups do not preempt the thread running; it runs when that
    /// one's turn ends or it waits. For a thread whose work the Swift pool hands it and takes back
    /// (upstream I/O, the event log's writer, the checkpointer): preempting a pool thread in the
    /// middle of a job to take the next piece of that work only adds context switches. With the
    /// gateway on one core these threads preempted the pool ≈ 3.5 times a card payment.
    case batch
}

extension Thread {
    /// A thread whose kernel name is `name`, so `top -H`, `perf --tid` and `/proc/<pid>/task/*/comm`
    /// tell Kassa's threads apart: Foundation's `name` does not set it on Linux.
    public static func named(_ name: String, scheduling: ThreadScheduling = .normal,
                             _ body: @escaping @Sendable () -> Void) -> Thread {
        let thread = Thread {
            Thread.setKernelName(name)
            if scheduling == .batch { Thread.setBatchScheduling() }
            body()
        }
        thread.name = name
        return thread
    }

    /// Linux's `SCHED_BATCH` (glibc declares it for GNU sources only, which Swift's Glibc module is not).
    static let schedBatch: Int32 = 3

    /// Puts the calling thread under `SCHED_BATCH` (any process may; on Linux a pid of 0 names the
    /// calling thread). Best effort: a kernel that refuses leaves the default policy.
    static func setBatchScheduling() {
        #if canImport(Glibc)
        var parameters = sched_param(sched_priority: 0)
        _ = sched_setscheduler(0, schedBatch, &parameters)
        #endif
    }

    /// Names the calling thread for the kernel (at most 15 bytes are kept). Written through
    /// `/proc/thread-self/comm`: Swift's Glibc module does not declare `pthread_setname_np`.
    public static func setKernelName(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}

/// One long-lived named thread that runs jobs in order: for blocking work that should not hold
/// a Swift pool thread and should not land on a different Dispatch thread each time (glibc gives
/// each new thread's allocations an arena of their own, and a SQLite connection used from many
/// threads scatters its page cache over them: the resident memory then creeps up).
public final class SerialThread: Sendable {
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let wake = DispatchSemaphore(value: 0)

    public init(name: String) {
        // The thread holds the object, so it lives as long as the process: make it once (a static).
        Thread.named(name) { [self] in
            while true {
                wake.wait()
                let job = jobs.withLock { $0.removeFirst() }
                job()
            }
        }.start()
    }

    public func async(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.append(job) }
        wake.signal()
    }
}
