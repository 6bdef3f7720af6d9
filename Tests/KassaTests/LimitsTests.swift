import Foundation
import KassaCore
import KassaEdge
import KassaUpstream
import Testing
@testable import kassa

@Suite("Limits: rates and capacity")
struct LimitsTests {
    let client = UpstreamClient()

    @Test("token buckets: a burst, then one request per refill interval")
    func bucket() {
        var limiter = RateLimiter(ratePerSecond: 2, burst: 3)
        #expect((0..<3).map { _ in limiter.take("a", now: 100) } == [nil, nil, nil])
        let wait = limiter.take("a", now: 100)
        #expect(wait != nil && abs(wait! - 0.5) < 0.001)
        #expect(limiter.take("b", now: 100) == nil, "another key has its own bucket")
        #expect(limiter.take("a", now: 100.5) == nil)
        #expect(limiter.take("a", now: 100.5) != nil)
        _ = limiter.take("c", now: 300)
        #expect(limiter.trackedKeys == 1, "full buckets are forgotten")
    }

    @Test("per-address and per-key limits answer 429 with Retry-After; probes are never limited")
    func rateLimits() async throws {
        // One request every 5 s, burst 1: the second request in a row is over the rate however slow the machine is.
        let t = try TestNode { $0.rateLimitPerIP = 0.2 }
        let first = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/", headers: [("Your-Api-Key", "test-key")]))
        #expect(first.status == 200)
        let limited = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/", headers: [("Your-Api-Key", "test-key")]))
        #expect(limited.status == 429)
        #expect(Int(limited.header("retry-after") ?? "") ?? 0 >= 1)
        #expect(try JSONValue.parse(limited.body)["type"]?.stringValue == "urn:kassa:problem:rate-limited")
        #expect(try await client.send(UpstreamRequest(url: t.base + "/healthz")).status == 200)
        await t.stop()

        let k = try TestNode { $0.rateLimitPerKey = 0.2 }
        var byKey: [Int] = []
        for key in ["test-key", "test-key", "test-key", "second-key"] {
            byKey.append(try await client.send(UpstreamRequest(url: k.base + "/swedbank-pay-mobile/", headers: [("Your-Api-Key", key)])).status)
        }
        #expect(byKey == [200, 429, 429, 200])
        await k.stop()
    }

    @Test("session and WebSocket caps refuse clearly with 503")
    func capacity() async throws {
        let t = try TestNode(configure: { $0.maxSessions = 2 }, edge: { $0.maxWebSockets = 1 })
        let first = try await t.sessions.create()
        _ = try await t.sessions.create()
        let third = try await t.sessions.createResponse(["paymentOrder": SessionClient.order()])
        #expect(third.status == 503)
        #expect(try JSONValue.parse(third.body)["type"]?.stringValue == "urn:kassa:problem:capacity")
        let stream = try await t.sessions.stream(first)
        _ = try await stream.event(.paymentSessionFetched)
        let port = t.node.port
        let refused = try await onThread { try RawSocket(port: port).upgrade(path: "/v1/sessions/\(first.id)/stream?token=\(first.token)") }
        #expect(refused.status == 503)
        #expect(refused.body.contains("urn:kassa:problem:capacity"))
        await t.stop()
    }
}
