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
        if !captured {
            // One write(2) a line, so lines from several threads never interleave.
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = Foundation.write(STDOUT_FILENO, raw.baseAddress! + offset, raw.count - offset)
                    if n <= 0 { break }
                    offset += n
                }
            }
        }
    }

    /// Everything captured so far.
    public var text: String { lines.withLock { String(decoding: $0 ?? [], as: UTF8.self) } }
}
