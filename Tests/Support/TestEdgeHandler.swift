import Foundation
import KassaCore
@testable import KassaEdge
import Synchronization

/// A small application for testing the edge on its own: echo and timing routes,
/// and an echoing WebSocket.
final class TestEdgeHandler: EdgeHandler {
    weak var server: EdgeServer? {
        get { serverReference.withLock { $0 } }
        set { serverReference.withLock { $0 = newValue } }
    }
    private let serverReference = Mutex<EdgeServer?>(nil)
    let slowStarted: AsyncStream<Void>
    private let slowStartedContinuation: AsyncStream<Void>.Continuation
    /// `/held` answers only once the test calls `releaseHeld()`.
    private let heldRelease: AsyncStream<Void>
    private let heldReleaseContinuation: AsyncStream<Void>.Continuation
    let closes = Mutex<[UInt64: UInt16?]>([:])
    let closed: AsyncStream<UInt64>
    private let closedContinuation: AsyncStream<UInt64>.Continuation

    init() {
        (slowStarted, slowStartedContinuation) = AsyncStream.makeStream()
        (heldRelease, heldReleaseContinuation) = AsyncStream.makeStream()
        (closed, closedContinuation) = AsyncStream.makeStream()
    }

    func releaseHeld() { heldReleaseContinuation.yield() }

    /// `/now` is answered on the service thread, inside the request's own callback.
    func respondNow(to request: HTTPRequest) -> HTTPResponse? {
        request.path == "/now" ? .text("now") : nil
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        switch request.path {
        case "/fast":
            return .text("fast")
        case "/slow":
            slowStartedContinuation.yield()
            try? await Task.sleep(for: .seconds(2))
            return .text("slow")
        case "/held":
            slowStartedContinuation.yield()
            for await _ in heldRelease { break }
            return .text("held")
        case "/pause":
            try? await Task.sleep(for: .milliseconds(50))
            return .text("paused")
        case "/echo":
            return HTTPResponse(status: 200, contentType: "application/octet-stream",
                                headers: [("x-echo-method", request.method.rawValue), ("x-echo-length", "\(request.body.count)")],
                                body: request.body)
        case "/created":
            return HTTPResponse(status: 201, headers: [("location:", "/created/1"), ("x-custom", "a b")], body: Array("{}".utf8))
        case "/nothing":
            return HTTPResponse(status: 204, contentType: "text/plain")
        case "/close":
            var response = HTTPResponse.text("bye")
            response.closeConnection = true
            return response
        case "/headers":
            var object: [String: JSONValue] = [:]
            for (name, value) in request.headers { object[name] = .string(value) }
            for (name, value) in request.query { object["query." + name] = .string(value) }
            return .json(.object(object))
        default:
            return .problem(.notFound("no route for \(request.path)"))
        }
    }

    func shouldAcceptWebSocket(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        upgrade.path == "/ws" ? nil : .problem(.notFound("no WebSocket at \(upgrade.path)"))
    }

    func webSocketOpened(_ upgrade: WebSocketUpgrade) {
        server?.send(upgrade.connectionID, text: "hello \(upgrade.connectionID)")
    }

    func webSocketReceived(_ connectionID: UInt64, text: String) {
        guard let server else { return }
        if text.hasPrefix("flood:") || text.hasPrefix("flood-elsewhere:") {
            // COUNT frames of SIZE bytes, sent on this (the service) thread or from another one.
            let parts = text.split(separator: ":")
            let count = Int(parts[1]) ?? 0, size = Int(parts[2]) ?? 0
            let payload = String(repeating: "x", count: size)
            if text.hasPrefix("flood-elsewhere:") {
                Thread.detachNewThread { for _ in 0..<count { server.send(connectionID, text: payload) } }
            } else {
                for _ in 0..<count { server.send(connectionID, text: payload) }
            }
        } else if text.hasPrefix("mixed:") {
            // Frames from the service thread (answered at once) and from another thread (queued) together.
            let count = Int(text.dropFirst("mixed:".count)) ?? 0
            Thread.detachNewThread { for i in 0..<count { server.send(connectionID, text: "t\(i)") } }
            for i in 0..<count { server.send(connectionID, text: "s\(i)") }
        } else if text == "bye" {
            server.close(connectionID, code: WebSocketCloseCode.normal, reason: "bye")
        } else {
            server.send(connectionID, text: "echo:" + text)
        }
    }

    func webSocketClosed(_ connectionID: UInt64, code: UInt16?) {
        closes.withLock { $0[connectionID] = code }
        closedContinuation.yield(connectionID)
    }
}

/// Starts an edge on an ephemeral loopback port with the test handler.
func startTestEdge(_ configure: (inout EdgeConfiguration) -> Void = { _ in }) throws -> (EdgeServer, TestEdgeHandler) {
    var configuration = EdgeConfiguration(host: "127.0.0.1", port: 0, maxBodyBytes: 64 * 1024, maxFrameBytes: 16 * 1024,
                                          maxOutboundBytes: 256 * 1024, shutdownGraceSeconds: 3,
                                          customHeaderNames: ["x-custom", "idempotency-key"])
    configure(&configuration)
    let handler = TestEdgeHandler()
    let server = EdgeServer(configuration: configuration, handler: handler)
    handler.server = server
    try server.start()
    return (server, handler)
}
