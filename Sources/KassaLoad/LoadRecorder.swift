import Histogram
import KassaCore
import Synchronization

/// Everything a run measures: per-step latency histograms (µs, HdrHistogram, three
/// significant digits), flows completed and failed by reason, and counters.
final class LoadRecorder: Sendable {
    struct State {
        var latencies: [String: Histogram<UInt64>] = [:]
        var completed: [String: Int] = [:]
        var failed: [String: Int] = [:]
        var failedByFlow: [String: Int] = [:]
        var failureSamples: [JSONValue] = []
        var connectionErrors = 0
        var protocolErrors = 0
        var framesReceived = 0
        var pushesReceived = 0
        var openStreams = 0
        var peakOpenStreams = 0
        var activeFlows = 0
        /// Open loop: flows that started more than 1 ms after they were due, and flows due in the
        /// run that never found room to start.
        var lateStarts = 0
        var notStarted = 0
        /// Push latencies since the last `progress()`: the timeline's latency over time.
        var recentPushes = LoadRecorder.histogram()
    }

    let state = Mutex(State())

    static func histogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    }

    func record(_ step: String, microseconds: UInt64) {
        state.withLock { s in
            _ = s.latencies[step, default: Self.histogram()].record(max(microseconds, 1))
            if step == "push" { _ = s.recentPushes.record(max(microseconds, 1)) }
        }
    }

    func record(_ step: String, since start: ContinuousClock.Instant) {
        record(step, microseconds: Self.microseconds(start.duration(to: .now)))
    }

    static func microseconds(_ d: Duration) -> UInt64 {
        let (s, atto) = d.components
        return UInt64(max(0, s)) * 1_000_000 + UInt64(max(0, atto)) / 1_000_000_000_000
    }

    func flowStarted() { state.withLock { $0.activeFlows += 1 } }

    /// Flows started and not yet ended.
    var activeFlows: Int { state.withLock { $0.activeFlows } }

    /// Open loop: a flow started `lag` after it was due.
    func started(lag: Duration) {
        let us = Self.microseconds(lag)
        record("startLag", microseconds: us)
        if us > 1_000 { state.withLock { $0.lateStarts += 1 } }
    }

    func notStarted(_ count: Int) { state.withLock { $0.notStarted += count } }

    /// The first failures are kept whole in the report (`failureSamples`), session id included.
    static let failureSampleLimit = 20

    func flowEnded(_ flow: Scenario.Flow, failure: FlowFailure?) {
        state.withLock { s in
            s.activeFlows -= 1
            if let failure {
                s.failed[failure.reason, default: 0] += 1
                s.failedByFlow[flow.rawValue, default: 0] += 1
                if s.failureSamples.count < Self.failureSampleLimit {
                    var sample: [String: JSONValue] = ["flow": .string(flow.rawValue), "reason": .string(failure.reason)]
                    if let session = failure.session { sample["session"] = .string(session) }
                    if let detail = failure.detail { sample["detail"] = .string(detail) }
                    s.failureSamples.append(.object(sample))
                }
            } else {
                s.completed[flow.rawValue, default: 0] += 1
            }
        }
    }

    func connectionError() { state.withLock { $0.connectionErrors += 1 } }
    func protocolError() { state.withLock { $0.protocolErrors += 1 } }

    func frame(push: Bool) {
        state.withLock { s in
            s.framesReceived += 1
            if push { s.pushesReceived += 1 }
        }
    }

    func streamOpened() {
        state.withLock { s in
            s.openStreams += 1
            s.peakOpenStreams = max(s.peakOpenStreams, s.openStreams)
        }
    }

    func streamClosed() { state.withLock { $0.openStreams -= 1 } }

    // MARK: Reports

    struct Progress {
        var completed: Int
        var failed: Int
        var openStreams: Int
        var activeFlows: Int
        var pushes: Int
        var connectionErrors: Int
        var flowP99Ms: Double?
        /// p99 of the pushes received since the previous call (nil if none).
        var recentPushP99Ms: Double?
    }

    /// Counts so far; takes the push latencies recorded since the previous call.
    func progress() -> Progress {
        state.withLock { s in
            let recent = s.recentPushes.totalCount > 0 ? Double(s.recentPushes.valueAtPercentile(99)) / 1000 : nil
            s.recentPushes = Self.histogram()
            return Progress(completed: s.completed.values.reduce(0, +), failed: s.failed.values.reduce(0, +), openStreams: s.openStreams,
                            activeFlows: s.activeFlows, pushes: s.pushesReceived, connectionErrors: s.connectionErrors,
                            flowP99Ms: s.latencies["flow"].map { Double($0.valueAtPercentile(99)) / 1000 }, recentPushP99Ms: recent)
        }
    }

    static let percentiles: [(String, Double)] = [("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)]

    /// The JSON report: `completed`, `failed` (by reason), `durationSeconds`, and per-step latency percentiles in ms.
    func report(scenario: Scenario, url: String, durationSeconds: Double) -> JSONValue {
        state.withLock { s in
            func ms(_ us: UInt64) -> JSONValue { .number((Double(us) / 1000 * 1000).rounded() / 1000) }
            var steps: [String: JSONValue] = [:]
            for (step, h) in s.latencies {
                var o: [String: JSONValue] = ["count": .number(Double(h.totalCount)), "max": ms(h.max), "mean": ms(UInt64(h.mean))]
                for (name, p) in Self.percentiles { o[name] = ms(h.valueAtPercentile(p)) }
                steps[step] = .object(o)
            }
            let completed = s.completed.values.reduce(0, +)
            let failedTotal = s.failed.values.reduce(0, +)
            let seconds = max(durationSeconds, 0.001)
            return [
                "scenario": .string(scenario.name),
                "url": .string(url),
                "clients": .number(Double(scenario.clients)),
                "arrivalsPerSecond": scenario.arrivalsPerSecond.map { .number($0) } ?? .null,
                "lateStarts": .number(Double(s.lateStarts)),
                "notStarted": .number(Double(s.notStarted)),
                "threads": .number(Double(scenario.threads)),
                "durationSeconds": .number((durationSeconds * 1000).rounded() / 1000),
                "completed": .number(Double(completed)),
                "failed": .object(s.failed.mapValues { .number(Double($0)) }),
                "failedTotal": .number(Double(failedTotal)),
                "completedByFlow": .object(s.completed.mapValues { .number(Double($0)) }),
                "failedByFlow": .object(s.failedByFlow.mapValues { .number(Double($0)) }),
                "failureSamples": .array(s.failureSamples),
                "flowsPerSecond": .number((Double(completed) / seconds * 10).rounded() / 10),
                "connectionErrors": .number(Double(s.connectionErrors)),
                "protocolErrors": .number(Double(s.protocolErrors)),
                "framesReceived": .number(Double(s.framesReceived)),
                "pushesReceived": .number(Double(s.pushesReceived)),
                "pushesPerSecond": .number((Double(s.pushesReceived) / seconds * 10).rounded() / 10),
                "framesPerSecond": .number((Double(s.framesReceived) / seconds * 10).rounded() / 10),
                "peakOpenStreams": .number(Double(s.peakOpenStreams)),
                "latencyMs": .object(steps),
            ]
        }
    }

    /// The same report as a human reads it.
    public static func text(_ report: JSONValue) -> String {
        func n(_ key: String) -> String {
            guard let v = report[key]?.doubleValue else { return "-" }
            return v == v.rounded() ? String(Int(v)) : String(v)
        }
        var lines = ["scenario \(report["scenario"]?.stringValue ?? "") against \(report["url"]?.stringValue ?? "")",
                     "duration \(n("durationSeconds")) s, \(n("clients")) clients on \(n("threads")) threads",
                     "flows completed \(n("completed")) (\(n("flowsPerSecond"))/s), failed \(n("failedTotal"))",
                     "pushes \(n("pushesReceived")) (\(n("pushesPerSecond"))/s), frames \(n("framesReceived")) (\(n("framesPerSecond"))/s), peak streams \(n("peakOpenStreams"))",
                     "connection errors \(n("connectionErrors")), protocol errors \(n("protocolErrors"))"]
        if report["arrivalsPerSecond"]?.doubleValue != nil {
            lines.append("open loop: \(n("arrivalsPerSecond")) flows/s due, \(n("lateStarts")) started over 1 ms late, \(n("notStarted")) never started (at most \(n("clients")) in flight)")
        }
        if report["clientCpuSeconds"] != nil { lines.append("client CPU \(n("clientCpuSeconds")) s") }
        if let byFlow = report["completedByFlow"]?.objectValue, !byFlow.isEmpty {
            lines.append("completed by flow: " + byFlow.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.intValue ?? 0)" }.joined(separator: ", "))
        }
        if let failed = report["failed"]?.objectValue, !failed.isEmpty {
            lines.append("failures:")
            for (reason, count) in failed.sorted(by: { ($0.value.intValue ?? 0) > ($1.value.intValue ?? 0) }) {
                lines.append("  \(count.intValue ?? 0)  \(reason)")
            }
        }
        if let steps = report["latencyMs"]?.objectValue {
            let width = max(steps.keys.map(\.count).max() ?? 4, 4)
            func pad(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
            func lpad(_ s: String, _ w: Int) -> String { String(repeating: " ", count: max(0, w - s.count)) + s }
            lines.append("latency (ms)")
            lines.append(pad("step", width) + ["count", "p50", "p90", "p99", "p99.9", "max"].map { lpad($0, 10) }.joined())
            for (step, v) in steps.sorted(by: { $0.key < $1.key }) {
                let cells = ["count", "p50", "p90", "p99", "p99.9", "max"].map { key -> String in
                    guard let d = v[key]?.doubleValue else { return "-" }
                    return key == "count" ? String(Int(d)) : String(format3(d))
                }
                lines.append(pad(step, width) + cells.map { lpad($0, 10) }.joined())
            }
        }
        return lines.joined(separator: "\n")
    }

    static func format3(_ d: Double) -> String {
        let scaled = Int((d * 1000).rounded())
        let frac = String(scaled % 1000)
        return "\(scaled / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }
}
