import Foundation
import KassaCore
import KassaUpstream
import Testing
@testable import kassa

/// Slow senders cannot starve the edge: per-address caps on open and half-open connections, a
/// global cap on half-open ones that closes the longest-waiting, and header tables sized above it.
@Suite("Connection caps: half-open floods")
struct ConnectionCapsTests {
    let client = UpstreamClient()

    @Test("with more half-open connections than the header pool holds, from many addresses, /healthz and a payment's creation are still served")
    func halfOpenFlood() async throws {
        let t = try TestNode(edge: { $0.maxHalfOpen = 100; $0.maxHalfOpenPerAddress = 16 })
        let pool = t.node.edge.configuration.headerPoolSize
        let addresses = 60, perAddress = 10
        #expect(addresses * perAddress > pool, "the flood is larger than the header pool (\(pool))")
        // Each sends part of a request head, then a little more: never the blank line that ends it.
        let flood = try await onThread { [port = t.node.port] in
            try (0..<addresses).flatMap { a in
                try (0..<perAddress).map { _ -> RawSocket in
                    let socket = try RawSocket(port: port, timeoutSeconds: 1, source: "127.0.\(10 + a / 200).\(a % 200 + 1)")
                    try socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    return socket
                }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        _ = try await onThread { for socket in flood { try? socket.send("a") } }
        for _ in 0..<5 {
            let started = ContinuousClock.now
            let health = try await client.send(UpstreamRequest(url: t.base + "/healthz", totalTimeoutMs: 3_000))
            #expect(health.status == 200)
            #expect(started.duration(to: .now) < .seconds(2))
        }
        let created = try await t.sessions.createResponse(["paymentOrder": SessionClient.order()])
        #expect(created.status == 201)
        #expect(t.node.edge.evictedHalfOpenConnections >= addresses * perAddress - 100, "the longest-waiting were closed to make room")
        withExtendedLifetime(flood) {}
        await t.stop()
    }

    @Test("one address gets no more half-open connections than its cap; another address is served")
    func perAddressCap() async throws {
        let t = try TestNode(edge: { $0.maxHalfOpenPerAddress = 8 })
        let (kept, refused) = try await onThread { [port = t.node.port] () -> ([RawSocket], [RawSocket]) in
            let kept = try (0..<8).map { _ in
                let socket = try RawSocket(port: port, timeoutSeconds: 2, source: "127.0.5.1")
                try socket.send("GET /healthz HTTP/1.1\r\n")
                return socket
            }
            Thread.sleep(forTimeInterval: 0.2)
            let refused = try (0..<4).map { _ in try RawSocket(port: port, timeoutSeconds: 2, source: "127.0.5.1") }
            return (kept, refused)
        }
        let closedAtOnce = try await onThread { refused.map { socket in socket.closesWithNothingMore() } }
        #expect(closedAtOnce == [true, true, true, true])
        #expect(t.node.edge.refusedConnections >= 4)
        let scrape = try await client.send(UpstreamRequest(url: t.base + "/metrics")).text
        let refusedCount = scrape.split(separator: "\n").first { $0.hasPrefix("kassa_connections_refused_total ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        #expect(refusedCount >= 4, "the dashboard's counter follows the edge's count")
        let other = try await onThread { [port = t.node.port] in
            let socket = try RawSocket(port: port, source: "127.0.5.2")
            try socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            return socket.readHTTPResponse()?.status
        }
        #expect(other == 200)
        withExtendedLifetime(kept) {}
        await t.stop()
    }
}
