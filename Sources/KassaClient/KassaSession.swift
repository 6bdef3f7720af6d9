import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import KassaProtocol
import Logging
import NIOWebSocket
import Synchronization
import WSClient

/// What the merchant's backend hands the app after `POST /v1/sessions`: never its API key.
public struct SessionHandle: Codable, Sendable, Equatable {
    public var id: String
    public var clientToken: String
    /// `/v1/sessions/{id}/stream`, relative to the gateway's base URL.
    public var streamUrl: String

    public init(id: String, clientToken: String, streamUrl: String) {
        self.id = id
        self.clientToken = clientToken
        self.streamUrl = streamUrl
    }
}

public enum KassaClientError: Error, Sendable, Equatable {
    /// The gateway refused the session for good: an expired or wrong token (401), an unknown session (404).
    case refused(StreamProblem)
    /// The session refused a command (the state does not take it, a bad instrument, …); nothing changed.
    case commandRefused(StreamProblem)
    /// The connection dropped before the answer came: the command may or may not have been taken.
    /// The stream tells what happened (it resumes by itself).
    case outcomeUnknown
    /// `close()` was called, or the session already ended.
    case closed
}

/// One payment session's stream: events as an `AsyncSequence`, in order and without gaps across
/// reconnects (it resumes from the last `seq` by itself, with backoff), commands as `async` calls
/// that return their answer. It ends after a terminal event.
///
/// ```swift
/// let session = KassaSession(baseURL: "https://pay.example", handle: handle)
/// for try await event in session.events {
///     if case .paymentSessionFetched = event.event { _ = try await session.send(.attempt(.swish())) }
/// }
/// ```
public final class KassaSession: Sendable {
    public struct Options: Sendable {
        public var initialBackoff: Duration = .milliseconds(250)
        public var maxBackoff: Duration = .seconds(10)
        public var maxFrameBytes = 1 << 20
        public var logger = Logger(label: "kassa.client")

        public init() {}
    }

    public let baseURL: String
    public let handle: SessionHandle
    public let options: Options
    /// Events in seq order; finishes after a terminal event, or throws `KassaClientError.refused`.
    public let events: AsyncThrowingStream<StreamEvent, any Error>

    private let output: AsyncThrowingStream<StreamEvent, any Error>.Continuation
    private let state: Mutex<State>

    private struct State {
        var lastSeq: Int64
        var writer: WebSocketOutboundWriter?
        var pending: [String: CheckedContinuation<CommandAnswer, any Error>] = [:]
        var waitingForWriter: [CheckedContinuation<WebSocketOutboundWriter, any Error>] = []
        var nextCommand = 0
        var stopped = false
        var started = false
        var connections = 0
        /// The problem frame a refused stream sends before its 4401/4404 close.
        var refusal: StreamProblem?
    }

    /// `baseURL`: the gateway, `https://pay.example` (or `http://` for development); `since`: the
    /// last seq this client has already handled, to resume a session.
    public init(baseURL: String, handle: SessionHandle, since: Int64 = 0, options: Options = Options()) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.handle = handle
        self.options = options
        (events, output) = AsyncThrowingStream.makeStream()
        state = Mutex(State(lastSeq: since))
    }

    /// The seq of the last event delivered.
    public var lastSeq: Int64 { state.withLock { $0.lastSeq } }
    /// How many times the stream has opened (1 + reconnects).
    public var connections: Int { state.withLock { $0.connections } }

    /// Opens the stream and keeps it open until the session ends or `close()`; call once.
    public func start() {
        let first = state.withLock { s in
            defer { s.started = true }
            return !s.started
        }
        guard first else { return }
        Task { await self.run() }
    }

    /// Sends a command once the stream is open and returns its answer; throws
    /// `commandRefused` with the problem when the session refused it.
    @discardableResult
    public func send(_ command: ClientCommand) async throws -> CommandAnswer {
        start()
        let writer = try await openWriter()
        let id = state.withLock { s in
            s.nextCommand += 1
            return "k\(s.nextCommand)"
        }
        let frame = command.frame(id: id).text
        let answer = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CommandAnswer, any Error>) in
            state.withLock { $0.pending[id] = continuation }
            Task {
                do { try await writer.write(.text(frame)) } catch { self.resolve(id, .failure(KassaClientError.outcomeUnknown)) }
            }
        }
        if !answer.ok { throw KassaClientError.commandRefused(answer.problem ?? StreamProblem(.null)) }
        return answer
    }

    /// Closes the stream for good; the event sequence finishes.
    public func close() {
        stop(with: nil)
    }

    // MARK: The connection loop

    private func run() async {
        var backoff = options.initialBackoff
        while !state.withLock({ $0.stopped }) {
            let before = connections
            var close: WebSocketCloseFrame?
            do {
                close = try await WebSocketClient.connect(url: streamURL(), configuration: configuration(), logger: options.logger) { inbound, outbound, _ in
                    self.opened(outbound)
                    for try await message in inbound.messages(maxSize: self.options.maxFrameBytes) {
                        guard case .text(let text) = message else { continue }
                        if self.received(text) { try await outbound.close(.normalClosure, reason: nil) }
                    }
                }
            } catch {
                options.logger.debug("stream failed: \(error)")
            }
            dropped()
            if state.withLock({ $0.stopped }) { break }
            // 4401/4404: the session refused the stream with a problem frame first; nothing to retry.
            if case .unknown(let code)? = close?.closeCode, code == 4401 || code == 4404 {
                stop(with: KassaClientError.refused(state.withLock { $0.refusal } ?? StreamProblem(["type": "about:blank", "status": .number(Double(code))])))
                break
            }
            // A refused upgrade shows only as a failure here: the session read says why.
            if connections == before, let problem = await refusal() {
                stop(with: KassaClientError.refused(problem))
                break
            }
            backoff = connections > before ? options.initialBackoff : min(backoff * 2, options.maxBackoff)
            let jitter = Double.random(in: 0.5...1.0)
            try? await Task.sleep(for: backoff * jitter)
        }
    }

    private func streamURL() -> String {
        let scheme = baseURL.hasPrefix("https://") ? "wss://" : "ws://"
        let host = baseURL.split(separator: "://", maxSplits: 1).last.map(String.init) ?? baseURL
        return scheme + host + handle.streamUrl + "?since=\(lastSeq)"
    }

    private func configuration() -> WebSocketClientConfiguration {
        var headers = HTTPFields()
        headers[.authorization] = "Bearer \(handle.clientToken)"
        headers[HTTPField.Name("Sec-WebSocket-Protocol")!] = "kassa.v1"
        return WebSocketClientConfiguration(maxFrameSize: options.maxFrameBytes, additionalHeaders: headers)
    }

    private func opened(_ writer: WebSocketOutboundWriter) {
        let waiting = state.withLock { s in
            s.connections += 1
            s.writer = writer
            defer { s.waitingForWriter = [] }
            return s.waitingForWriter
        }
        for continuation in waiting { continuation.resume(returning: writer) }
    }

    /// Handles one frame; true when the session has ended and the stream should close.
    private func received(_ text: String) -> Bool {
        guard let json = try? JSONValue.parse(text) else { return false }
        if let event = StreamEvent(json: json) {
            let fresh = state.withLock { s in
                guard event.seq > s.lastSeq else { return false }
                s.lastSeq = event.seq
                return true
            }
            guard fresh else { return false }
            output.yield(event)
            if event.isTerminal {
                stop(with: nil)
                return true
            }
        } else if let answer = CommandAnswer(json: json) {
            if let id = answer.re {
                resolve(id, .success(answer))
            } else if let problem = answer.problem {
                state.withLock { $0.refusal = problem }
            }
        }
        return false
    }

    private func resolve(_ id: String, _ result: Result<CommandAnswer, any Error>) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.resume(with: result)
    }

    /// The connection is gone: commands without an answer have an unknown outcome.
    private func dropped() {
        let pending = state.withLock { s in
            s.writer = nil
            defer { s.pending = [:] }
            return Array(s.pending.values)
        }
        for continuation in pending { continuation.resume(throwing: KassaClientError.outcomeUnknown) }
    }

    private func openWriter() async throws -> WebSocketOutboundWriter {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<WebSocketOutboundWriter, any Error>? = state.withLock { s in
                if s.stopped { return .failure(KassaClientError.closed) }
                if let writer = s.writer { return .success(writer) }
                s.waitingForWriter.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    private func stop(with error: (any Error)?) {
        let (waiting, pending) = state.withLock { s in
            s.stopped = true
            defer { s.waitingForWriter = []; s.pending = [:] }
            return (s.waitingForWriter, Array(s.pending.values))
        }
        for continuation in waiting { continuation.resume(throwing: KassaClientError.closed) }
        for continuation in pending { continuation.resume(throwing: KassaClientError.outcomeUnknown) }
        output.finish(throwing: error)
    }

    /// Reads the session over HTTP after a failed upgrade: a 401 or 404 problem means stop.
    private func refusal() async -> StreamProblem? {
        guard let url = URL(string: baseURL + "/v1/sessions/" + handle.id) else { return nil }
        var request = URLRequest(url: url, timeoutInterval: 10)
        request.setValue("Bearer \(handle.clientToken)", forHTTPHeaderField: "Authorization")
        guard let (body, response) = try? await URLSession.shared.data(for: request),
              let status = (response as? HTTPURLResponse)?.statusCode, status == 401 || status == 404 else { return nil }
        return StreamProblem((try? JSONValue.parse(Array(body))) ?? ["type": "about:blank", "status": .number(Double(status))])
    }
}
