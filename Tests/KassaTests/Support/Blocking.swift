import Foundation

/// Runs blocking work (raw sockets, child processes) on a thread of its own,
/// so it never occupies one of the few threads Swift concurrency shares.
func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do { continuation.resume(returning: try work()) } catch { continuation.resume(throwing: error) }
        }
        thread.start()
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A fresh directory under the system temp dir, removed by `cleanup()`.
struct TempDirectory {
    let path: String

    init() {
        path = NSTemporaryDirectory() + "kassa-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func cleanup() { try? FileManager.default.removeItem(atPath: path) }
}
