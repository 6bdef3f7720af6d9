import Foundation
import KassaCore
@testable import KassaGateway
import KassaUpstream
import Testing
@testable import kassa

/// Every door is rate-limited, and guessing credentials is throttled by default.
@Suite("Throttle: failed authentication and request rates, on HTTP and WebSocket upgrades")
struct ThrottleTests {
    let client = UpstreamClient()

    func get(_ t: TestNode, _ path: String, bearer: String) async throws -> UpstreamResponse {
        try await client.send(UpstreamRequest(url: t.base + path, headers: [("Authorization", "Bearer \(bearer)")]))
    }

    @Test("an address that fails authentication too often gets 429 with Retry-After on every door, the right credential included")
    func perAddress() async throws {
        let t = try TestNode(configure: { $0.authFailuresPerMinute = 5 })
        for _ in 0..<5 { #expect(try await get(t, "/v1/admin/events", bearer: "guess").status == 401) }
        let blocked = try await get(t, "/v1/admin/events", bearer: "guess")
        #expect(blocked.status == 429)
        #expect(Int(blocked.header("retry-after") ?? "") ?? 0 >= 1)
        #expect(try JSONValue.parse(blocked.body)["type"]?.stringValue == "urn:kassa:problem:rate-limited")
        #expect(try await get(t, "/v1/admin/events", bearer: "test-admin").status == 429, "the address is held back before anything is checked")
        let upgrade = try await onThread { [port = t.node.port] in try RawSocket(port: port).upgrade(path: "/v1/admin/stream?token=test-admin").status }
        #expect(upgrade == 429, "upgrades pass the same throttle")
        // Another client is not affected, and probes never are.
        let other = try await onThread { [port = t.node.port] in
            let socket = try RawSocket(port: port, source: "127.0.0.2")
            try socket.send("GET /v1/admin/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-admin\r\nConnection: close\r\n\r\n")
            return socket.readHTTPResponse()?.status
        }
        #expect(other == 200)
        #expect(try await client.send(UpstreamRequest(url: t.base + "/healthz")).status == 200)
        let metrics = try await client.send(UpstreamRequest(url: t.base + "/metrics")).text
        #expect(metrics.contains("kassa_auth_failures_total 5"), "a request held back never reaches a credential check")
        #expect(metrics.contains("kassa_rate_limited_total{reason=\"auth-address\"}"))
        await t.stop()
    }

    @Test("wrong tokens for one session from many addresses are throttled per credential; its client, with the right token, is not locked out")
    func perCredential() async throws {
        let t = try TestNode(configure: { $0.authFailuresPerMinute = 3 })
        let session = try await t.sessions.create()
        let statuses = try await onThread { [port = t.node.port] in
            try (0..<5).map { i -> Int in
                let socket = try RawSocket(port: port, source: "127.0.1.\(i + 1)")
                return try socket.upgrade(path: "/v1/sessions/\(session.id)/stream?token=v1.guess.\(i)").status
            }
        }
        #expect(statuses == [401, 401, 401, 429, 429], "three failures are allowed, then the credential is held back")
        // The holder of the real token still gets in, over HTTP and on the stream.
        #expect(try await t.sessions.snapshot(session).status == 200)
        let stream = try await t.sessions.stream(session)
        _ = try await stream.event(.paymentSessionFetched)
        await t.stop()
    }

    @Test("with --rate-limit-ip, WebSocket upgrades count like requests")
    func upgradeRate() async throws {
        let t = try TestNode(configure: { $0.rateLimitPerIP = 2 })
        let session = try await t.sessions.create()
        let statuses = try await onThread { [port = t.node.port] in
            try (0..<4).map { _ in try RawSocket(port: port, source: "127.0.2.1").upgrade(path: "/v1/sessions/\(session.id)/stream?token=\(session.token)").status }
        }
        #expect(statuses.prefix(2) == [101, 101] && statuses.last == 429)
        await t.stop()
    }
}
