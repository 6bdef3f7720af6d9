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
    try await onThread {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try launch(process)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// A file under Tests/.
func testsPath(_ relative: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(relative).path
}

/// Foundation's `Process.run()` is not safe to call from several threads at
/// once on Linux (it crashed here copying the environment): launches take turns.
private let processLaunchLock = NSLock()

func launch(_ process: Process) throws {
    processLaunchLock.lock()
    defer { processLaunchLock.unlock() }
    try process.run()
}
