@testable import KassaEdge
import Testing

@Suite("Edge: a request's headers and an answer's bytes")
struct HTTPWireTests {
    func text(_ bytes: [UInt8], after reserved: Int) -> String { String(decoding: bytes.dropFirst(reserved), as: UTF8.self) }

    @Test("status line, type, length, headers (with or without their colon), the close and the body, exactly, after zeroed room")
    func whole() {
        let response = HTTPResponse(status: 201, contentType: "application/json",
                                    headers: [("location", "/v1/sessions/s1"), ("retry-after:", "3"), ("x-empty", "")],
                                    body: Array(#"{"id":"s1","note":"å"}"#.utf8), closeConnection: true)
        let bytes = response.wireBytes(reserved: 16)
        #expect(bytes.prefix(16).allSatisfy { $0 == 0 })
        #expect(text(bytes, after: 16) == "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 23\r\n"
                + "location: /v1/sessions/s1\r\nretry-after: 3\r\nx-empty: \r\nconnection: close\r\n\r\n" + #"{"id":"s1","note":"å"}"#)
    }

    @Test("a 204 and a 101 state no length; an unknown status gets a generic phrase; no room asked is none given")
    func withoutLength() {
        let empty = HTTPResponse(status: 204, headers: [("x-request-id", "r")]).wireBytes(reserved: 0)
        #expect(text(empty, after: 0) == "HTTP/1.1 204 No Content\r\ncontent-type: application/json\r\nx-request-id: r\r\n\r\n")
        let switching = HTTPResponse(status: 101).wireBytes(reserved: 0)
        #expect(text(switching, after: 0) == "HTTP/1.1 101 Switching Protocols\r\ncontent-type: application/json\r\n\r\n")
        let odd = HTTPResponse(status: 418, contentType: "text/plain", body: Array(repeating: 0x78, count: 1_000)).wireBytes(reserved: 3)
        #expect(text(odd, after: 3) == "HTTP/1.1 418 Error\r\ncontent-type: text/plain\r\ncontent-length: 1000\r\n\r\n" + String(repeating: "x", count: 1_000))
    }

    @Test("a header is found by its name in any case, the first of repeated ones; a name of the same length or a prefix is not it")
    func lookup() {
        let headers = HTTPHeaders([("Host", "a.example"), ("X-Request-ID", "r1"), ("x-request-id", "r2"), ("accept", "*/*")])
        #expect(headers["host"] == "a.example")
        #expect(headers["HOST"] == "a.example")
        #expect(headers["x-request-id"] == "r1")
        #expect(headers["X-Request-Id"] == "r1")
        #expect(headers["hosT"] == "a.example")
        #expect(headers["hose"] == nil, "same length, another name")
        #expect(headers["hos"] == nil && headers["hosts"] == nil)
        #expect(headers["accepT"] == "*/*")
        #expect(HTTPHeaders([("{x", "1")])["[x"] == nil, "only A–Z are folded ([ | 0x20 is {)")
        #expect(HTTPHeaders()["host"] == nil)
    }
}
