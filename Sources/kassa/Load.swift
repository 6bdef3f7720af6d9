import ArgumentParser
import Foundation
import KassaCore
import KassaLoad

/// `kassa load`: scripted WebSocket load (bench/scenarios/README.md).
struct Load: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load-test a gateway with scripted WebSocket clients (scenario files: bench/scenarios/).",
        discussion: """
        Each virtual client creates its session over HTTP, subscribes to its stream, sends commands and checks \
        every frame (order, no gap, no duplicate, the expected end). Prints a progress line a second and a final \
        report; --json writes the report as JSON. Loopback targets only unless --allow-remote.
        """
    )

    @Option(help: "The gateway, http://HOST:PORT.")
    var url: String
    @Option(name: .customLong("api-key"), help: "A Merchant API key of the gateway. (KASSA_LOAD_API_KEY)")
    var apiKey: String?
    @Option(help: "The scenario file (JSON).")
    var scenario: String
    @Option(help: "Write the final report here as JSON.")
    var json: String?
    @Option(help: "Client threads (libwebsockets contexts); overrides the scenario's threads.")
    var threads: Int?
    @Option(help: "Virtual clients; overrides the scenario's clients.")
    var clients: Int?
    @Option(name: .customLong("duration"), help: "Seconds; overrides the scenario's durationSeconds.")
    var durationSeconds: Double?
    @Option(help: "Open loop: flows started per second on a fixed schedule; overrides the scenario's arrivalsPerSecond.")
    var rate: Double?
    @Flag(name: .customLong("allow-remote"), help: "Allow a target that is not a loopback address.")
    var allowRemote = false

    func run() async throws {
        guard let key = apiKey ?? ProcessInfo.processInfo.environment["KASSA_LOAD_API_KEY"], !key.isEmpty else {
            throw ValidationError("--api-key (or KASSA_LOAD_API_KEY) is required")
        }
        let text: String
        do { text = try String(contentsOfFile: scenario, encoding: .utf8) } catch {
            throw ValidationError("cannot read the scenario \(scenario): \(error.localizedDescription)")
        }
        var plan: Scenario
        let target: LoadRunner.Target
        do {
            plan = try Scenario(json: text)
            target = try LoadRunner.Target(url: url, allowRemote: allowRemote)
        } catch { throw ValidationError(error.description) }
        if let threads { plan.threads = min(max(threads, 1), 64) }
        if let clients { plan.clients = min(max(clients, 1), Scenario.maxClients) }
        if let durationSeconds { plan.durationSeconds = min(max(durationSeconds, 0.1), Scenario.maxDurationSeconds) }
        if let rate {
            guard Scenario.arrivalsPerSecondRange.contains(rate), plan.durationSeconds != nil else {
                throw ValidationError("--rate is \(Scenario.arrivalsPerSecondRange) flows a second, with a duration (the scenario's or --duration)")
            }
            plan.arrivalsPerSecond = rate
            plan.iterations = nil
        }
        let runner = try LoadRunner(target: target, apiKey: key, scenario: plan)
        let report = await runner.run { line in printToTerminal(line) }
        print(LoadRunner.text(report))
        if let json {
            do { try Data(report.bytes).write(to: URL(fileURLWithPath: json)) } catch {
                throw ValidationError("cannot write \(json): \(error.localizedDescription)")
            }
        }
        let failed = report["failedTotal"]?.intValue ?? 0
        let protocolErrors = report["protocolErrors"]?.intValue ?? 0
        if failed > 0 || protocolErrors > 0 { throw ExitCode(2) }
    }
}
