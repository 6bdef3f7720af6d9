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
