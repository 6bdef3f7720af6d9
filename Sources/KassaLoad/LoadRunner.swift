import Foundation
import KassaCore
import KassaEdge
import Synchronization

/// Runs a scenario against a gateway: virtual clients, each running flows one after
/// another (or, open loop, flows started on a fixed schedule), on `threads` libwebsockets client contexts (one service thread each,
/// carrying both the HTTP requests and the WebSockets).
public final class LoadRunner: Sendable {
    public struct Target: Sendable {
        public let base: String
        public let host: String
        public let port: Int
        /// The path the gateway is served under ("" at the root).
        public let path: String

        /// `http://HOST:PORT`; a host off loopback only when `allowRemote`.
        public init(url: String, allowRemote: Bool) throws(Scenario.Invalid) {
            guard let parts = URLComponents(string: url), parts.scheme == "http", let host = parts.host, !host.isEmpty else {
                throw Scenario.Invalid(description: "--url is http://HOST:PORT (the load client speaks plain http and ws)")
            }
            let loopback = host == "localhost" || host == "::1" || host.hasPrefix("127.")
            guard loopback || allowRemote else {
                throw Scenario.Invalid(description: "\(host) is not a loopback address; pass --allow-remote to load another machine")
            }
            self.host = host == "localhost" ? "127.0.0.1" : host
            self.port = parts.port ?? 80
            self.path = parts.path.hasSuffix("/") ? String(parts.path.dropLast()) : parts.path
            self.base = "http://" + URLAuthority.of(host: host, port: port) + path
        }
    }

    let target: Target
    let apiKey: String
    let scenario: Scenario
    let recorder = LoadRecorder()
    /// Flows started so far: the next one's place in the weighted mix.
    private let flowsPicked = Atomic<Int>(0)
    let deadlines = Deadlines()
    let webSockets: [WebSocketClient]

    public init(target: Target, apiKey: String, scenario: Scenario) throws {
        self.target = target
        self.apiKey = apiKey
        self.scenario = scenario
        webSockets = try (0..<scenario.threads).map { _ in try WebSocketClient(descriptors: scenario.openFilesWanted) }
    }

    /// Runs the scenario to its end; `progress` gets one line a second. Returns the JSON report.
    public func run(progress: @escaping @Sendable (String) -> Void) async -> JSONValue {
        let started = ContinuousClock.now
        let cpuAtStart = Self.processCPUSeconds()
        let end = scenario.durationSeconds.map { started + .milliseconds(Int64($0 * 1000)) }
        let timeline = TimelineRecorder()
        let ticker = Task { [recorder, deadlines] in
            var lastCompleted = 0, lastPushes = 0, second = 0
            var lastTick = ContinuousClock.now
            while !Task.isCancelled {
                for _ in 0..<5 {
                    try? await Task.sleep(for: .milliseconds(200))
                    deadlines.sweep()
                }
                let now = ContinuousClock.now
                let elapsed = max(Double(LoadRecorder.microseconds(lastTick.duration(to: now))) / 1e6, 0.001)
                lastTick = now
                second += 1
                let p = recorder.progress()
                let rate = Double(p.completed - lastCompleted) / elapsed
                let pushRate = Double(p.pushes - lastPushes) / elapsed
                lastCompleted = p.completed
                lastPushes = p.pushes
                timeline.add(["t": .number(Double(second)), "completed": .number(Double(p.completed)), "failed": .number(Double(p.failed)),
                              "flowsPerSecond": .number(rate.rounded()), "pushesPerSecond": .number(pushRate.rounded()),
                              "openStreams": .number(Double(p.openStreams)), "flowP99Ms": p.flowP99Ms.map { .number($0) } ?? .null,
                              "pushP99Ms": p.recentPushP99Ms.map { .number($0) } ?? .null])
                progress("[\(second)s] flows \(p.completed) ok (\(Int(rate))/s), \(p.failed) failed | active \(p.activeFlows), streams \(p.openStreams) | pushes \(Int(pushRate))/s | conn errors \(p.connectionErrors)"
                         + (p.flowP99Ms.map { " | flow p99 \(LoadRecorder.format3($0)) ms" } ?? ""))
            }
        }
        if let rate = scenario.arrivalsPerSecond, let end {
            await openLoop(rate: rate, started: started, end: end)
        } else {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<scenario.clients {
                    group.addTask { await self.virtualClient(index, started: started, end: end) }
                }
            }
        }
        ticker.cancel()
        let seconds = Double(LoadRecorder.microseconds(started.duration(to: .now))) / 1e6
        for client in webSockets { client.shutdown() }
        var report = recorder.report(scenario: scenario, url: target.base, durationSeconds: seconds)
        if case .object(var o) = report {
            o["timeline"] = .array(timeline.entries())
            // The client shares the machine with what it loads: its CPU shows whether it was the bound.
            o["clientCpuSeconds"] = .number(((Self.processCPUSeconds() - cpuAtStart) * 1000).rounded() / 1000)
            report = .object(o)
        }
        return report
    }

    /// User and system CPU time of this process so far.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    private func virtualClient(_ index: Int, started: ContinuousClock.Instant, end: ContinuousClock.Instant?) async {
        if scenario.rampUpSeconds > 0 {
            let offset = scenario.rampUpSeconds * Double(index) / Double(scenario.clients)
            try? await Task.sleep(until: started + .milliseconds(Int64(offset * 1000)), clock: .continuous)
        }
        let client = VirtualClient(runner: self, index: index, runEnd: end)
        var done = 0
        while true {
            if let iterations = scenario.iterations, done >= iterations { break }
            if let end, ContinuousClock.now >= end { break }
            recorder.flowStarted()
            await runFlow(on: client, since: .now)
            done += 1
            let think = Int.random(in: scenario.thinkTimeMs)
            if think > 0 { try? await Task.sleep(for: .milliseconds(think)) }
        }
    }

    /// Runs the next flow of the mix on `client` (counted as started by the caller); its latency counts from `since`.
    private func runFlow(on client: VirtualClient, since: ContinuousClock.Instant) async {
        let flow = scenario.flow(at: nextFlowPosition())
        do {
            try await client.run(flow)
            if flow != .idle && flow != .ping {
                recorder.record("flow", since: since)
                recorder.record("flow.\(flow.rawValue)", since: since)
            }
            recorder.flowEnded(flow, failure: nil)
        } catch {
            recorder.flowEnded(flow, failure: error)
        }
    }

    /// Open loop: flow n is due at `started + n / rate`, whatever the answers' pace, and its
    /// latency counts from then, not from when it could start: a slow gateway shows as latency,
    /// not as fewer measurements (no coordinated omission). At most `clients` flows are in flight;
    /// a flow that finds them all busy, or a scheduler that fell behind, starts late, and the lag
    /// is recorded (`startLag`, and `lateStarts` past 1 ms) so a run shows when the client was the bound.
    /// Flows still waiting for room when the run ends are not started, and counted (`notStarted`).
    private func openLoop(rate: Double, started: ContinuousClock.Instant, end: ContinuousClock.Instant) async {
        let interval = 1e9 / rate
        func dueTime(_ n: Int) -> ContinuousClock.Instant { started + .nanoseconds(Int64((Double(n) * interval).rounded())) }
        var n = 0
        await withDiscardingTaskGroup { group in
            while dueTime(n) < end {
                let due = dueTime(n)
                try? await Task.sleep(until: due, clock: .continuous)
                while recorder.activeFlows >= scenario.clients && ContinuousClock.now < end {
                    try? await Task.sleep(for: .microseconds(200))
                }
                guard ContinuousClock.now < end || recorder.activeFlows < scenario.clients else { break }
                recorder.started(lag: due.duration(to: .now))
                // Counted here, not in the task: the next pass of this loop sees it in flight.
                recorder.flowStarted()
                let client = VirtualClient(runner: self, index: n, runEnd: end)
                group.addTask { await self.runFlow(on: client, since: due) }
                n += 1
            }
        }
        let dueInRun = Int((started.duration(to: end) / .seconds(1) * rate).rounded(.up))
        recorder.notStarted(max(0, dueInRun - n))
    }
}

/// One line per second of the run, kept for the report.
final class TimelineRecorder: Sendable {
    private let lines = Mutex<[JSONValue]>([])
    func add(_ line: JSONValue) { lines.withLock { if $0.count < 7_200 { $0.append(line) } } }
    func entries() -> [JSONValue] { lines.withLock { $0 } }
}

extension LoadRunner {
    /// The report as a human reads it.
    public static func text(_ report: JSONValue) -> String { LoadRecorder.text(report) }
}

extension LoadRunner {
    /// Where the next flow falls in [0, 1): the golden-ratio sequence spreads successive
    /// picks evenly, so even a short run has every weighted flow in about its share
    /// (random draws leave a flow out of 18 picks one run in 16).
    func nextFlowPosition() -> Double {
        let n = flowsPicked.add(1, ordering: .relaxed).newValue
        return (Double(n) * 0.618_033_988_749_894_9).truncatingRemainder(dividingBy: 1)
    }
}
