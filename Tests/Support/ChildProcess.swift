import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn, its stdin/stdout/stderr on pipes.
/// (Foundation's `Process.run()` crashed here now and then while other test
/// threads were busy; this does only what the tests need.)
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    let stdin: Int32
    private let lock = NSLock()
    private var output = Data()
    private var errors = Data()
    private var exitStatus: Int32?
    private let drained = DispatchGroup()
    private var inputOpen = true

    /// Runs `arguments[0]` found on PATH.
    init(_ arguments: [String], environment: [String: String]) throws {
        var inPipe: [Int32] = [0, 0], outPipe: [Int32] = [0, 0], errPipe: [Int32] = [0, 0]
        guard pipe(&inPipe) == 0, pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw TestFailure("pipe() failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        for fd in inPipe + outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        // Nothing else of ours reaches the child: not the test servers' sockets, not other pipes.
        guard let closeFrom = Self.addCloseFrom, closeFrom(&actions, 3) == 0 else {
            throw TestFailure("posix_spawn_file_actions_addclosefrom_np is not available")
        }

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawnp(&child, arguments[0], &actions, nil, argv, envp)
        close(inPipe[0]); close(outPipe[1]); close(errPipe[1])
        guard rc == 0 else {
            close(inPipe[1]); close(outPipe[0]); close(errPipe[0])
            throw TestFailure("cannot start \(arguments[0]): \(String(cString: strerror(rc)))")
        }
        pid = child
        stdin = inPipe[1]
        drain(outPipe[0]) { [weak self] d in self?.lock.withLock { self?.output.append(d) } }
        drain(errPipe[0]) { [weak self] d in self?.lock.withLock { self?.errors.append(d) } }
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does not show.
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    deinit {
        if status == nil { kill(pid, SIGKILL); _ = waitForExit(seconds: 5) }
        closeInput()
    }

    private func drain(_ fd: Int32, _ sink: @escaping @Sendable (Data) -> Void) {
        drained.enter()
        let group = drained
        let thread = Thread {
            defer { group.leave() }
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 { sink(Data(buffer[0..<n])) } else if n < 0 && errno == EINTR { continue } else { break }
            }
            close(fd)
        }
        thread.start()
    }

    var stdoutText: String { lock.withLock { String(decoding: output, as: UTF8.self) } }
    var stderrText: String { lock.withLock { String(decoding: errors, as: UTF8.self) } }

    func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(stdin, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }

    /// Closes the child's stdin once: a second close(2) could close a descriptor reused by someone else.
    func closeInput() {
        let wasOpen = lock.withLock { () -> Bool in
            defer { inputOpen = false }
            return inputOpen
        }
        if wasOpen { close(stdin) }
    }

    /// The exit status once the child has ended (a signal counts as 128 + its number).
    var status: Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let exitStatus { return exitStatus }
        var raw: Int32 = 0
        let r = waitpid(pid, &raw, WNOHANG)
        guard r == pid else { return nil }
        let low = raw & 0x7f
        exitStatus = low == 0 ? (raw >> 8) & 0xff : 128 + low
        return exitStatus
    }

    /// Blocks until the child exits or `seconds` pass; its status, or nil.
    func waitForExit(seconds: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let status {
                // The output is whole once both pipes reached their end.
                _ = drained.wait(timeout: .now() + 2)
                return status
            }
            usleep(10_000)
        }
        return status
    }

    func signal(_ number: Int32) { kill(pid, number) }
}
