import Foundation
import KassaCore
import Logging
import Synchronization

/// A swift-log handler that writes one JSON object per line:
/// `{"at":"…","level":"info","message":"…","label":"kassa","session_id":"…",…}`.
/// Metadata passes through `Redaction` first, so a secret put in metadata
/// by mistake is still not written.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    let label: String
    let sink: LogSink

    public init(label: String, level: Logger.Level = .info, sink: LogSink = .standardOutput) {
        self.label = label
        self.logLevel = level
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: Logging.LogEvent) {
        write(level: event.level, message: event.message, metadata: event.metadata, error: event.error)
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?,
                    source: String, file: String, function: String, line: UInt) {
        write(level: level, message: message, metadata: explicit, error: nil)
    }

    func write(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, error: (any Error)?) {
        var object: [String: JSONValue] = [:]
        for (key, value) in metadata.merging(explicit ?? [:], uniquingKeysWith: { $1 }) {
            object[key] = Self.json(value)
        }
        object = Redaction.redact(.object(object)).objectValue ?? [:]
        object["at"] = .string(Self.timestamp())
        object["level"] = .string(level.rawValue)
        object["message"] = .string(Redaction.redactText(message.description))
        object["label"] = .string(label)
        if let error { object["error"] = .string(Redaction.redactText("\(error)")) }
        var bytes = JSONValue.object(object).bytes
        bytes.append(0x0A)
        sink.write(bytes)
    }

    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let s): return .string(s)
        case .stringConvertible(let c): return .string(c.description)
        case .array(let a): return .array(a.map(json))
        case .dictionary(let d): return .object(d.mapValues(json))
        }
    }

    static func timestamp() -> String {
        Timestamp.iso8601(ms: SystemClock().nowMs())
    }
}

/// Where log lines go: standard output, or memory (for tests that read the logs).
///
/// Standard output is written by a thread of its own, 10 ms after a first line waits or sooner
/// once 64 KiB wait, one write(2) for all the lines waiting: whoever logs (a session on the Swift pool, the edge's
/// thread) only appends to a buffer, and is never held up by a pipe or a log collector that reads
/// slowly. Lines stay whole and in order. Past 8 MiB waiting, new lines are dropped and counted,
/// and a warning says how many once output moves again. What waits is written at exit (`atexit`);
/// a crash loses at most the last 10 ms.
public final class LogSink: Sendable {
    private let lines = Mutex<[UInt8]?>(nil)

    public static let standardOutput = LogSink(capturing: false)

    public init(capturing: Bool) {
        if capturing { lines.withLock { $0 = [] } }
    }

    func write(_ bytes: [UInt8]) {
        let captured = lines.withLock { buffer -> Bool in
            guard buffer != nil else { return false }
            buffer!.append(contentsOf: bytes)
            return true
        }
        if !captured { Self.queue(bytes) }
    }

    /// Everything captured so far.
    public var text: String { lines.withLock { String(decoding: $0 ?? [], as: UTF8.self) } }

    // MARK: Standard output, one per process

    private static let waiting = Mutex<(bytes: [UInt8], dropped: Int, writerStarted: Bool)>(([], 0, false))
    /// Held while lines are taken and written, so two flushes (the thread's, exit's) keep their order.
    private static let writing = Mutex<Void>(())
    private static let wake = DispatchSemaphore(value: 0)
    static let wakeAtBytes = 64 << 10
    static let maxWaitingBytes = 8 << 20
    static let interval = 0.010

    private static func queue(_ bytes: [UInt8]) {
        let (start, signal) = waiting.withLock { w -> (Bool, Bool) in
            let before = w.bytes.count
            if before + bytes.count > maxWaitingBytes { w.dropped += 1 } else { w.bytes.append(contentsOf: bytes) }
            defer { w.writerStarted = true }
            // The first line wakes the writer; so does passing 64 KiB, to cut its gathering short.
            return (!w.writerStarted, before == 0 || (before < wakeAtBytes && w.bytes.count >= wakeAtBytes))
        }
        if start {
            atexit { LogSink.flush() }
            Thread.named("kassa-log") {
                while true {
                    wake.wait()
                    // Gathers what follows for 10 ms (less once 64 KiB wait): one write(2) for all of it.
                    _ = wake.wait(timeout: .now() + interval)
                    flush()
                }
            }.start()
        }
        if signal { wake.signal() }
    }

    /// Writes what waits, now, on the caller's thread.
    static func flush() {
        writing.withLock { _ in
            let (bytes, dropped) = waiting.withLock { w -> ([UInt8], Int) in
                defer { (w.bytes, w.dropped) = ([], 0) }
                return (w.bytes, w.dropped)
            }
            writeOut(bytes)
            if dropped > 0 {
                let warning: JSONValue = ["at": .string(JSONLogHandler.timestamp()), "level": "warning", "label": "kassa",
                                          "message": .string("\(dropped) log lines dropped: standard output did not keep up")]
                writeOut(warning.bytes + [0x0A])
            }
        }
    }

    private static func writeOut(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Foundation.write(STDOUT_FILENO, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                offset += n
            }
        }
    }
}
