/// One entry of the event log: what support reads to explain a payment.
/// Values are already redacted when an event is built (see `Redaction`).
public struct LogEvent: Sendable, Equatable {
    public enum Level: String, Sendable, CaseIterable {
        case debug, info, warning, error
    }

    /// Row id, assigned by the store.
    public var id: Int64?
    /// Milliseconds since 1970.
    public var atMs: Int64
    public var sessionID: String?
    /// Position in the session's push stream; only pushed events have one.
    public var seq: Int64?
    /// `http.request`, `ws.open`, `upstream.response`, `state.transition`, …
    public var kind: String
    public var level: Level
    public var summary: String
    public var durationMs: Double?
    public var status: Int?
    public var traceID: String?
    /// Redacted details as a JSON object.
    public var data: JSONValue?

    public init(id: Int64? = nil, atMs: Int64, sessionID: String? = nil, seq: Int64? = nil, kind: String,
                level: Level = .info, summary: String, durationMs: Double? = nil, status: Int? = nil,
                traceID: String? = nil, data: JSONValue? = nil) {
        self.id = id
        self.atMs = atMs
        self.sessionID = sessionID
        self.seq = seq
        self.kind = kind
        self.level = level
        self.summary = summary
        self.durationMs = durationMs
        self.status = status
        self.traceID = traceID
        self.data = data
    }
}
