import Foundation
import KassaCore
@testable import KassaEdge
import KassaUpstream
import Synchronization
import Testing

@Suite("Edge: HTTP")
struct EdgeHTTPTests {
    let client = UpstreamClient()

    func url(_ server: EdgeServer, _ path: String) -> String { "http://127.0.0.1:\(server.port)\(path)" }

    @Test("a handler that has not answered yet does not hold up a parallel request")
    func slowHandlerDoesNotStallOthers() async throws {
        let (server, handler) = try startTestEdge()
        defer { Task { await server.stop() } }
        let heldDone = Atomic<Bool>(false)
        let held = Task {
            let response = try await client.send(UpstreamRequest(url: url(server, "/held")))
            heldDone.store(true, ordering: .sequentiallyConsistent)
            return response
        }
        // Wait until the held handler is running, then ask for the fast route. The held one
        // answers only when released below, so the order proves it without a timing bound.
        var started = handler.slowStarted.makeAsyncIterator()
        _ = await started.next()
        let fast = try await client.send(UpstreamRequest(url: url(server, "/fast")))
        #expect(fast.status == 200)
        #expect(fast.text == "fast")
        #expect(heldDone.load(ordering: .sequentiallyConsistent) == false, "the fast answer must come while the held one is pending")
        handler.releaseHeld()
        let heldResponse = try await held.value
        #expect(heldResponse.text == "held")
    }

    @Test("a body that begins as its own request line is told apart from any body Kassa reads")
    func bodyLikeARequestLine() {
        func check(_ method: HTTPMethod, _ text: String) -> Bool {
            var bytes = Array(text.utf8)
            return bytes.withUnsafeMutableBytes { EdgeServer.startsWithMethod(method, $0.baseAddress!, $0.count) }
        }
        // What libwebsockets hands a pipelined request as its body: the start of its own head.
        #expect(check(.POST, "POST /v1/sessions HTTP/1.1"))
        #expect(check(.POST, "PO"))
        #expect(check(.PATCH, "PATCH "))
        // Bodies: JSON, a form, and a method's name without its space.
        #expect(!check(.POST, "{\"amount\":100}"))
        #expect(!check(.POST, "POSTAL=1"))
        #expect(!check(.PUT, "POST /x"))
    }

    @Test("a body within the limit reaches the handler whole")
    func bodyIsDelivered() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let body = (0..<60_000).map { UInt8($0 % 251) }
        let response = try await client.send(UpstreamRequest(method: "POST", url: url(server, "/echo"), body: body))
        #expect(response.status == 200)
        #expect(response.header("x-echo-length") == "60000")
        #expect(response.body == body)
        let patch = try await client.send(UpstreamRequest(method: "PATCH", url: url(server, "/echo"), body: Array("{}".utf8)))
        #expect(patch.header("x-echo-method") == "PATCH")
    }

    @Test("an oversized body is answered 413 with a problem, and the server keeps serving")
    func oversizedBody() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let big = [UInt8](repeating: 0x41, count: 200_000)
        // With Expect: 100-continue, as large uploads send it: the answer comes before the body, so the
        // server's close cannot reset a connection whose body is still arriving (the test was flaky without).
        let response = try await client.send(UpstreamRequest(method: "POST", url: url(server, "/echo"),
                                                             headers: [("Expect", "100-continue")], body: big))
        #expect(response.status == 413)
        #expect(response.header("content-type") == Problem.contentType)
        let problem = try JSONValue.parse(response.body)
        #expect(problem["type"]?.stringValue == "urn:kassa:problem:payload-too-large")
        #expect(problem["status"]?.intValue == 413)

        // Chunked bodies have no length to check up front: refused with 411.
        let chunked = try await client.send(UpstreamRequest(method: "POST", url: url(server, "/echo"),
                                                            headers: [("Transfer-Encoding", "chunked"), ("Expect", "100-continue")], body: big))
        #expect(chunked.status == 411)
        #expect(try JSONValue.parse(chunked.body)["type"]?.stringValue == "urn:kassa:problem:length-required")

        // A body longer than its Content-Length claims is cut at the claimed length by libwebsockets,
        // and one that claims more than it sends times out; neither reaches a handler whole.
        let port = server.port
        let lying = try await onThread { () -> Int in
            let socket = try RawSocket(port: port)
            try socket.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n")
            return socket.readHTTPResponse()?.status ?? 0
        }
        #expect(lying == 413)

        let after = try await client.send(UpstreamRequest(url: url(server, "/fast")))
        #expect(after.status == 200)
    }

    @Test("headers, custom headers and query arguments reach the handler")
    func headersAndQuery() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let response = try await client.send(UpstreamRequest(
            url: url(server, "/headers?since=7&name=a%20b&flag"),
            headers: [("X-Custom", "yes"), ("Authorization", "Bearer t"), ("Idempotency-Key", "k1")]))
        let seen = try JSONValue.parse(response.body)
        #expect(seen["x-custom"]?.stringValue == "yes")
        #expect(seen["authorization"]?.stringValue == "Bearer t")
        #expect(seen["idempotency-key"]?.stringValue == "k1")
        #expect(seen["query.since"]?.stringValue == "7")
        #expect(seen["query.name"]?.stringValue == "a b")
        #expect(seen["query.flag"]?.stringValue == "")
    }

    @Test("invalid HTTP gets an error or a close, and the server keeps serving")
    func invalidHTTP() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        let garbage: [UInt8] = try await onThread {
            let socket = try RawSocket(port: port, timeoutSeconds: 5)
            try socket.send("\u{01}\u{02}NOT HTTP AT ALL\r\n\r\n")
            return socket.readToEnd()
        }
        let answer = String(decoding: garbage, as: UTF8.self)
        // libwebsockets answers a request it cannot parse with a 4xx page of its own, or hangs up.
        #expect(garbage.isEmpty || (answer.hasPrefix("HTTP/1.") && answer.dropFirst(9).hasPrefix("4")), "got \(answer)")

        let badHeader: [UInt8] = try await onThread {
            let socket = try RawSocket(port: port, timeoutSeconds: 5)
            try socket.send("GET /fast HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n" + String(repeating: "X-Long: " + String(repeating: "a", count: 1000) + "\r\n", count: 20) + "\r\n")
            return socket.readToEnd()
        }
        let badAnswer = String(decoding: badHeader, as: UTF8.self)
        #expect(!badAnswer.hasPrefix("HTTP/1.1 200"), "oversized headers must not be served: \(badAnswer.prefix(60))")

        let after = try await client.send(UpstreamRequest(url: url(server, "/fast")))
        #expect(after.status == 200)
    }

    @Test("a handler slower than the request timeout is still answered: the timeout is the client's, not the handler's")
    func slowHandlerOutlivesRequestTimeout() async throws {
        let (server, _) = try startTestEdge { $0.requestTimeoutSeconds = 1 }
        defer { Task { await server.stop() } }
        let started = ContinuousClock.now
        let slow = try await client.send(UpstreamRequest(url: url(server, "/slow"), totalTimeoutMs: 10_000))
        #expect(slow.status == 200)
        #expect(String(decoding: slow.body, as: UTF8.self) == "slow")
        #expect(started.duration(to: .now) >= .seconds(2))
    }

    /// Against an edge with a 1 s request timeout: a POST whose head and first bytes go at once,
    /// then one more byte every `interval` until the body is whole or the edge hangs up.
    /// How long the connection was held, and what came back.
    func sendBodySlowly(contentLength: Int, first: String, every interval: Double) async throws -> (held: Duration, answer: String) {
        let (server, _) = try startTestEdge { $0.requestTimeoutSeconds = 1 }
        defer { Task { await server.stop() } }
        let port = server.port
        return try await onThread { () -> (Duration, String) in
            let socket = try RawSocket(port: port, timeoutSeconds: 25)
            let started = ContinuousClock.now
            try socket.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(contentLength)\r\n\r\n" + first)
            for _ in 0..<(contentLength - first.utf8.count) {
                Thread.sleep(forTimeInterval: interval)
                if (try? socket.send("c")) == nil { break }
            }
            let answer = socket.readToEnd()
            return (started.duration(to: .now), String(decoding: answer, as: UTF8.self))
        }
    }

    @Test("a body that trickles in is cut off at the request timeout")
    func slowBodyCutOff() async throws {
        // One byte every 200 ms: the 100 bytes would take 20 s; the cut comes after 1–2 s
        // (the deadline is checked once a second), later only on a machine under heavy load.
        let (held, answer) = try await sendBodySlowly(contentLength: 100, first: "ab", every: 0.2)
        #expect(held < .seconds(10), "held for \(held)")
        #expect(!answer.hasPrefix("HTTP/1.1 200"))
    }

    @Test("a body that keeps coming fast is still cut off at the request timeout")
    func steadyBodyCutOff() async throws {
        // A byte every 5 ms, 10 s in all: libwebsockets renews its own content timeout on each,
        // which could undo an asynchronous kill; the edge closes at the next byte past the deadline.
        let (held, _) = try await sendBodySlowly(contentLength: 2_000, first: "", every: 0.005)
        #expect(held < .seconds(5), "held for \(held)")
    }

    @Test("a client that disconnects mid-request does not disturb others")
    func disconnectMidRequest() async throws {
        let (server, handler) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        // Half a body, then gone.
        try await onThread {
            let socket = try RawSocket(port: port)
            try socket.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
        }
        // Gone while its handler is still working: the late answer is dropped.
        let slowSocket = try await onThread { () -> RawSocket in
            let socket = try RawSocket(port: port)
            try socket.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            return socket
        }
        var started = handler.slowStarted.makeAsyncIterator()
        _ = await started.next()
        shutdown(slowSocket.fd, Int32(SHUT_RDWR)) // not close(): the fd stays owned by RawSocket

        let responses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 {
                group.addTask { try await client.send(UpstreamRequest(url: url(server, "/fast"))).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(responses == Array(repeating: 200, count: 20))
        _ = slowSocket
    }

    @Test("an answer on the wire: HTTP/1.1 status line with its reason, type, length (none for 204), the handler's headers once each")
    func answerWireFormat() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        let (created, nothing, after) = try await onThread { () -> (String, String, Int) in
            let socket = try RawSocket(port: port)
            // Heads only: both answers are read to the blank line, then a third request on the same connection.
            func head() -> String {
                var bytes: [UInt8] = []
                while bytes.suffix(4) != [13, 10, 13, 10] {
                    var byte: UInt8 = 0
                    guard recv(socket.fd, &byte, 1, 0) == 1 else { break }
                    bytes.append(byte)
                }
                return String(decoding: bytes, as: UTF8.self)
            }
            try socket.send("GET /created HTTP/1.1\r\nHost: x\r\n\r\n")
            let created = head()
            var body = [UInt8](repeating: 0, count: 2)
            _ = recv(socket.fd, &body, 2, Int32(MSG_WAITALL))
            try socket.send("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
            let nothing = head()
            try socket.send("GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            return (created, nothing, socket.readHTTPResponse()?.status ?? 0)
        }
        #expect(created.hasPrefix("HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 2\r\n"), "\(created)")
        #expect(created.contains("\r\nlocation: /created/1\r\n") && created.contains("\r\nx-custom: a b\r\n"), "\(created)")
        #expect(!created.contains("connection:"))
        #expect(nothing.hasPrefix("HTTP/1.1 204 No Content\r\n") && !nothing.contains("content-length"), "\(nothing)")
        #expect(after == 200, "the connection is kept after a 204 with no length")
    }

    @Test("keep-alive: several requests on one connection")
    func keepAlive() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        let statuses: [Int] = try await onThread {
            let socket = try RawSocket(port: port)
            var statuses: [Int] = []
            for _ in 0..<3 {
                try socket.send("GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
                statuses.append(socket.readHTTPResponse()?.status ?? 0)
            }
            try socket.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            statuses.append(socket.readHTTPResponse()?.status ?? 0)
            return statuses
        }
        #expect(statuses == [200, 200, 200, 200])
    }

    /// The loop's passes for 100 requests to `path`, one after the other on one kept-alive
    /// connection, less the loop's 0.1 s ticks (with five to spare).
    private func passesFor100Requests(_ path: String) async throws -> Int {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let socket = try RawSocket(port: server.port)
        let get = "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n"
        let first = try await onThread { () -> Int in
            try socket.send(get)
            return socket.readHTTPResponse()?.status ?? 0
        }
        #expect(first == 200)
        let before = server.loop.passes.load(ordering: .relaxed)
        let started = ContinuousClock.now
        let statuses: [Int] = try await onThread {
            (0..<100).map { _ in (try? socket.send(get)).flatMap { socket.readHTTPResponse()?.status } ?? 0 }
        }
        let passes = server.loop.passes.load(ordering: .relaxed) - before
        #expect(statuses == Array(repeating: 200, count: 100))
        return passes - Int(started.duration(to: .now) / .milliseconds(100)) - 5
    }

    /// The fewest passes of up to three rounds, stopping at the first within `bound`: a machine
    /// busy with other tests only adds passes (wake-ups of its own), never takes one away.
    private func fewestPassesFor100Requests(_ path: String, within bound: Int) async throws -> Int {
        var fewest = Int.max
        for _ in 0..<3 where fewest > bound { fewest = min(fewest, try await passesFor100Requests(path)) }
        return fewest
    }

    @Test("the writeable pass libwebsockets asks for at the end of a kept-alive transaction is served before the loop polls, not in a pass of its own")
    func keptAliveWriteablePassServedBeforePoll() async throws {
        // Each request: the pass that reads and answers it, and libwebsockets' idle pass after it.
        // With the writeable pass left to epoll, three.
        let passes = try await fewestPassesFor100Requests("/now", within: 200)
        #expect(passes <= 200, "\(passes) passes of the loop for 100 requests")
    }

    @Test("an answer from a task is written before the loop polls, not in a writeable pass of its own")
    func taskAnswerWrittenBeforePoll() async throws {
        // Each request: the pass that reads it, the one the task's answer wakes (which writes it),
        // libwebsockets' idle pass and at times a second wake-up: 3.6 measured. With the answer
        // left to a writeable event from epoll, 4.6; on a busy machine one round once took 4.01.
        let passes = try await fewestPassesFor100Requests("/fast", within: 400)
        #expect(passes <= 400, "\(passes) passes of the loop for 100 requests")
    }

    @Test("answers held for the end of the pass: a connection closed before then is skipped, and its neighbours are answered")
    func heldAnswerOfClosedConnectionSkipped() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        let statuses: [Int] = try await onThread {
            var statuses: [Int] = []
            for _ in 0..<20 {
                // A request and the client's close in one go: libwebsockets may read both in one pass,
                // and close the connection while its answer is held.
                let gone = try RawSocket(port: port)
                let kept = try RawSocket(port: port)
                try gone.send("GET /now HTTP/1.1\r\nHost: x\r\n\r\n")
                try kept.send("GET /now HTTP/1.1\r\nHost: x\r\n\r\n")
                gone.hangUp()
                statuses.append(kept.readHTTPResponse()?.status ?? 0)
            }
            return statuses
        }
        #expect(statuses == Array(repeating: 200, count: 20))
    }

    @Test("a held answer to a client that asked to close is written, then the connection is closed at once")
    func heldAnswerThenClose() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        // More than the header tables: a connection left open after its answer would keep one.
        let outcomes: [Bool] = try await onThread {
            try (0..<40).map { i in
                let socket = try RawSocket(port: port, timeoutSeconds: 5)
                try socket.send("GET \(i.isMultiple(of: 2) ? "/now" : "/fast") HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return socket.readHTTPResponse()?.status == 200 && socket.closesWithNothingMore()
            }
        }
        #expect(outcomes == Array(repeating: true, count: 40))
        #expect(server.trackedConnections == 0)
    }

    @Test("a kept-alive connection with no next request is closed at the request timeout")
    func idleKeepAliveClosed() async throws {
        let (server, _) = try startTestEdge { $0.requestTimeoutSeconds = 1 }
        defer { Task { await server.stop() } }
        let port = server.port
        let (status, closed, held) = try await onThread { () -> (Int, Bool, Duration) in
            let socket = try RawSocket(port: port, timeoutSeconds: 8)
            try socket.send("GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            let status = socket.readHTTPResponse()?.status ?? 0
            let answered = ContinuousClock.now
            let closed = socket.closesWithNothingMore()
            return (status, closed, answered.duration(to: .now))
        }
        #expect(status == 200)
        // Closed by the edge (not the socket's 8 s read timeout), one heartbeat after the timeout at most.
        #expect(closed)
        #expect(held >= .milliseconds(900) && held < .seconds(4), "held \(held)")
    }

    @Test("the edge keeps no state for a transaction once it is answered, kept alive or closed")
    func noStateOutlivesATransaction() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        // Kept alive: 200 transactions on one connection, the connection still open.
        let socket = try RawSocket(port: port)
        try await onThread {
            for _ in 0..<200 {
                try socket.send("GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
                _ = socket.readHTTPResponse()
            }
        }
        #expect(server.trackedConnections <= 1, "one open connection, \(server.trackedConnections) tracked")
        // Closed: 50 connections of one request each (curl closes them with Connection: close).
        for _ in 0..<50 {
            _ = try await client.send(UpstreamRequest(url: url(server, "/fast"), headers: [("Connection", "close")]))
        }
        socket.hangUp()
        var tracked = server.trackedConnections
        for _ in 0..<50 where tracked > 0 {
            try await Task.sleep(for: .milliseconds(20))
            tracked = server.trackedConnections
        }
        #expect(tracked == 0)
    }
}
