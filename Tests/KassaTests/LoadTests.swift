import Foundation
import KassaCore
@testable import KassaLoad
import KassaSimulator
import Testing
@testable import kassa

/// `kassa load` as an operator runs it: the real binary against a real node.
@Suite("kassa load")
struct LoadTests {
    func runLoad(_ t: TestNode, scenario: String, extra: [String] = []) async throws -> (status: Int32, output: String, report: JSONValue) {
        let file = t.dir.file("scenario-\(UUID().uuidString).json")
        let reportFile = t.dir.file("report-\(UUID().uuidString).json")
        try scenario.write(toFile: file, atomically: true, encoding: .utf8)
        let (status, output) = try await runCommand([kassaBinary, "load", "--url", t.base, "--api-key", "test-key",
                                                     "--scenario", file, "--json", reportFile] + extra)
        let report = try JSONValue.parse(try Data(contentsOf: URL(fileURLWithPath: reportFile)))
        return (status, output, report)
    }

    @Test("every flow, two subscribers per session: all complete, every frame checked, the report has every step")
    func everyFlow() async throws {
        let t = try TestNode()
        let (status, output, report) = try await runLoad(t, scenario: """
            {"name": "all-flows", "clients": 6, "iterations": 3, "threads": 2, "subscribersPerSession": 2,
             "flows": {"swish": 1, "card": 1, "card3ds": 1, "abort": 1, "reconnect": 1, "idle": 1, "ping": 1},
             "idle": {"holdSeconds": 0.3, "pingIntervalSeconds": 0.1}, "ping": {"count": 20, "window": 4},
             "stepThinkMs": {"min": 0, "max": 5}}
            """)
        #expect(status == 0, "\(output)")
        #expect(report["completed"]?.intValue == 18)
        #expect(report["failedTotal"]?.intValue == 0)
        #expect(report["protocolErrors"]?.intValue == 0)
        #expect(report["connectionErrors"]?.intValue == 0)
        let byFlow = report["completedByFlow"]?.objectValue?.values.compactMap(\.intValue).reduce(0, +)
        #expect(byFlow == 18)
        #expect((report["durationSeconds"]?.doubleValue ?? 0) > 0)
        // Its own CPU: more than nothing, and no more than its threads (2) and the runtime's could use in the run.
        let cpu = report["clientCpuSeconds"]?.doubleValue ?? -1
        #expect(cpu > 0 && cpu < 8 * (report["durationSeconds"]?.doubleValue ?? 0), "clientCpuSeconds \(cpu)")
        for step in ["create", "subscribe", "firstEvent", "push", "flow", "ping→pong"] {
            let s = report["latencyMs"]?[step]
            #expect((s?["count"]?.intValue ?? 0) > 0, "no \(step) latencies")
            let p50 = s?["p50"]?.doubleValue ?? -1, p99 = s?["p99"]?.doubleValue ?? -1, max = s?["max"]?.doubleValue ?? -1
            #expect(0 < p50 && p50 <= p99 && p99 <= max, "\(step): \(s?.text ?? "")")
        }
        // Two subscribers per session: the pushes counted are twice what one client sees.
        #expect((report["pushesReceived"]?.intValue ?? 0) >= 2 * 18)
        #expect(output.contains("latency (ms)") && output.contains("flows completed 18"))
        // The gateway saw it all: every session of the run is in its store.
        let rows = try await t.node.gateway.store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sessions") }
        #expect(rows == 18)
        await t.stop()
    }

    @Test("push latency counts only pushes made after the subscriber's stream opened, not the replays late observers read")
    func replaysAreNotPushLatencies() async throws {
        let t = try TestNode()
        // Card flows, three subscribers opened one after another: each reads PaymentSessionFetched
        // and PaymentSessionComplete, but the later two read Fetched as a replay.
        let (status, output, report) = try await runLoad(t, scenario: """
            {"name": "observers", "clients": 2, "iterations": 3, "subscribersPerSession": 3, "flows": {"card": 1}}
            """)
        #expect(status == 0, "\(output)")
        let sessions = report["completed"]?.intValue ?? 0
        #expect(sessions == 6)
        #expect(report["pushesReceived"]?.intValue == sessions * 3 * 2)
        let timed = report["latencyMs"]?["push"]?["count"]?.intValue ?? 0
        // Every Complete (made after all three opened), and at most the first subscriber's Fetched.
        #expect(timed >= sessions * 3 && timed <= sessions * 4, "\(timed) push latencies for \(sessions) sessions")
        await t.stop()
    }

    @Test("a flow that does not reach its end is a failure with its reason, and the exit status says so")
    func failuresByReason() async throws {
        let t = try TestNode()
        t.simulator.setFaults([FaultRule(route: "sessions.payment", fault: .status(503))])
        let (status, _, report) = try await runLoad(t, scenario: """
            {"name": "broken-upstream", "clients": 2, "iterations": 1, "flows": {"swish": 1}, "stepTimeoutSeconds": 10}
            """)
        #expect(status == 2)
        #expect(report["completed"]?.intValue == 0)
        #expect(report["failed"]?["unexpected SdkProblemOccurred while waiting for PaymentSessionComplete"]?.intValue == 2)
        // Each failure is also kept whole, with the session it was on, to find in the event log.
        let samples = report["failureSamples"]?.arrayValue ?? []
        #expect(samples.count == 2 && samples.allSatisfy { $0["flow"]?.stringValue == "swish" })
        let sessions = Set(samples.compactMap { $0["session"]?.stringValue })
        #expect(sessions.count == 2, "\(samples)")
        for id in sessions { #expect(try t.node.store.session(id: id) != nil, "a session the gateway holds: \(id)") }
        await t.stop()
    }

    @Test("the client asks for the open files its scenario holds at once, not the machine's whole limit")
    func openFilesFollowTheScenario() throws {
        let push = try Scenario(json: #"{"clients": 40, "iterations": 1, "flows": {"card3ds": 1}, "subscribersPerSession": 16}"#)
        #expect(push.openFilesWanted >= 40 * 17 && push.openFilesWanted < 2_000, "\(push.openFilesWanted)")
        let idle = try Scenario(json: #"{"clients": 15000, "iterations": 1, "flows": {"idle": 1}}"#)
        #expect(idle.openFilesWanted >= 15_000 * 2)
        let tiny = try Scenario(json: #"{"clients": 1, "iterations": 1, "flows": {"swish": 1}}"#)
        #expect(tiny.openFilesWanted == 1_024)
    }

    @Test("a step that outlives its timeout fails the flow as a timeout, and the stream is closed for it")
    func stepTimeout() async throws {
        // 10 s a step: at 5 s, a create timed out now and then while the whole suite kept both cores busy.
        // The node's own upstream timeout is longer than the step's, so the client's timeout is what ends the flow
        // (at an equal 10 s, the node's problem push won the race now and then).
        let t = try TestNode(upstreamTimeoutMs: 30_000)
        t.simulator.setFaults([FaultRule(route: "sessions.payment", fault: .latency(ms: 40_000))])
        let (status, output, report) = try await runLoad(t, scenario: """
            {"name": "slow-upstream", "clients": 2, "iterations": 1, "flows": {"swish": 1}, "stepTimeoutSeconds": 10}
            """)
        #expect(status == 2)
        #expect(report["completed"]?.intValue == 0)
        let reasons = report["failed"]?.objectValue ?? [:]
        #expect(reasons.count == 1 && reasons.keys.allSatisfy { $0.hasPrefix("timeout waiting for") }, "\(output)")
        #expect(reasons.values.compactMap(\.intValue).reduce(0, +) == 2)
        await t.stop()
    }

    @Test("a wrong API key fails every flow at create with its status")
    func wrongKey() async throws {
        let t = try TestNode()
        let file = t.dir.file("s.json")
        try #"{"clients": 2, "iterations": 2, "flows": {"card": 1}}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let (status, output) = try await runCommand([kassaBinary, "load", "--url", t.base, "--api-key", "nope", "--scenario", file])
        #expect(status == 2)
        #expect(output.contains("4  create answered 401"), "\(output)")
        await t.stop()
    }

    @Test("scenarios are bounded and checked; targets are loopback unless allowed", arguments: [
        (#"{"clients": 1, "flows": {"swish": 1}}"#, "bounded"),
        (#"{"clients": 1, "iterations": 1, "flows": {"teleport": 1}}"#, "unknown flow teleport"),
        (#"{"clients": 100000, "iterations": 1, "flows": {"swish": 1}}"#, "clients must be"),
        (#"{"clients": 1, "iterations": 1, "flows": {"swish": 0}}"#, "at least one flow"),
        (#"{"clients": 1, "iterations": 1, "flows": {"swish": 1}, "surprise": 1}"#, "unknown scenario field surprise"),
        (#"[1, 2]"#, "JSON object"),
        (#"{"clients": 1, "iterations": 5, "arrivalsPerSecond": 10, "flows": {"card": 1}}"#, "durationSeconds alone"),
        (#"{"clients": 1, "durationSeconds": 1, "arrivalsPerSecond": 0, "flows": {"card": 1}}"#, "arrivalsPerSecond must be"),
    ])
    func scenarioChecks(_ json: String, _ message: String) throws {
        #expect(throws: Scenario.Invalid.self) { try Scenario(json: json) }
        do { _ = try Scenario(json: json) } catch { #expect(error.description.contains(message), "\(error.description)") }
    }

    @Test("open loop: flows start on their schedule, whatever the answers' pace, and a flow held back by the in-flight cap counts its wait as latency")
    func openLoop() async throws {
        let t = try TestNode()
        // 40 flows due over 2 s, room for all in flight: each starts on time.
        let (status, output, report) = try await runLoad(t, scenario: """
            {"name": "open", "clients": 500, "durationSeconds": 2, "arrivalsPerSecond": 20, "flows": {"card": 1}}
            """)
        #expect(status == 0, "\(output)")
        #expect(report["arrivalsPerSecond"]?.doubleValue == 20)
        #expect(report["completed"]?.intValue == 40, "flows due at 0, 50 ms, … 1950 ms")
        #expect(report["latencyMs"]?["startLag"]?["count"]?.intValue == 40)
        #expect(output.contains("open loop: 20 flows/s due"), "\(output)")

        // One flow in flight at most, one due every millisecond (a card flow takes longer): each
        // waits for the one before it, and its latency counts from when it was due, so it grows
        // past any single flow's own time.
        let (capped, cappedOutput, cappedReport) = try await runLoad(t, scenario: """
            {"name": "capped", "clients": 1, "durationSeconds": 1, "arrivalsPerSecond": 1000, "flows": {"card": 1}}
            """)
        #expect(capped == 0, "\(cappedOutput)")
        let completed = cappedReport["completed"]?.intValue ?? 0
        #expect(completed > 0 && completed < 1000)
        #expect((cappedReport["lateStarts"]?.intValue ?? 0) >= completed - 1, "every flow but the first waited for a slot")
        // The waits pile up (a flow is due every millisecond), and a flow's latency holds its wait:
        // timed from its start instead, the longest flow would be shorter than the longest wait.
        let flowMax = cappedReport["latencyMs"]?["flow"]?["max"]?.doubleValue ?? 0
        let lagMax = cappedReport["latencyMs"]?["startLag"]?["max"]?.doubleValue ?? .infinity
        #expect(lagMax > 50 && flowMax >= lagMax, "flow max \(flowMax) ms, lag max \(lagMax) ms")
        await t.stop()
    }

    @Test("card flows complete through a gateway whose upstream is the canned one, the benchmark's stand-in")
    func cannedUpstream() async throws {
        let canned = try await CannedUpstream.start(token: "upstream-secret")
        let t = try TestNode(upstreamURL: canned.baseURL)
        let (status, output, report) = try await runLoad(t, scenario: """
            {"name": "canned", "clients": 4, "iterations": 5, "flows": {"card": 1}}
            """)
        #expect(status == 0, "\(output)")
        #expect(report["completed"]?.intValue == 20)
        #expect(report["failedTotal"]?.intValue == 0)
        // Twenty payment orders, each with its own id.
        let orders = try await t.node.gateway.store.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(DISTINCT summary) FROM events WHERE kind = 'paymentorder.created'")
        }
        #expect(orders == 20)
        await t.stop()
        await canned.stop()
    }

    @Test("push stamps: milliseconds by default, microseconds with --push-stamps us; the event log keeps the millisecond")
    func pushStamps() async throws {
        let pattern = #/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.(\d{3}|\d{6})Z$/#
        for micro in [false, true] {
            let t = try TestNode { $0.pushStampsInMicroseconds = micro }
            let (session, stream) = try await t.sessions.fetched()
            let live = try #require(stream.received.first { $0["type"]?.stringValue == "PaymentSessionFetched" })
            let replayed = try await t.sessions.stream(session, since: 0).event(.paymentSessionFetched)
            let at = live["at"]?.stringValue ?? "", replayAt = replayed["at"]?.stringValue ?? ""
            #expect(at.wholeMatch(of: pattern)?.1.count == (micro ? 6 : 3), "\(at)")
            // A replay from memory is the same frame; the event log keeps the stamp's millisecond.
            #expect(replayAt == at)
            await t.node.store.eventLog.flush()
            let logged = try t.node.store.eventLog.events().first { $0.kind == "push.sent" }
            #expect(logged.map { Timestamp.iso8601(ms: $0.atMs) } == String(at.prefix(23)) + "Z", "\(at)")
            await t.stop()
        }
    }

    @Test("targets off loopback need --allow-remote")
    func loopbackOnly() throws {
        #expect(throws: Scenario.Invalid.self) { try LoadRunner.Target(url: "http://192.0.2.1:8080", allowRemote: false) }
        #expect(throws: Scenario.Invalid.self) { try LoadRunner.Target(url: "https://127.0.0.1:8080", allowRemote: false) }
        let remote = try LoadRunner.Target(url: "http://192.0.2.1:8080/", allowRemote: true)
        #expect(remote.port == 8080 && remote.base == "http://192.0.2.1:8080")
        let local = try LoadRunner.Target(url: "http://localhost:9", allowRemote: false)
        #expect(local.host == "127.0.0.1")
    }

    @Test("stream frames are read from their bytes: a push's members, an answer's id as text or number, a refusal's problem, and what is no object")
    func streamFrames() throws {
        let push = try #require(StreamFrame.read(#"{"seq":7,"session":"s1","type":"PaymentSessionFetched","at":"2026-11-26T10:00:00.123456Z","data":{"availableInstruments":[{"type":"Swish"},{"type":"CreditCard"}]}}"#))
        #expect(!push.hasRe && push.seq == 7 && push.session == "s1" && push.type == "PaymentSessionFetched" && push.at == "2026-11-26T10:00:00.123456Z")
        let answer = try #require(StreamFrame.read(#"{"re":12,"ok":true,"type":"pong"}"#))
        #expect(answer.hasRe && answer.re == "12" && answer.ok == true && answer.type == "pong")
        let refused = try #require(StreamFrame.read(#"{"re":"attempt","ok":false,"problem":{"type":"urn:kassa:problem:conflict","detail":"x"}}"#))
        #expect(refused.re == "attempt" && refused.ok == false && refused.problemType == "urn:kassa:problem:conflict")
        let unnamed = try #require(StreamFrame.read(#"{"re":null,"ok":false}"#))
        #expect(unnamed.hasRe && unnamed.re == nil)
        for bad in ["[1,2]", "\"text\"", "{\"seq\":1,", "not json", #"{"type":"a","type":"b"}"#] {
            #expect(StreamFrame.read(bad) == nil, "\(bad)")
        }
    }

    @Test("timestamps: written and read back to the millisecond, with the calendar's edges")
    func timestamps() {
        for ms: Int64 in [0, 951_782_400_000, 1_795_394_161_123, 4_102_444_799_999, 1_709_164_800_000] {
            let text = Timestamp.iso8601(ms: ms)
            #expect(Timestamp.parseISO8601(text) == ms, "\(text)")
            // Foundation agrees where a double holds the instant exactly (it rounds .123 down to .122 otherwise).
            let whole = ms / 1000 * 1000
            #expect(Timestamp.iso8601(ms: whole) == Date(timeIntervalSince1970: Double(whole) / 1000).formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        }
        #expect(Timestamp.parseISO8601("2026-11-23T00:36:01Z") == 1_795_394_161_000)
        #expect(Timestamp.parseISO8601("2026-11-23T00:36:01.5Z") == 1_795_394_161_500)
        // Found by the fuzzer: a long fraction overflowed; now only ms are read and at most 9 digits accepted.
        #expect(Timestamp.parseISO8601("2026-11-23T00:36:01.123456789Z") == 1_795_394_161_123)
        #expect(Timestamp.parseISO8601("2026-11-23T00:36:01.99999999999999999999999Z") == nil)
        for bad in ["", "2026-11-23", "2026-13-01T00:00:00Z", "2026-11-23T00:36:01+01:00", "2026-11-23T00:36:01.Z", "2026-11-23T0a:36:01Z"] {
            #expect(Timestamp.parseISO8601(bad) == nil, "\(bad)")
            #expect(Timestamp.parseISO8601Microseconds(bad) == nil, "\(bad)")
        }
        // Microseconds: written with six digits, read back exactly; a millisecond reader truncates them.
        for us: Int64 in [0, 1, 999_999, 1_795_394_161_123_456, 4_102_444_799_999_999, -1, -1_000_001] {
            let text = Timestamp.iso8601(us: us)
            #expect(Timestamp.parseISO8601Microseconds(text) == us, "\(text)")
            #expect(Timestamp.parseISO8601(text) == (us >= 0 ? us / 1000 : (us - 999) / 1000), "\(text)")
        }
        #expect(Timestamp.iso8601(us: 1_795_394_161_123_456) == "2026-11-23T00:36:01.123456Z")
        #expect(Timestamp.iso8601(us: -1) == "1969-12-31T23:59:59.999999Z")
        #expect(Timestamp.parseISO8601Microseconds("2026-11-23T00:36:01.5Z") == 1_795_394_161_500_000)
        #expect(Timestamp.parseISO8601Microseconds("2026-11-23T00:36:01.123456789Z") == 1_795_394_161_123_456)
    }
}
