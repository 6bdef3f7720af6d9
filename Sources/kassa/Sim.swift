import ArgumentParser
import KassaGateway
import KassaSimulator
import Logging
import ServiceLifecycle

struct Sim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the Swedbank Pay simulator on its own port.",
        discussion: """
        Faults: --fault ROUTE:FAULT[:RATE], repeatable. ROUTE is a route name (consumers.create, \
        paymentorders.create, paymentorders.get, paymentorders.patch, …) or *; FAULT is latency=MS, status=CODE, \
        timeout, reset, malformed or truncated; RATE is 0…1 (default 1). A request whose body or query holds \
        sim-fault:FAULT gets that fault whatever the rules say. GET/PUT /sim/faults reads or replaces the rules.

        --canned serves, for benchmarks, the simulator's answers for one frictionless card payment, rendered \
        once and replayed with each payment's ids: no state, no faults, every attempt succeeds.
        """
    )

    @Option(help: "Address to listen on, HOST:PORT. (KASSA_SIM_LISTEN, default 127.0.0.1:9090)")
    var listen: String?
    @Option(help: "Bearer token callers must present. (KASSA_SIM_TOKEN, default \(Simulator.defaultToken))")
    var token: String?
    @Option(help: "Seed for ids and fault draws. (KASSA_SIM_SEED, default 1)")
    var seed: Int?
    @Option(name: .customLong("payer-delay-ms"), help: "Milliseconds the simulated payer takes to answer a Swish or wallet attempt. (KASSA_SIM_PAYER_DELAY_MS, default 300)")
    var payerDelayMs: Int?
    @Option(name: .customLong("fault"), help: "A fault rule ROUTE:FAULT[:RATE]; repeatable.")
    var faults: [String] = []
    @Flag(help: "Replay canned answers for card payments (benchmarks): a few microseconds an answer.")
    var canned = false

    func run() async throws {
        LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
        let logger = Logger(label: "kassa-sim")
        let (host, port) = try parseListen(setting(listen, "KASSA_SIM_LISTEN", default: "127.0.0.1:9090"))
        var rules: [FaultRule] = []
        for text in faults {
            guard let rule = FaultRule(text) else { throw ValidationError("--fault must be ROUTE:FAULT[:RATE], not \(text)") }
            rules.append(rule)
        }
        let bearer = setting(token, "KASSA_SIM_TOKEN", default: Simulator.defaultToken)
        let service: SimulatorService
        do {
            if canned {
                let upstream = try await CannedUpstream.start(host: host, port: port, token: bearer)
                service = SimulatorService(stop: upstream.stop, logger: logger, ready: ["address": "\(host):\(upstream.port)", "canned": "true"])
            } else {
                let simulator = try Simulator.start(Simulator.Configuration(
                    host: host, port: port, token: bearer, seed: UInt64(try setting(seed, "KASSA_SIM_SEED", default: 1)), faults: rules,
                    payerDelayMs: try setting(payerDelayMs, "KASSA_SIM_PAYER_DELAY_MS", default: 300)))
                service = SimulatorService(stop: simulator.stop, logger: logger,
                                           ready: ["address": "\(host):\(simulator.port)", "faults": "\(rules.count)"])
            }
        } catch {
            printToTerminal("kassa sim: \(error)")
            throw ExitCode(1)
        }
        try await ServiceGroup(services: [service],
                               gracefulShutdownSignals: [.sigterm, .sigint], logger: logger).run()
        logger.info("stopped")
    }
}

/// The standalone simulator (or canned upstream) as a service: it serves until the graceful stop.
struct SimulatorService: Service {
    let stop: @Sendable () async -> Void
    let logger: Logger
    let ready: Logger.Metadata

    func run() async throws {
        // Logged here, once the group traps SIGTERM: a stop sent as soon as this line shows is graceful.
        logger.info("listening", metadata: ready)
        try? await gracefulShutdown()
        await stop()
    }
}
