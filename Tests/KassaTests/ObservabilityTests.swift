import Foundation
import KassaCore
import KassaUpstream
import Logging
import Testing
@testable import kassa
@testable import KassaGateway
@testable import KassaLoad

/// Metrics, dashboards, alert rules and the docker files, checked against a real scrape.
@Suite("Observability")
struct ObservabilityTests {
    let client = UpstreamClient()

    func run(_ arguments: [String], input: String? = nil) async throws -> (Int32, String) {
        try await runCommand(arguments, input: input)
    }

    func scrapeAfterFlow(_ t: TestNode) async throws -> (String, SessionClient.Created) {
        let (session, stream) = try await t.sessions.fetched()
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "Swish", "msisdn": "+46739000001"]])
        _ = try await stream.event(.paymentSessionComplete)
        stream.connection.close()
        // Twice: a series recorded again adds to the same handle (the gateway keeps its handles).
        for _ in 0..<2 { _ = try await client.send(UpstreamRequest(url: t.base + "/nope")) }
        await t.node.store.eventLog.flush()
        // The stream's close reaches the gateway on its own time: scrape once it has been counted.
        var scrape = try await client.send(UpstreamRequest(url: t.base + "/metrics"))
        var waited = 0
        while !scrape.text.contains("kassa_websocket_closed_total{"), waited < 100 {
            waited += 1
            try await Task.sleep(for: .milliseconds(50))
            scrape = try await client.send(UpstreamRequest(url: t.base + "/metrics"))
        }
        #expect(scrape.status == 200)
        #expect(scrape.header("content-type")?.hasPrefix("text/plain; version=0.0.4") == true)
        return (scrape.text, session)
    }

    @Test("a real scrape after a flow passes promtool and shows the flow, with no session id in any label")
    func scrape() async throws {
        let t = try TestNode()
        let (text, session) = try await scrapeAfterFlow(t)
        let (status, output) = try await run(["promtool", "check", "metrics"], input: text)
        #expect(status == 0, "promtool: \(output)")
        #expect(text.contains(#"kassa_http_requests_total{route="sessions.create",status="201"} 1"#))
        #expect(text.contains(#"kassa_http_requests_total{route="unmatched",status="404"} 2"#))
        #expect(text.contains(#"kassa_pushes_total{type="PaymentSessionComplete"} 1"#))
        #expect(text.contains(#"kassa_sessions{state="completed"} 1"#))
        #expect(text.contains(#"kassa_upstream_requests_total{operation="start-payment-attempt",status="200"} 1"#))
        #expect(text.contains(#"kassa_problems_total{type="urn:kassa:problem:not-found"} 2"#))
        #expect(text.contains("kassa_push_latency_seconds_count"))
        let lines = text.split(separator: "\n")
        /// A sample line's value (its last field).
        func value(_ line: Substring) -> Double? { Double(line.split(separator: " ").last ?? "") }
        /// The value of an unlabelled series.
        func sample(_ name: String) -> Double? { lines.first { $0.hasPrefix(name + " ") }.flatMap(value) }
        // Each push's wait for its commit is counted once, and is part of its latency (one subscriber: one frame a push).
        let pushes = lines.filter { $0.hasPrefix("kassa_pushes_total{") }.compactMap(value).reduce(0, +)
        #expect(pushes >= 2 && sample("kassa_push_commit_wait_seconds_count") == pushes)
        #expect(sample("kassa_push_latency_seconds_count") == pushes)
        #expect((sample("kassa_push_commit_wait_seconds_sum") ?? .infinity) <= (sample("kassa_push_latency_seconds_sum") ?? 0))
        #expect(text.contains("kassa_eventlog_batch_size_count"))
        #expect(text.contains("kassa_process_resident_memory_bytes"))
        // SQLite's memory is counted (its page caches hold the flow's pages now).
        let sqliteBytes = sample("kassa_sqlite_memory_bytes") ?? 0
        #expect(sqliteBytes > 10_000, "kassa_sqlite_memory_bytes \(sqliteBytes)")
        // Each kind of reader's series is there before its first read (the store's tests time the reads).
        for reader in ["eventlog", "checkpoint", "other"] {
            #expect(lines.contains { $0.hasPrefix("kassa_sqlite_read_seconds_count{reader=\"\(reader)\"} ") }, "no read series for \(reader)")
        }
        // The threads' times: the edge ran, and all of them together ran no longer than the process
        // has (a unit wrong by 1 000 would break either), read after the scrape.
        func threadSeconds(_ name: String) -> [String: Double] {
            Dictionary(lines.filter { $0.hasPrefix(name + "{thread=\"") }.compactMap { line in
                line.split(separator: "\"").dropFirst().first.flatMap { label in value(line).map { (String(label), $0) } }
            }, uniquingKeysWith: +)
        }
        let onCPU = threadSeconds("kassa_thread_cpu_seconds_total")
        let processSeconds = LoadRunner.processCPUSeconds()
        #expect((onCPU["kassa-edge"] ?? 0) > 0, "\(onCPU)")
        #expect(onCPU["swift-pool"] != nil && threadSeconds("kassa_thread_cpu_wait_seconds_total")["kassa-eventlog"] != nil)
        #expect(onCPU.values.reduce(0, +) <= processSeconds + 0.05, "threads \(onCPU.values.reduce(0, +)) s, process \(processSeconds) s")
        for name in KassaMetricsNames.all { #expect(text.contains("# TYPE \(name) "), "\(name) is not exported") }
        #expect(!text.contains(session.id), "a session id became a label")
        await t.stop()
    }

    @Test("threads are grouped by name, read from schedstat, and counted by what each added since the last scrape")
    func threadTimes() throws {
        #expect(ThreadTimes.group(ofThreadNamed: "kassa-edge") == "kassa-edge")
        #expect(ThreadTimes.group(ofThreadNamed: "oot.default-qos") == "swift-pool")
        #expect(ThreadTimes.group(ofThreadNamed: "-qos.overcommit") == "swift-pool")
        #expect(ThreadTimes.group(ofThreadNamed: "kassa") == "other")
        #expect(ThreadTimes.parse(schedstat: "123 456 7\n") == ThreadTimes(onCPUNanoseconds: 123, waitingNanoseconds: 456))
        #expect(ThreadTimes.parse(schedstat: "123") == nil)
        #expect(ThreadTimes.parse(schedstat: "-1 2 3") == nil)
        #expect(ThreadTimes.current().values.contains { $0.times.onCPUNanoseconds > 0 })

        let metrics = KassaMetrics()
        func reading(_ threads: [Int: (String, UInt64, UInt64)]) -> () -> [Int: (group: String, times: ThreadTimes)] {
            { threads.mapValues { ($0.0, ThreadTimes(onCPUNanoseconds: $0.1, waitingNanoseconds: $0.2)) } }
        }
        func counted(_ name: String) -> Double? {
            metrics.registry.emitToString().split(separator: "\n").first { $0.hasPrefix(name + "{thread=\"swift-pool\"} ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        // Thread 1 runs; thread 2 starts; thread 1 ends and a new thread gets its id, with less time
        // than it had (all of that counts); that one ends (what it ran since the last scrape is
        // lost) and the id comes back once more.
        metrics.recordThreadTimes(reading([1: ("swift-pool", 100_000, 1_000)]))
        metrics.recordThreadTimes(reading([1: ("swift-pool", 150_000, 3_000), 2: ("swift-pool", 40_000, 500)]))
        metrics.recordThreadTimes(reading([1: ("swift-pool", 5_000, 100), 2: ("swift-pool", 60_000, 700)]))
        metrics.recordThreadTimes(reading([2: ("swift-pool", 70_000, 700)]))
        metrics.recordThreadTimes(reading([1: ("swift-pool", 2_000, 0), 2: ("swift-pool", 70_000, 700)]))
        let onCPU = try #require(counted("kassa_thread_cpu_seconds_total"))
        let waiting = try #require(counted("kassa_thread_cpu_wait_seconds_total"))
        #expect(abs(onCPU - 227_000e-9) < 1e-12, "\(onCPU)")
        #expect(abs(waiting - 3_800e-9) < 1e-12, "\(waiting)")
    }

    @Test("dashboards and alert rules use only exported metrics; promtool accepts the rules; docker files agree")
    func opsFiles() async throws {
        let t = try TestNode()
        let (text, _) = try await scrapeAfterFlow(t)
        let scrapeFile = t.dir.file("scrape.txt")
        try text.write(toFile: scrapeFile, atomically: true, encoding: .utf8)
        let root = testsPath("..")
        let (rulesStatus, rulesOutput) = try await run(["promtool", "check", "rules", root + "/dashboards/alerts.yml"])
        #expect(rulesStatus == 0, "\(rulesOutput)")
        let (status, output) = try await runPython([testsPath("python/check_ops_files.py"), root, scrapeFile])
        #expect(status == 0, "\(output)")
        #expect(output.contains("checks passed"))
        await t.stop()
    }

    @Test("log lines are JSON with level, message, session id and trace id")
    func logLines() async throws {
        let t = try TestNode()
        let (session, stream) = try await t.sessions.fetched()
        stream.connection.close()
        let lines = t.logs.text.split(separator: "\n").compactMap { try? JSONValue.parse(String($0)) }
        #expect(!lines.isEmpty)
        #expect(lines.allSatisfy { $0["level"] != nil && $0["message"] != nil && $0["at"] != nil })
        let sessionLines = lines.filter { $0["session_id"]?.stringValue == session.id }
        #expect(!sessionLines.isEmpty)
        #expect(sessionLines.allSatisfy { TraceContext.isTraceID($0["trace_id"]?.stringValue ?? "") })
        #expect(!t.logs.text.contains(session.token))
        await t.stop()
    }

    @Test("at the info level a payment's log lines are its end, not each phase on the way; at debug, every phase")
    func sessionPhaseLines() async throws {
        for level in [Logger.Level.info, .debug] {
            let t = try TestNode(logLevel: level)
            let (session, stream) = try await t.sessions.fetched()
            try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-frictionless"]])
            _ = try await stream.event(PushType.paymentSessionComplete)
            stream.connection.close()
            await t.stop()
            let lines: [JSONValue] = t.logs.text.split(separator: "\n").compactMap { try? JSONValue.parse(String($0)) }
            var phases: [String] = []
            for line in lines where line["session_id"]?.stringValue == session.id {
                guard let message = line["message"]?.stringValue, message.hasPrefix("session ") else { continue }
                phases.append((line["level"]?.stringValue ?? "") + " " + message)
            }
            if level == .info {
                #expect(phases == ["info session completed"])
            } else {
                #expect(phases == ["debug session awaitingInstrument", "debug session attempting", "info session completed"])
            }
        }
    }

    @Test("the circuit breaker opens after repeated failures, fails fast, and closes after a good trial")
    func circuitBreaker() {
        var breaker = CircuitBreaker(failureThreshold: 3, openSeconds: 10)
        var allowed: [Bool] = []
        for i in 0..<3 {
            allowed.append(breaker.allow(now: Double(i)))
            breaker.record(success: false, now: Double(i))
        }
        #expect(allowed == [true, true, true])
        #expect(breaker.isOpen)
        let whileOpen = breaker.allow(now: 5)
        #expect(!whileOpen, "open: fail fast")
        let trial = breaker.allow(now: 13)
        #expect(trial, "after openSeconds one trial goes through")
        let second = breaker.allow(now: 13.1)
        #expect(!second, "only one trial at a time")
        let change = breaker.record(success: true, now: 13.2)
        #expect(change == .closed)
        let afterClose = breaker.allow(now: 14)
        #expect(afterClose)
        breaker.record(success: false, now: 15)
        #expect(!breaker.isOpen, "one failure after a success does not open it")
    }
}

enum KassaMetricsNames {
    static var all: [String] { KassaMetrics.catalogue.map(\.name) }
}
