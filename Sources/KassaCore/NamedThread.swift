import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension Thread {
    /// A thread whose kernel name is `name`, so `top -H`, `perf --tid` and `/proc/<pid>/task/*/comm`
    /// tell Kassa's threads apart: Foundation's `name` does not set it on Linux.
    public static func named(_ name: String, _ body: @escaping @Sendable () -> Void) -> Thread {
        let thread = Thread {
            Thread.setKernelName(name)
            body()
        }
        thread.name = name
        return thread
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
