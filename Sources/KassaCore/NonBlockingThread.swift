import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A thread that must never block, such as the edge's service thread, which serves every
/// connection: it marks itself, and blocking entry points (the store) call `checkMayBlock`.
/// In debug builds a blocking call on a marked thread is counted and reported on standard
/// error, so the tests can prove it never happens; release builds check nothing.
public final class NonBlockingThread: Sendable {
    /// Blocking calls made on the marked thread (debug builds only).
    public let violations = Atomic<Int>(0)
    public let name: String

    public init(name: String) { self.name = name }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Marks the calling thread as this one. The object must outlive the thread's work.
    public func markCurrentThread() {
        pthread_setspecific(Self.slot, Unmanaged.passUnretained(self).toOpaque())
    }

    /// The marked thread the caller runs on, if any.
    public static var current: NonBlockingThread? {
        pthread_getspecific(slot).map { Unmanaged<NonBlockingThread>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Call at the top of anything that may block (disk, locks held across I/O).
    @inline(__always)
    public static func checkMayBlock(_ what: StaticString = #function) {
        #if DEBUG
        guard let thread = current else { return }
        thread.violations.add(1, ordering: .relaxed)
        let line = Array("kassa: blocking call \(what) on the non-blocking thread \(thread.name)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        #endif
    }
}
