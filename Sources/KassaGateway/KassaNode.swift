import KassaCore
import KassaEdge
import KassaSimulator
import KassaStore
import KassaUpstream
import Logging

/// One running Kassa process's parts, wired together: store, upstream
/// client, gateway and edge. `kassa serve` and the end-to-end tests both
/// start the gateway through this.
public final class KassaNode: Sendable {
    public let store: Store
    public let upstream: UpstreamClient
    public let gateway: Gateway
    public let edge: EdgeServer
    /// The embedded simulator, when no upstream URL was configured.
    public let simulator: Simulator?
    let logger: Logger
    private let retentionTask: Task<Void, Never>
    private let evictionTask: Task<Void, Never>

    public var port: Int { edge.port }

    /// Opens the database, starts the edge; throws a message fit for the operator.
    public init(edge edgeConfiguration: EdgeConfiguration, gateway gatewayConfiguration: GatewayConfiguration,
                databasePath: String, durability: Store.Durability = .normal, retention: Retention = Retention(),
                logger: Logger) throws {
        // First, before anything opens or starts: a short or weak cluster secret is refused here.
        let tokenKeys = try TokenKeys(secrets: gatewayConfiguration.clusterSecrets)
        var edgeConfiguration = edgeConfiguration
        edgeConfiguration.customHeaderNames += Gateway.customHeaderNames
        store = try Store.open(path: databasePath, durability: durability)
        var gatewayConfiguration = gatewayConfiguration
        if gatewayConfiguration.upstreamURL.isEmpty {
            // No Swedbank Pay configured: run the simulator in this process, on loopback.
            let simulator = try Simulator.start(Simulator.Configuration(
                host: "127.0.0.1", port: 0,
                token: gatewayConfiguration.upstreamToken.isEmpty ? Simulator.defaultToken : gatewayConfiguration.upstreamToken))
            self.simulator = simulator
            gatewayConfiguration.upstreamURL = simulator.baseURL
            gatewayConfiguration.upstreamToken = simulator.configuration.token
            gatewayConfiguration.allowedUpstreamHosts.append("127.0.0.1")
        } else {
            simulator = nil
        }
        upstream = UpstreamClient(maxCachedConnections: gatewayConfiguration.upstreamKeptConnections)
        gateway = Gateway(configuration: gatewayConfiguration, tokenKeys: tokenKeys, store: store, upstream: upstream, logger: logger)
        edge = EdgeServer(configuration: edgeConfiguration, handler: gateway)
        self.logger = logger
        gateway.attach(edge)
        gateway.sessions.recover()
        let store = self.store
        retentionTask = Task {
            while !Task.isCancelled {
                do { try await retention.run(store, nowMs: Gateway.nowMs()) } catch {
                    logger.error("retention failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: .seconds(retention.intervalSeconds))
            }
        }
        let gateway = self.gateway
        evictionTask = Task {
            var sweeps = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                sweeps += 1
                // Ended sessions every half second; the walk over all sessions for waiting ones every five.
                await gateway.sessions.evict(nowMs: Gateway.nowMs(), waiting: sweeps % 10 == 0)
            }
        }
        do {
            try edge.start()
        } catch {
            retentionTask.cancel()
            evictionTask.cancel()
            upstream.shutdown()
            if let simulator { Task { await simulator.stop() } }
            throw error
        }
        store.eventLog.append(LogEvent(atMs: Gateway.nowMs(), kind: "node.start", summary: "listening on \(edgeConfiguration.host):\(edge.port)"))
    }

    /// Graceful stop: the edge drains (WebSockets closed with 1001, in-flight
    /// requests answered), then the event log is flushed and closed. False when
    /// the disk refused events to the end (they are then in the process log).
    @discardableResult
    public func stop() async -> Bool {
        retentionTask.cancel()
        evictionTask.cancel()
        await edge.stop()
        store.eventLog.append(LogEvent(atMs: Gateway.nowMs(), kind: "node.stop", summary: "stopped"))
        let unwritten = await store.close(grace: .milliseconds(Int64(max(edge.configuration.shutdownGraceSeconds, 1) * 1000)))
        if !unwritten.isEmpty {
            // The disk refused them until the end: they go to the process log, whole, rather than nowhere.
            logger.error("event log unwritable at stop; its unwritten events follow",
                         metadata: ["count": "\(unwritten.count)", "cause": "\(store.eventLog.lastWriteError ?? "unknown")"])
            for event in unwritten {
                logger.error("unwritten event", metadata: [
                    "event_at": "\(Timestamp.iso8601(ms: event.atMs))", "session_id": "\(event.sessionID ?? "")", "seq": "\(event.seq.map { "\($0)" } ?? "")",
                    "kind": "\(event.kind)", "level_of_event": "\(event.level.rawValue)", "summary": "\(event.summary)",
                    "trace_id": "\(event.traceID ?? "")", "data": "\(event.data?.text ?? "")"])
            }
        }
        upstream.shutdown()
        await simulator?.stop()
        return unwritten.isEmpty
    }
}
