import Foundation
import KassaCore
import KassaEdge
@testable import KassaGateway
import KassaStore
import KassaSimulator
import KassaUpstream
import Logging
import ServiceLifecycle
import Testing
@testable import kassa

/// A whole node on an ephemeral loopback port with a fresh database, run in a
/// `ServiceGroup` as `kassa serve` runs it.
struct TestNode {
    let node: KassaNode
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let dir: TempDirectory
    let logs: LogSink
    var base: String { "http://127.0.0.1:\(node.port)" }
    var sessions: SessionClient { SessionClient(base: base, port: node.port) }

    var simulator: Simulator { node.simulator! }

    /// With no `upstreamURL` the node runs its embedded simulator.
    init(upstreamURL: String = "", upstreamTimeoutMs: Int = 10_000, directory: TempDirectory? = nil, clock: any WallClock = SystemClock(),
         configure: (inout GatewayConfiguration) -> Void = { _ in },
         edge configureEdge: (inout EdgeConfiguration) -> Void = { _ in }) throws {
        dir = directory ?? TempDirectory()
        logs = LogSink(capturing: true)
        let sink = logs
        let logger = Logger(label: "kassa") { label in JSONLogHandler(label: label, level: .debug, sink: sink) }
        var gateway = GatewayConfiguration(apiKeys: ["test-key", "second-key"], adminToken: "test-admin",
                                           upstreamURL: upstreamURL, upstreamToken: upstreamURL.isEmpty ? "" : "upstream-secret",
                                           upstreamTimeoutMs: upstreamTimeoutMs, appleAppIDs: ["TEAMID.com.example.app"],
                                           sessionRetry: RetryPolicy(baseDelayMs: 20, maxDelayMs: 100, deadlineMs: 600),
                                           sessionPollIntervalMs: 100)
        gateway.circuitBreaker = CircuitBreaker(failureThreshold: 5, openSeconds: 0.3)
        configure(&gateway)
        var edge = EdgeConfiguration(host: "127.0.0.1", port: 0)
        configureEdge(&edge)
        node = try KassaNode(edge: edge, gateway: gateway,
                             databasePath: dir.file("kassa.sqlite"), clock: clock, logger: logger)
        // The port is open before the test goes on; the group then runs the node until `stop()`.
        try node.start()
        let group = ServiceGroup(services: [node], logger: logger)
        self.group = group
        running = Task { try await group.run() }
    }

    func stop(keepDirectory: Bool = false) async {
        // Every end-to-end test also proves the service thread never entered the store.
        #expect(node.edge.blockingCallsOnServiceThread == 0, "a blocking call ran on the edge's service thread")
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        if !keepDirectory { dir.cleanup() }
    }
}

/// Runs `body` against a fresh node and stops the node afterwards, also when `body` throws,
/// so a failing test never leaves a server, a simulator or a database behind.
func withTestNode<T>(upstreamURL: String = "", configure: (inout GatewayConfiguration) -> Void = { _ in },
                     _ body: (TestNode) async throws -> T) async throws -> T {
    let node = try TestNode(upstreamURL: upstreamURL, configure: configure)
    do {
        let result = try await body(node)
        await node.stop()
        return result
    } catch {
        await node.stop()
        throw error
    }
}

@Suite("Gateway: operations routes and problems")
struct GatewayTests {
    let client = UpstreamClient()

    @Test("/healthz answers, unknown routes get 404 problems, wrong methods 405 with Allow")
    func routesAndProblems() async throws {
        let t = try TestNode()
        let health = try await client.send(UpstreamRequest(url: t.base + "/healthz"))
        #expect(health.status == 200)
        #expect(try JSONValue.parse(health.body)["status"]?.stringValue == "ok")

        let missing = try await client.send(UpstreamRequest(url: t.base + "/no/such/thing"))
        #expect(missing.status == 404)
        #expect(missing.header("content-type") == Problem.contentType)
        let problem = try JSONValue.parse(missing.body)
        #expect(problem["type"]?.stringValue == "urn:kassa:problem:not-found")
        #expect(problem["instance"]?.stringValue?.hasPrefix("urn:kassa:request:") == true)

        let wrong = try await client.send(UpstreamRequest(method: "DELETE", url: t.base + "/healthz"))
        #expect(wrong.status == 405)
        #expect(wrong.header("allow") == "GET")
        #expect(try JSONValue.parse(wrong.body)["type"]?.stringValue == "urn:kassa:problem:method-not-allowed")
        await t.stop()
    }

    @Test("operation links are followed only to the upstream's hosts, as libcurl reads them")
    func upstreamAllowList() async throws {
        let t = try TestNode()
        let gateway = t.node.gateway
        #expect(gateway.swedbankPay.isAllowed("http://127.0.0.1:1/psp/paymentorders/1"))
        #expect(gateway.swedbankPay.isAllowed("HTTP://127.0.0.1/x"))
        #expect(!gateway.swedbankPay.isAllowed("http://127.0.0.1@evil.example/psp"))
        #expect(!gateway.swedbankPay.isAllowed("ftp://127.0.0.1/psp"))
        #expect(!gateway.swedbankPay.isAllowed("http://evil.example/?h=127.0.0.1"))
        #expect(!gateway.swedbankPay.isAllowed("/psp/paymentorders/1"))
        await t.stop()
    }

    @Test("/readyz reports the store and an unreachable upstream")
    func readiness() async throws {
        let down = try TestNode(upstreamURL: "http://127.0.0.1:1/")
        let notReady = try await client.send(UpstreamRequest(url: down.base + "/readyz"))
        #expect(notReady.status == 503)
        let body = try JSONValue.parse(notReady.body)
        #expect(body["checks"]?["store"]?.stringValue == "ok")
        #expect(body["checks"]?["upstream"]?.stringValue == "unreachable")

        // The embedded simulator is reachable.
        let up = try TestNode()
        let ready = try await client.send(UpstreamRequest(url: up.base + "/readyz"))
        #expect(ready.status == 200)
        #expect(try JSONValue.parse(ready.body)["status"]?.stringValue == "ready")
        await down.stop(); await up.stop()
    }

    @Test("every request is written to the event log with its route and status")
    func requestsAreLogged() async throws {
        let t = try TestNode()
        _ = try await client.send(UpstreamRequest(url: t.base + "/no/such/thing", headers: [("X-Request-Id", "abc-123")]))
        await t.node.store.eventLog.flush()
        let events = try t.node.store.eventLog.events().filter { $0.kind == "http.request" }
        #expect(events.count == 1)
        #expect(events.first?.status == 404)
        #expect(events.first?.data?["requestId"]?.stringValue == "abc-123")
        #expect(events.first.map { TraceContext.isTraceID($0.traceID ?? "") } == true)
        #expect(events.first?.data?["path"]?.stringValue == "/no/such/thing")
        await t.stop()
    }
}
