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

/// Runs a Python 3 program (from the PATH's python3, where `make test`
/// installed its packages) and returns its exit status and combined output.
func runPython(_ arguments: [String], environment extra: [String: String] = [:]) async throws -> (status: Int32, output: String) {
    try await runCommand(["python3"] + arguments, environment: extra)
}

/// Runs a program found on PATH, feeding it `input`; its exit status and output (stdout then stderr).
func runCommand(_ arguments: [String], input: String? = nil, environment extra: [String: String] = [:]) async throws -> (status: Int32, output: String) {
    try await onThread {
        let child = try ChildProcess(arguments, environment: ProcessInfo.processInfo.environment.merging(extra) { $1 })
        if let input { child.write(input) }
        child.closeInput()
        let status = child.waitForExit(seconds: 300) ?? -1
        return (status, child.stdoutText + child.stderrText)
    }
}

/// A file under Tests/.
func testsPath(_ relative: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(relative).path
}
