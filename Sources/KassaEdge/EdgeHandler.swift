/// What the edge asks of the application. HTTP requests are answered in a
/// Swift task; the WebSocket calls arrive on the libwebsockets service
/// thread and must return at once (hand long work to a task, then answer
/// with `EdgeServer.send`).
public protocol EdgeHandler: AnyObject, Sendable {
    /// Answers one HTTP request.
    func respond(to request: HTTPRequest) async -> HTTPResponse

    /// An answer made at once on the service thread, or nil to go on to `respond` in a task.
    /// For handlers whose answers are ready-made and take microseconds (a benchmark's canned upstream).
    func respondNow(to request: HTTPRequest) -> HTTPResponse?

    /// Decides an upgrade: `nil` accepts it, a response refuses it with that answer.
    func shouldAcceptWebSocket(_ upgrade: WebSocketUpgrade) -> HTTPResponse?

    /// A WebSocket is open; `upgrade.connectionID` names it from now on.
    func webSocketOpened(_ upgrade: WebSocketUpgrade)

    /// One complete text message, valid UTF-8, within the frame limit.
    func webSocketReceived(_ connectionID: UInt64, text: String)

    /// The WebSocket is gone; `code` is the close code seen or sent, if any.
    func webSocketClosed(_ connectionID: UInt64, code: UInt16?)

    /// A stamped frame (see `EdgeServer.send(_:json:stamp:)`) was written, `latency` after its stamp.
    /// On the service thread: record and return.
    func frameWritten(after latency: Duration)
}

extension EdgeHandler {
    public func respondNow(to request: HTTPRequest) -> HTTPResponse? { nil }
    public func frameWritten(after latency: Duration) {}
}
