import Foundation
import KassaCore
import KassaEdge
import KassaGateway
import KassaSimulator
import KassaStore
import KassaUpstream
import Logging
import OTel
import ServiceLifecycle
import Synchronization

/// One running Kassa process's parts, wired together: store, upstream client,
/// gateway, edge and, when no upstream is configured, the embedded simulator.
/// It is a `Service`: `kassa serve` runs it in a `ServiceGroup` that turns SIGTERM
/// and SIGINT into a graceful stop, and the end-to-end tests run it the same way.
final class KassaNode: Service, Sendable {
    let store: Store
    let upstream: UpstreamClient
    let gateway: Gateway
    let edge: EdgeServer
    /// The embedded simulator, when no upstream URL was configured.
    let simulator: Simulator?
    let retention: Retention
    /// Exports spans over OTLP/HTTP when `otlpEndpoint` is set. It stops after the node, so the
    /// spans of the drain go out too.
    let traceExport: ServiceGroup?
    let logger: Logger
    private let started = Mutex(false)
    /// Called once the port is open, with the port (`kassa serve` prints where to go next).
    let onListening: @Sendable (Int) -> Void

    var port: Int { edge.port }

    /// Opens the database and wires the parts; throws a message fit for the operator.
    /// The port opens in `start()` (or `run()`).
    init(edge edgeConfiguration: EdgeConfiguration, gateway gatewayConfiguration: GatewayConfiguration,
         databasePath: String, durability: Store.Durability = .normal, retention: Retention = Retention(),
         clock: any WallClock = SystemClock(), logger: Logger, onListening: @escaping @Sendable (Int) -> Void = { _ in }) throws {
        self.onListening = onListening
        // First, before anything opens or starts: a short or weak cluster secret is refused here.
        var secrets = gatewayConfiguration.clusterSecrets
        if secrets.isEmpty {
            do { secrets = [try Self.nodeSecret(beside: databasePath)] } catch {
                // A read-only disk: the node still starts (and reports the disk), sealing for this run only.
                logger.warning("\(error); what this run seals will not open after a restart")
                secrets = [Secrets.randomHex(bytes: 32)]
            }
        }
        let tokenKeys = try TokenKeys(secrets: secrets)
        var edgeConfiguration = edgeConfiguration
        edgeConfiguration.customHeaderNames += Gateway.customHeaderNames
        store = try Store.open(path: databasePath, durability: durability)
        var gatewayConfiguration = gatewayConfiguration
        gatewayConfiguration.edgeServesTLS = edgeConfiguration.tlsCertificatePath != nil
        if gatewayConfiguration.upstreamURL.isEmpty {
            // No Swedbank Pay configured: run the simulator in this process, on loopback.
            let simulator = try Simulator.start(Simulator.Configuration(
                host: "127.0.0.1", port: 0,
                token: gatewayConfiguration.upstreamToken.isEmpty ? Simulator.defaultToken : gatewayConfiguration.upstreamToken))
            self.simulator = simulator
            gatewayConfiguration.upstreamURL = simulator.baseURL
            gatewayConfiguration.upstreamToken = simulator.configuration.token
        } else {
            simulator = nil
        }
        upstream = UpstreamClient(maxConnections: gatewayConfiguration.upstreamConnections)
        let telemetry: Telemetry
        (telemetry, traceExport) = try Self.tracing(endpoint: gatewayConfiguration.otlpEndpoint, nodeName: gatewayConfiguration.nodeName,
                                                    logger: logger)
        gateway = Gateway(configuration: gatewayConfiguration, tokenKeys: tokenKeys, store: store, upstream: upstream,
                          clock: clock, telemetry: telemetry, logger: logger)
        edge = EdgeServer(configuration: edgeConfiguration, handler: gateway)
        self.retention = retention
        self.logger = logger
        gateway.attach(edge)
        gateway.recoverSessions()
    }

    /// swift-otel's tracer and its exporter for `endpoint` (OTLP/HTTP, protobuf); no tracing without one.
    /// Only traces: metrics stay with Prometheus and logs with the JSON lines, which carry the ids.
    /// The `OTEL_*` environment variables (batch delay, headers, sampler) still apply.
    static func tracing(endpoint: String?, nodeName: String, logger: Logger) throws -> (Telemetry, ServiceGroup?) {
        guard let endpoint else { return (.off, nil) }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "kassa"
        configuration.resourceAttributes = ["service.instance.id": nodeName, "service.version": KassaVersion.string]
        configuration.diagnosticLogger = .custom(logger)
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = endpoint
        // A flow makes about 20 spans: at a few hundred flows a second, swift-otel's defaults (a 2 048-span
        // queue, one 512-span batch a tick) dropped five spans in six (bench/RESULTS.md). A deeper queue
        // (about 1 KiB a span) and larger, more frequent batches keep up.
        configuration.traces.batchSpanProcessor.maxQueueSize = 32_768
        configuration.traces.batchSpanProcessor.maxExportBatchSize = 4_096
        configuration.traces.batchSpanProcessor.scheduleDelay = .seconds(1)
        let (tracer, exporter) = try OTel.makeTracingBackend(configuration: configuration)
        return (Telemetry(tracer: tracer), ServiceGroup(configuration: .init(services: [exporter], logger: logger)))
    }

    /// The secret a node without `--cluster-secret` seals with: kept in `<database>.key`
    /// (owner-only), made on first start. Sealed values at rest (upstream URLs, client devices)
    /// then survive a restart; the file must not travel with copies of the database.
    static func nodeSecret(beside databasePath: String) throws -> String {
        guard databasePath != ":memory:" else { return Secrets.randomHex(bytes: 32) }
        let path = databasePath + ".key"
        if let existing = try? String(contentsOfFile: path, encoding: .utf8) {
            let secret = existing.trimmingCharacters(in: .whitespacesAndNewlines)
            if !secret.isEmpty { return secret }
        }
        let secret = Secrets.randomHex(bytes: 32)
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError("cannot create the node's secret file \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array((secret + "\n").utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fchmod(fd, 0o600) == 0 else {
            throw StoreError("cannot write the node's secret file \(path)")
        }
        return secret
    }

    /// Opens the port (once). On failure the simulator and upstream client are let go.
    func start() throws {
        guard started.withLock({ let was = $0; $0 = true; return !was }) else { return }
        do {
            try edge.start()
        } catch {
            upstream.shutdown()
            if let simulator { Task { await simulator.stop() } }
            throw error
        }
        store.eventLog.append(LogEvent(atMs: gateway.clock.nowMs(), kind: "node.start",
                                       summary: "listening on \(edge.configuration.host):\(edge.port)"))
    }

    /// Serves until the group asks for a graceful stop, then drains. Throws when the
    /// event log could not take every event (they are then in the process log).
    func run() async throws {
        try start()
        let exporting = traceExport.map { group in Task { try await group.run() } }
        logger.info("listening", metadata: ["address": "\(edge.configuration.host):\(port)", "db": "\(store.path)",
                                            "upstream": "\(simulator.map { "embedded simulator at \($0.baseURL)" } ?? gateway.configuration.upstreamURL)"])
        if edge.connectionCap < edge.configuration.maxConnections {
            logger.warning("the hard limit on open files holds fewer connections than --max-connections",
                           metadata: ["maxConnections": "\(edge.configuration.maxConnections)", "held": "\(edge.connectionCap)"])
        }
        onListening(port)
        // The periodic jobs run until the graceful stop cancels them.
        await cancelWhenGracefulShutdown { [self] in
            await withDiscardingTaskGroup { group in
                group.addTask { await self.retentionJob() }
                group.addTask { await self.evictionJob() }
            }
        }
        logger.info("stopping")
        let stopped = await stop()
        if let traceExport {
            await traceExport.triggerGracefulShutdown()
            _ = try? await exporting?.value
        }
        guard stopped else { throw UnwrittenEvents() }
    }

    struct UnwrittenEvents: Error, CustomStringConvertible {
        var description: String { "stopped with events the database did not take (they are in this log)" }
    }

    private func retentionJob() async {
        while !Task.isCancelled {
            do { try await retention.run(store, nowMs: gateway.clock.nowMs()) } catch {
                logger.error("retention failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: .seconds(retention.intervalSeconds))
        }
    }

    private func evictionJob() async {
        var sweeps = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(500))
            sweeps += 1
            // Ended sessions every half second; the walk over all sessions for waiting ones every five.
            await gateway.evictSessions(nowMs: gateway.clock.nowMs(), waiting: sweeps % 10 == 0)
        }
    }

    /// Graceful stop: the edge drains (WebSockets closed with 1001, in-flight
    /// requests answered), then the event log is flushed and closed. False when
    /// the disk refused events to the end (they are then in the process log).
    private func stop() async -> Bool {
        await edge.stop()
        store.eventLog.append(LogEvent(atMs: gateway.clock.nowMs(), kind: "node.stop", summary: "stopped"))
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
