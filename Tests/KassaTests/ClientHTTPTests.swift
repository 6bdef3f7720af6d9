import Foundation
import KassaCore
@testable import KassaEdge
import Testing

/// The WebSocket client's plain HTTP requests (the load client's creates and attempts), against
/// the real libwebsockets edge.
@Suite("Edge: the client's HTTP requests")
struct ClientHTTPTests {
    func get(_ client: WebSocketClient, _ server: EdgeServer, _ path: String = "/fast") async throws -> HTTPClientResponse {
        try await client.request("GET", port: server.port, path: path)
    }

    func opened(_ client: WebSocketClient) -> Int { client.httpConnectionsOpened.load(ordering: .relaxed) }

    @Test("a body sent and read back whole, statuses as sent, and one kept connection for requests in turn")
    func keptConnection() async throws {
        let (server, _) = try startTestEdge()
        let client = try WebSocketClient()
        defer { client.shutdown(); Task { await server.stop() } }
        // Larger than one read, so the answer comes in pieces.
        let body = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let echo = try await client.request("POST", port: server.port, path: "/echo", headers: [("Content-Type", "application/octet-stream")], body: body)
        #expect(echo.status == 200)
        #expect(echo.body == body)
        #expect(try await get(client, server, "/nowhere").status == 404)
        for _ in 0..<5 {
            #expect(try await get(client, server).status == 200)
        }
        #expect(opened(client) == 1)
    }

    @Test("an answer that closes the connection is read, and the next request opens a new one")
    func closedByTheServer() async throws {
        let (server, _) = try startTestEdge()
        let client = try WebSocketClient()
        defer { client.shutdown(); Task { await server.stop() } }
        #expect(try await get(client, server).status == 200)
        let bye = try await get(client, server, "/close")
        #expect(bye.status == 200)
        #expect(String(decoding: bye.body, as: UTF8.self) == "bye")
        #expect(opened(client) == 1)
        #expect(try await get(client, server).status == 200)
        #expect(opened(client) == 2)
    }

    @Test("a kept connection the server closed while idle is not used again: the request is answered")
    func idleClosed() async throws {
        let (server, _) = try startTestEdge { $0.requestTimeoutSeconds = 1 }
        let client = try WebSocketClient()
        defer { client.shutdown(); Task { await server.stop() } }
        #expect(try await get(client, server).status == 200)
        // Past the server's keep-alive: it has closed the connection.
        try await Task.sleep(for: .milliseconds(2_500))
        #expect(try await get(client, server).status == 200)
        #expect(opened(client) == 2)
    }

    @Test("no answer within the timeout fails as a timeout; a refused connection fails as an error")
    func failures() async throws {
        let (server, handler) = try startTestEdge()
        let client = try WebSocketClient()
        defer { client.shutdown(); Task { await server.stop() } }
        // On a kept connection: the timeout ends the request there, not on a second connection.
        #expect(try await get(client, server).status == 200)
        let started = ContinuousClock.now
        do {
            _ = try await client.request("GET", port: server.port, path: "/held", timeout: .seconds(1))
            Issue.record("an answer that was held back")
        } catch {
            #expect(error.timedOut)
        }
        let waited = started.duration(to: .now)
        #expect(waited >= .milliseconds(900) && waited < .seconds(5), "waited \(waited)")
        #expect(opened(client) == 1)
        handler.releaseHeld()
        // A port nothing listens on: the one the edge had, once it has stopped.
        let (stopped, _) = try startTestEdge()
        let port = stopped.port
        await stopped.stop()
        do {
            _ = try await client.request("GET", port: port, path: "/fast", timeout: .seconds(5))
            Issue.record("an answer from a port nothing listens on")
        } catch {
            #expect(!error.timedOut)
        }
    }

    @Test("answers are read by their length, to the close without one, and refused when they cannot be read")
    func reader() {
        func read(_ text: String, atClose: Bool = false) -> HTTPResponseReader.Outcome {
            HTTPResponseReader.read(Array(text.utf8), atClose: atClose)
        }
        func complete(_ status: Int, _ body: String, keepAlive: Bool) -> HTTPResponseReader.Outcome {
            .complete(HTTPClientResponse(status: status, body: Array(body.utf8)), keepAlive: keepAlive)
        }
        #expect(read("HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n{}") == complete(201, "{}", keepAlive: true))
        #expect(read("HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\n{}") == .incomplete)
        #expect(read("HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\n{}", atClose: true)
                == .malformed("the connection closed inside the answer's body"))
        #expect(read("HTTP/1.1 200 OK\r\nContent-Le") == .incomplete)
        #expect(read("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx") == complete(200, "x", keepAlive: false))
        #expect(read("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx") == complete(200, "x", keepAlive: false))
        #expect(read("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx") == complete(200, "x", keepAlive: true))
        #expect(read("HTTP/1.1 204 No Content\r\n\r\n") == complete(204, "", keepAlive: true))
        #expect(read("HTTP/1.1 200 OK\r\n\r\nto the end") == .incomplete)
        #expect(read("HTTP/1.1 200 OK\r\n\r\nto the end", atClose: true) == complete(200, "to the end", keepAlive: false))
        #expect(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n") == .malformed("a chunked answer (not read here)"))
        #expect(read("HTTP/1.1 200 OK\r\nContent-Length: 1 \r\n\r\nx") == complete(200, "x", keepAlive: true))
        #expect(read("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n") == .malformed("a Content-Length that is not a length"))
        #expect(read("HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx") == .malformed("a Content-Length that is not a length"))
        #expect(read("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n") == .malformed("a Content-Length that is not a length"))
        #expect(read("SSH-2.0-OpenSSH\r\n\r\n") == .malformed("not an HTTP/1 status line"))
        #expect(read("HTTP/1.1 2x0 OK\r\n\r\n") == .malformed("not an HTTP/1 status line"))
        // Found by the fuzzer: a status under 100 (or past 599) is no HTTP status.
        #expect(read("HTTP/1.1 021 OK\r\nContent-Length: 0\r\n\r\n") == .malformed("not an HTTP/1 status line"))
        #expect(read("HTTP/1.1 600 OK\r\nContent-Length: 0\r\n\r\n") == .malformed("not an HTTP/1 status line"))
        #expect(read("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy") == .malformed("bytes after the answer"))
    }
}
