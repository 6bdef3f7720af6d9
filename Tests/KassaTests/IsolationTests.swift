import Foundation
import KassaCore
@testable import KassaGateway
import KassaStore
@testable import KassaUpstream
import Testing
@testable import kassa

/// One merchant's or client's bad URL must not become everyone's outage.
@Suite("Isolation: upstream origins and the circuit breaker")
struct IsolationTests {
    let client = UpstreamClient()

    @Test("a session on another port of the upstream's host is refused at creation, with a 400 naming the member")
    func otherPortRefused() async throws {
        let t = try TestNode()
        let r = try await t.sessions.createResponse(["viewPaymentSession": "http://127.0.0.1:1/psp/paymentsessions/dead"])
        #expect(r.status == 400)
        #expect(try JSONValue.parse(r.body)["parameter"]?.stringValue == "viewPaymentSession")
        #expect(t.node.gateway.swedbankPay.upstreamCircuitState == "closed")
        await t.stop()
    }

    @Test("the breaker counts what says something about the upstream: 5xx, timeouts and lost connections, not refusals or a URL libcurl rejects")
    func whatCounts() {
        func outcome(_ r: Result<UpstreamResponse, UpstreamError>) -> CircuitBreaker.Outcome { SwedbankPayClient.circuitOutcome(r) }
        func answer(_ status: Int) -> Result<UpstreamResponse, UpstreamError> {
            .success(UpstreamResponse(status: status, headers: [], body: [], duration: 0, reusedConnection: false))
        }
        #expect(outcome(answer(200)) == .success && outcome(answer(404)) == .success && outcome(answer(409)) == .success)
        #expect(outcome(answer(500)) == .failure && outcome(answer(503)) == .failure)
        #expect(outcome(.failure(.timeout)) == .failure && outcome(.failure(.connectFailed("refused"))) == .failure)
        #expect(outcome(.failure(.connectionLost("reset"))) == .failure)
        #expect(outcome(.failure(.invalidRequest("bad URL"))) == .neutral && outcome(.failure(.cancelled)) == .neutral)
        #expect(outcome(.failure(.responseTooLarge(limit: 1))) == .neutral)

        // A neutral trial does not leave a half-open breaker stuck: the next call tries again.
        var breaker = CircuitBreaker(failureThreshold: 1, openSeconds: 10)
        breaker.record(.failure, now: 0)
        #expect(breaker.isOpen)
        let early = breaker.allow(now: 5), trial = breaker.allow(now: 10)
        #expect(!early && trial && breaker.state == .halfOpen)
        breaker.record(.neutral, now: 10)
        let next = breaker.allow(now: 10)
        #expect(next, "a new trial at once")
        breaker.record(.success, now: 10)
        #expect(breaker.state == .closed)
    }

    @Test("failures of calls under way together count once; a call made after a failure counts, and so does a failure a burst apart")
    func burstCountsOnce() {
        var breaker = CircuitBreaker(failureThreshold: 3, openSeconds: 10, burstSeconds: 0.1)
        // Five calls begun together fail within 4 ms of one another (one cause): one failure.
        for k in 0..<5 { breaker.record(.failure, startedAt: 0, now: 1 + Double(k) / 1_000) }
        #expect(breaker.consecutiveFailures == 1 && !breaker.isOpen)
        // A call begun once that failure was known counts, however soon it fails.
        breaker.record(.failure, startedAt: 1.001, now: 1.002)
        #expect(breaker.consecutiveFailures == 2)
        // Calls under way all along (an upstream that stopped answering, each call timing out in
        // turn): one counts per burst. This one comes 48 ms after the last counted failure…
        breaker.record(.failure, startedAt: 0.5, now: 1.05)
        #expect(breaker.consecutiveFailures == 2)
        // …this one 100 ms after it, and opens the breaker.
        let change = breaker.record(.failure, startedAt: 0.5, now: 1.102)
        #expect(change == .open(until: 11.102) && breaker.consecutiveFailures == 3)
        // A call under way when it opened fails later: the opening stands as it was (not
        // extended, not logged again).
        let late = breaker.record(.failure, startedAt: 1.0, now: 2.0)
        #expect(late == nil && breaker.state == .open(until: 11.102))

        // A success starts the count again; a wall clock set back does not hide a failure.
        var other = CircuitBreaker(failureThreshold: 2, openSeconds: 10, burstSeconds: 0.1)
        other.record(.failure, startedAt: 0, now: 100)
        other.record(.success, startedAt: 0, now: 100.01)
        other.record(.failure, startedAt: 0, now: 100.02)
        #expect(other.consecutiveFailures == 1, "the failure after a success counts")
        other.record(.failure, startedAt: 0, now: 40)
        #expect(other.isOpen, "a minute earlier by the clock is not the same burst")
    }

    @Test("an upstream that resets every connection at once opens no breaker; failures one after another still do")
    func resetBurstDoesNotOpen() async throws {
        let hole = try BlackHoleListener()
        // A burst window wider than the default 100 ms: the five failures reach the breaker as
        // the pool resumes their callers, later on a machine busy with other tests.
        let t = try TestNode(upstreamURL: "http://127.0.0.1:\(hole.port)/",
                             configure: { $0.circuitBreaker = CircuitBreaker(failureThreshold: 5, openSeconds: 60, burstSeconds: 2) })
        let upstream = t.node.gateway.swedbankPay
        let together = 5, thenOneByOne = 4
        // The upstream: takes `together` requests, resets their connections at once, then resets
        // each of the next ones as it arrives.
        let served = Task {
            try await onThread { () -> Int in
                var held: [RawSocket] = []
                while held.count < together, let connection = RawSocket(acceptingFrom: hole) {
                    if connection.readHTTPResponse() != nil { held.append(connection) }
                }
                for connection in held { connection.abort() }
                var reset = held.count
                while reset < together + thenOneByOne, let connection = RawSocket(acceptingFrom: hole) {
                    _ = connection.readHTTPResponse()
                    connection.abort()
                    reset += 1
                }
                return reset
            }
        }
        func call() async -> Bool {
            let (result, _, _) = await upstream.send(.init(operation: "probe", method: "GET", url: "http://127.0.0.1:\(hole.port)/psp/x",
                                                           traceID: TraceContext.newTraceID()))
            if case .failure = result { return true } else { return false }
        }
        let failed = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<together { group.addTask { await call() } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(failed == together)
        #expect(upstream.upstreamCircuitState == "closed", "\(together) calls reset together are one failure")
        for _ in 0..<(thenOneByOne - 1) { _ = await call() }
        #expect(upstream.upstreamCircuitState == "closed", "four failures so far")
        _ = await call()
        #expect(upstream.upstreamCircuitState == "open", "the fifth in a row opens it")
        #expect(try await served.value == together + thenOneByOne)
        await t.stop()
    }

    @Test("breakers are kept per origin, and /readyz reports the upstream's when it opens")
    func readyzReportsOpenBreaker() async throws {
        let t = try TestNode(upstreamURL: "http://127.0.0.1:1/", configure: { $0.circuitBreaker = CircuitBreaker(failureThreshold: 3, openSeconds: 60) })
        let upstream = t.node.gateway.swedbankPay
        #expect(upstream.upstreamOrigin == "http://127.0.0.1:1")
        for _ in 0..<3 {
            _ = await upstream.send(.init(operation: "probe", method: "GET", url: "http://127.0.0.1:1/psp/x", traceID: TraceContext.newTraceID()))
        }
        #expect(upstream.upstreamCircuitState == "open")
        let ready = try await client.send(UpstreamRequest(url: t.base + "/readyz"))
        #expect(ready.status == 503)
        let body = try JSONValue.parse(ready.body)
        #expect(body["checks"]?["upstreamCircuit"]?.stringValue == "open")
        #expect(body["detail"]?.stringValue?.contains("circuit breaker open") == true)
        let metrics = try await client.send(UpstreamRequest(url: t.base + "/metrics")).text
        #expect(metrics.contains("kassa_upstream_circuit_open{origin=\"http://127.0.0.1:1\"} 1"))
        await t.stop()
    }

    @Test("after a restart, a stored session whose URL is on no allowed origin is ended, not called again")
    func restartDoesNotRetryForeignOrigins() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        // A session stored by an earlier version, which allowed any port on an allowed host.
        do {
            let store = try Store.open(path: dir.file("kassa.sqlite"))
            try store.insertSessionNow(Store.SessionRecord(id: "0123456789abcdef0123456789abcdef", clientTokenSHA256: "x",
                                                           viewHref: "http://127.0.0.1:1/psp/paymentsessions/dead", payeeReference: nil,
                                                           paymentOrderID: nil, phase: "awaitingInstrument", createdAtMs: 1, updatedAtMs: 1))
            await store.close()
        }
        let t = try TestNode(directory: dir)
        let id = "0123456789abcdef0123456789abcdef"
        await t.node.store.eventLog.flush()
        let events = try t.node.store.eventLog.events(sessionID: id)
        #expect(events.map(\.kind) == ["session.abandoned"])
        #expect(try t.node.store.session(id: id)?.phase == "ended")
        #expect(t.node.gateway.sessions.held(id) == nil)
        #expect(t.node.gateway.swedbankPay.upstreamCircuitState == "closed")
        await t.stop(keepDirectory: true)
    }
}
