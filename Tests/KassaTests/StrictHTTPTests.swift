import Foundation
import KassaCore
import KassaUpstream
import Testing
@testable import kassa

/// What a careless or hostile client sends is refused plainly, as a problem, and never read two ways.
@Suite("Strict HTTP and WebSocket")
struct StrictHTTPTests {
    /// Sends `request` on a new connection from a fresh loopback address; the answer, and (when `waitForClose`)
    /// whether the server then closed the connection with nothing more. Waiting for a close costs the whole
    /// timeout on a kept-alive connection, so only the tests that expect one wait.
    func exchange(_ t: TestNode, _ request: String, source: String = "127.0.3.1",
                  waitForClose: Bool = false) async throws -> (status: Int, body: JSONValue?, raw: String, closed: Bool) {
        try await onThread { [port = t.node.port] in
            // Generous: on a machine the whole suite keeps busy, a first answer has taken over 5 s.
            let socket = try RawSocket(port: port, timeoutSeconds: 20, source: source)
            try socket.send(request)
            guard let answer = socket.readHTTPResponse() else { throw TestFailure("no answer to \(request.prefix(60))") }
            let closed = waitForClose && socket.closesWithNothingMore()
            return (answer.status, try? JSONValue.parse(Array(answer.body.utf8)), answer.body, closed)
        }
    }

    @Test("a negative, non-numeric, signed or repeated Content-Length is 400 and the connection closes (nothing is read two ways)",
          arguments: ["Content-Length: -5\r\n", "Content-Length: abc\r\n", "Content-Length: +2\r\n", "Content-Length: 2, 2\r\n",
                      "Content-Length: 2\r\nContent-Length: 3\r\n", "Content-Length: 99999999999999999999999\r\n"])
    func contentLength(_ header: String) async throws {
        let t = try TestNode()
        let answer = try await exchange(t, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nYour-Api-Key: test-key\r\nContent-Type: application/json\r\n\(header)\r\n{}",
                                    waitForClose: true)
        #expect(answer.status == 400)
        #expect(answer.body?["type"]?.stringValue == "urn:kassa:problem:bad-request")
        #expect(answer.body?["parameter"]?.stringValue == "Content-Length")
        #expect(answer.closed)
        await t.stop()
    }

    @Test("pipelined requests without a body are answered in order; one with a body closes the connection unanswered, and the node serves on")
    func pipelined() async throws {
        let t = try TestNode()
        let get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        let post = "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nYour-Api-Key: test-key\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        let (statuses, closed) = try await onThread { [port = t.node.port] in
            let socket = try RawSocket(port: port, timeoutSeconds: 20, source: "127.0.3.9")
            try socket.send(get + get + get)
            var statuses = (0..<3).map { _ in socket.readHTTPResponse()?.status ?? 0 }
            // In one write, so the POST arrives in the same read as the GET before it.
            try socket.send(get + post)
            statuses.append(socket.readHTTPResponse()?.status ?? 0)
            return (statuses, socket.closesWithNothingMore())
        }
        #expect(statuses == [200, 200, 200, 200])
        #expect(closed)
        // The service thread is not stuck on that connection: a new one is answered.
        #expect(try await exchange(t, get, source: "127.0.3.10").status == 200)
        await t.stop()
    }

    @Test("two Authorization or Host headers are 400, on requests and on upgrades")
    func repeatedCredentials() async throws {
        let t = try TestNode()
        let admin = try await exchange(t, "GET /v1/admin/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-admin\r\nAuthorization: Bearer other\r\n\r\n")
        #expect(admin.status == 400 && admin.body?["parameter"]?.stringValue == "Authorization")
        let host = try await exchange(t, "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        #expect(host.status == 400 && host.body?["parameter"]?.stringValue == "Host")
        let session = try await t.sessions.create()
        let upgrade = try await onThread { [port = t.node.port] in
            try RawSocket(port: port).upgrade(path: "/v1/sessions/\(session.id)/stream",
                                              headers: ["Authorization: Bearer \(session.token)", "Authorization: Bearer \(session.token)"])
        }
        #expect(upgrade.status == 400)
        await t.stop()
    }

    @Test("a JSON endpoint refuses a body of another type with 415; the issuer's form post still works")
    func mediaType() async throws {
        let t = try TestNode()
        let body = "{\"paymentOrder\":{}}"
        let form = try await exchange(t, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nYour-Api-Key: test-key\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        #expect(form.status == 415)
        #expect(form.body?["type"]?.stringValue == "urn:kassa:problem:unsupported-media-type")
        let text = try await exchange(t, "POST /swedbank-pay-mobile/paymentorders HTTP/1.1\r\nHost: x\r\nYour-Api-Key: test-key\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}")
        #expect(text.status == 415)
        let json = try await exchange(t, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nYour-Api-Key: test-key\r\nContent-Type: application/problem+json; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}")
        #expect(json.status == 400, "a +json type is JSON: the body itself is what is wrong")
        let spaced = try await exchange(t, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nYour-Api-Key: test-key\r\nContent-Type: \tApplication/JSON \t;charset=utf-8\r\nContent-Length: 2\r\n\r\n{}")
        #expect(spaced.status == 400, "spaces and case around the media type do not matter")
        let leading = try await exchange(t, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nYour-Api-Key: test-key\r\nContent-Type: ;application/json\r\nContent-Length: 2\r\n\r\n{}")
        #expect(leading.status == 415, "the media type comes before the first ';'")
        await t.stop()
    }

    @Test("a refused upgrade gets a whole HTTP/1.1 answer: status line, length, problem body, then the close")
    func refusedUpgrade() async throws {
        let t = try TestNode()
        let raw = try await onThread { [port = t.node.port] in
            let socket = try RawSocket(port: port)
            try socket.send("GET /v1/sessions/0123456789abcdef0123456789abcdef/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: kassa.v1\r\n\r\n")
            return String(decoding: socket.readToEnd(), as: UTF8.self)
        }
        #expect(raw.hasPrefix("HTTP/1.1 401 Unauthorized\r\n"), "\(raw.prefix(40))")
        let parts = raw.components(separatedBy: "\r\n\r\n")
        #expect(parts.count == 2)
        let length = parts[0].components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
        #expect(length == parts[1].utf8.count)
        #expect((try? JSONValue.parse(Array(parts[1].utf8)))?["status"]?.intValue == 401)
        await t.stop()
    }
}
