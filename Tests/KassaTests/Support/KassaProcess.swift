import Foundation
import KassaCore

/// The `kassa` binary built beside the test bundle.
var kassaBinary: String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("kassa").path
}

/// A `kassa` child process with its output collected.
final class KassaProcess: @unchecked Sendable {
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private let lock = NSLock()
    private var stdoutData = Data()
    private var stderrData = Data()

    init(_ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: kassaBinary)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("KASSA_") }
        env.merge(environment) { $1 }
        process.environment = env
        process.standardOutput = output
        process.standardError = errors
        try launch(process)
        // Plain read(2) on threads of their own: Foundation's readability handlers
        // stop the process on EINTR (a SIGCHLD arriving mid-read).
        drain(output.fileHandleForReading.fileDescriptor) { [weak self] d in self?.lock.withLock { self?.stdoutData.append(d) } }
        drain(errors.fileHandleForReading.fileDescriptor) { [weak self] d in self?.lock.withLock { self?.stderrData.append(d) } }
    }

    private func drain(_ fd: Int32, _ sink: @escaping @Sendable (Data) -> Void) {
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 { sink(Data(buffer[0..<n])) } else if n < 0 && errno == EINTR { continue } else { break }
            }
        }
        thread.start()
    }

    var stdout: String { lock.withLock { String(decoding: stdoutData, as: UTF8.self) } }
    var stderr: String { lock.withLock { String(decoding: stderrData, as: UTF8.self) } }

    /// Blocks until the process exits or `seconds` pass; the exit status, or nil on timeout.
    func waitForExit(seconds: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { return nil }
        // Let the pipes drain.
        usleep(50_000)
        return process.terminationStatus
    }

    /// Blocks until a stdout JSON log line with this message appears; returns it parsed.
    func waitForLog(message: String, seconds: Double = 20) -> JSONValue? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            for line in stdout.split(separator: "\n") {
                if let value = try? JSONValue.parse(String(line)), value["message"]?.stringValue == message { return value }
            }
            if !process.isRunning { return nil }
            usleep(10_000)
        }
        return nil
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    deinit {
        if process.isRunning { process.terminate() }
    }
}
