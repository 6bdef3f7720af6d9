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
         logLevel: Logger.Level = .debug,
         configure: (inout GatewayConfiguration) -> Void = { _ in },
         edge configureEdge: (inout EdgeConfiguration) -> Void = { _ in }) throws {
        dir = directory ?? TempDirectory()
        logs = LogSink(capturing: true)
        let sink = logs
        let logger = Logger(label: "kassa") { label in JSONLogHandler(label: label, level: logLevel, sink: sink) }
        var gateway = GatewayConfiguration(apiKeys: ["test-key", "second-key"], adminToken: "test-admin",
                                           upstreamURL: upstreamURL, upstreamToken: upstreamURL.isEmpty ? "" : "upstream-secret",
                                           upstreamTimeoutMs: upstreamTimeoutMs, appleAppIDs: ["TEAMID.com.example.app"],
                                           sessionRetry: RetryPolicy(baseDelayMs: 20, maxDelayMs: 100, deadlineMs: 600),
                                           sessionPollIntervalMs: 100)
        gateway.circuitBreaker = CircuitBreaker(failureThreshold: 5, openSeconds: 0.3)
        configure(&gateway)
        var edge = EdgeConfiguration(host: "127.0.0.1", port: 0)
        configureEdge(&edge)
        do {
            node = try KassaNode(edge: edge, gateway: gateway,
                                 databasePath: dir.file("kassa.sqlite"), clock: clock, logger: logger)
            // The port is open before the test goes on; the group then runs the node until `stop()`.
            try node.start()
        } catch {
            // A node refused at start (a test of that refusal) leaves no directory of its own behind.
            if directory == nil { dir.cleanup() }
            throw error
        }
        let group = ServiceGroup(services: [node], logger: logger)
        self.group = group
        running = Task { try await group.run() }
    }

    /// Every event's data and summary as the store reads them back, decoded. Long event data is
    /// stored compressed, where a byte scan of the files would not show a value.
    func decodedEvents() throws -> (events: [KassaCore.LogEvent], text: String) {
        var all = Store.EventQuery()
        all.limit = 100_000
        let events = try node.store.searchEvents(all)
        return (events, events.map { ($0.data?.text ?? "") + $0.summary }.joined(separator: "\n"))
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
