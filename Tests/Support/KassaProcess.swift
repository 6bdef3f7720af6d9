import Foundation
import KassaCore

/// The `kassa` binary built beside the test bundle.
var kassaBinary: String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("kassa").path
}

/// A `kassa` child process with its output collected.
final class KassaProcess: @unchecked Sendable {
    let child: ChildProcess

    /// `ulimit` starts it under those limits (the shell's `ulimit` options, e.g. `-Sn 8192`).
    init(_ arguments: [String], environment: [String: String] = [:], ulimit: String? = nil) throws {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("KASSA_") }
        env.merge(environment) { $1 }
        let launcher = ulimit.map { ["/bin/sh", "-c", "ulimit \($0) && exec \"$@\"", "sh"] } ?? []
        child = try ChildProcess(launcher + [kassaBinary] + arguments, environment: env)
    }

    var stdout: String { child.stdoutText }
    var stderr: String { child.stderrText }

    /// Blocks until the process exits or `seconds` pass; the exit status, or nil on timeout.
    func waitForExit(seconds: Double = 20) -> Int32? { child.waitForExit(seconds: seconds) }

    /// Blocks until a stdout JSON log line with this message appears; returns it parsed.
    func waitForLog(message: String, seconds: Double = 20) -> JSONValue? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            for line in stdout.split(separator: "\n") {
                if let value = try? JSONValue.parse(String(line)), value["message"]?.stringValue == message { return value }
            }
            if child.status != nil { return nil }
            usleep(10_000)
        }
        return nil
    }

    func signal(_ number: Int32) { child.signal(number) }
}
