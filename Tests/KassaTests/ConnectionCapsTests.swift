import Foundation
import KassaCore
import KassaUpstream
import Testing
@testable import KassaEdge
@testable import kassa

/// Slow senders cannot starve the edge: per-address caps on open and half-open connections, a
/// global cap on half-open ones that closes the longest-waiting, and header tables sized above it.
/// The cap on all connections also sizes libwebsockets' descriptor table.
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

    @Test("at the cap on half-open connections, those that have waited longest go first, and the newest are served")
    func longestWaitingGoFirst() async throws {
        let t = try TestNode(edge: { $0.maxHalfOpen = 3 })
        // Six heads begun one after another, never finished: each past the third makes room by
        // closing the one that has waited longest (or an idle kept-alive connection older still).
        let (oldest, newest) = try await onThread { [port = t.node.port] () -> ([RawSocket], [RawSocket]) in
            let sockets = try (0..<6).map { _ -> RawSocket in
                let socket = try RawSocket(port: port, timeoutSeconds: 3)
                try socket.send("GET /healthz HTTP/1.1\r\n")
                Thread.sleep(forTimeInterval: 0.03)
                return socket
            }
            return (Array(sockets[..<3]), Array(sockets[3...]))
        }
        let closed = try await onThread { oldest.map { $0.closesWithNothingMore() } }
        #expect(closed == [true, true, true])
        let served = try await onThread {
            try newest.map { socket -> Int? in
                try socket.send("Host: x\r\n\r\n")
                return socket.readHTTPResponse()?.status
            }
        }
        #expect(served == [200, 200, 200])
        #expect(t.node.edge.evictedHalfOpenConnections >= 3)
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

    /// In a child process: the cap sizes the process's descriptor table while the edge starts,
    /// which a test process full of other tests' sockets cannot spare.
    @Test("the edge holds no more connections than its cap, whatever their addresses; one that ends makes room; the process keeps its file limit")
    func globalCap() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        try requireHardFileLimit(8_192)
        let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("kassa.sqlite"), "--max-connections", "16"],
                                 environment: ["KASSA_API_KEYS": "cap-key", "KASSA_ADMIN_TOKEN": "cap-admin",
                                               "KASSA_UPSTREAM_URL": "http://127.0.0.1:1/"],
                                 ulimit: "-Sn 8192")
        let listening = try await onThread { p.waitForLog(message: "listening") }
        let port = try #require(listening?["address"]?.stringValue?.split(separator: ":").last.flatMap { Int($0) })
        // Kept-alive connections from different addresses, each answered once, so each is open and counted.
        let held = try await onThread { () -> [(socket: RawSocket, status: Int?)] in
            try (0..<16).map { a in
                let socket = try RawSocket(port: port, timeoutSeconds: 2, source: "127.0.6.\(a + 1)")
                try socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                return (socket, socket.readHTTPResponse()?.status)
            }
        }
        #expect(held.map(\.status) == Array(repeating: 200, count: 16))
        let over = try await onThread { try RawSocket(port: port, timeoutSeconds: 2, source: "127.0.6.99") }
        #expect(try await onThread { over.closesWithNothingMore() }, "a seventeenth connection is closed on arrival")
        held[0].socket.hangUp()
        try await Task.sleep(for: .milliseconds(300))
        let scrape = try await onThread { () -> (Int?, String) in
            let socket = try RawSocket(port: port, timeoutSeconds: 2, source: "127.0.6.99")
            try socket.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            let answer = socket.readHTTPResponse()
            return (answer?.status, answer?.body ?? "")
        }
        #expect(scrape.0 == 200, "the connection that ended made room")
        #expect(scrape.1.split(separator: "\n").contains("kassa_connections_refused_total 1"))
        // The limit was lowered (to 16 and the reserve) only while the edge's context was made.
        let limits = try String(contentsOfFile: "/proc/\(p.child.pid)/limits", encoding: .utf8)
        let openFiles = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?.split(separator: " ")
        #expect(openFiles?.dropFirst(3).first == "8192", "the process keeps its soft limit: \(openFiles ?? [])")
        withExtendedLifetime(held) {}
        p.signal(SIGTERM)
        #expect(try await onThread { p.waitForExit() } == 0)
    }

    @Test("the soft file limit is raised for the upstream connections too, beside the edge's")
    func limitHoldsUpstreamConnections() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        try requireHardFileLimit(8_192)
        func softLimit(upstreamConnections: String) async throws -> String? {
            let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("kassa-\(upstreamConnections).sqlite"),
                                      "--max-connections", "16", "--upstream-connections", upstreamConnections],
                                     environment: ["KASSA_API_KEYS": "cap-key", "KASSA_ADMIN_TOKEN": "cap-admin",
                                                   "KASSA_UPSTREAM_URL": "http://127.0.0.1:1/"],
                                     ulimit: "-Sn 1024")
            _ = try await onThread { p.waitForLog(message: "listening") }
            let limits = try String(contentsOfFile: "/proc/\(p.child.pid)/limits", encoding: .utf8)
            p.signal(SIGTERM)
            #expect(try await onThread { p.waitForExit() } == 0)
            return limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?.split(separator: " ").dropFirst(3).first.map(String.init)
        }
        // 16 connections, 4 000 upstream connections and 256 more for the files.
        #expect(try await softLimit(upstreamConnections: "4000") == "4272")
        // The default reserve (1 024) when the upstream connections fit in it, less 256.
        #expect(try await softLimit(upstreamConnections: "500") == "1040")
        let refused = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("refused.sqlite"), "--upstream-connections", "0"],
                                       environment: ["KASSA_API_KEYS": "cap-key", "KASSA_ADMIN_TOKEN": "cap-admin"])
        #expect(try await onThread { refused.waitForExit() } != 0)
        #expect(refused.stderr.contains("--upstream-connections must be 1 to 65536"))
    }

    @Test("under a hard file limit lower than the cap, the edge holds what the limit allows and says so at start")
    func hardLimitBelowCap() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("kassa.sqlite")],
                                 environment: ["KASSA_API_KEYS": "cap-key", "KASSA_ADMIN_TOKEN": "cap-admin",
                                               "KASSA_UPSTREAM_URL": "http://127.0.0.1:1/"],
                                 ulimit: "-n 2000")
        let warning = try await onThread { p.waitForLog(message: "the hard limit on open files holds fewer connections than --max-connections") }
        #expect(warning?["level"]?.stringValue == "warning")
        #expect(warning?["maxConnections"]?.stringValue == "16384")
        #expect(warning?["held"]?.stringValue == "1500", "2 000 descriptors less a quarter kept for the rest of the process")
        p.signal(SIGTERM)
        #expect(try await onThread { p.waitForExit() } == 0)
    }

    @Test("libwebsockets' descriptor table is sized by the cap: a higher file limit is lowered only while the context is made, a lower one raised for good, up to the hard limit")
    func descriptorTableSizedByCap() {
        let reserve = DescriptorTable.reserve
        // A container's usual limit: the table is what the cap needs, the process keeps its limit.
        #expect(DescriptorTable.plan(soft: 1_048_576, hard: 1_048_576, connections: 16_384)
                == .init(whileMaking: rlim_t(16_384 + reserve), after: 1_048_576, connections: 16_384))
        // A login shell's usual 1 024: raised for good, since the connections need the descriptors.
        #expect(DescriptorTable.plan(soft: 1_024, hard: 524_288, connections: 16_384)
                == .init(whileMaking: rlim_t(16_384 + reserve), after: rlim_t(16_384 + reserve), connections: 16_384))
        // A hard limit below the cap: the table holds what it allows, less the reserve.
        #expect(DescriptorTable.plan(soft: 1_024, hard: 4_096, connections: 16_384)
                == .init(whileMaking: 4_096, after: 4_096, connections: 4_096 - reserve))
        // A small hard limit keeps three quarters for connections; no limit at all is no trap.
        #expect(DescriptorTable.plan(soft: 256, hard: 256, connections: 16_384).connections == 192)
        // A larger reserve (many upstream connections) is held beside the connections.
        #expect(DescriptorTable.plan(soft: 1_024, hard: 524_288, connections: 16_384, reserve: 4_352)
                == .init(whileMaking: 20_736, after: 20_736, connections: 16_384))
        let unlimited = rlim_t.max  // RLIM_INFINITY
        #expect(DescriptorTable.plan(soft: unlimited, hard: unlimited, connections: 1_048_576)
                == .init(whileMaking: rlim_t(1_048_576 + reserve), after: unlimited, connections: 1_048_576))
    }

    private func requireHardFileLimit(_ least: rlim_t) throws {
        var own = rlimit()
        try #require(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &own) == 0 && own.rlim_max >= least,
                     "the test needs a hard file limit of at least \(least)")
    }
}
