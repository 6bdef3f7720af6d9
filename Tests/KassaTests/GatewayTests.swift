import Foundation
import KassaCore
import KassaEdge
@testable import KassaGateway
import KassaStore
import KassaSimulator
import KassaUpstream
import Logging
import ServiceLifecycle
import Testing
@testable import kassa

@Suite("Gateway: operations routes and problems")
struct GatewayTests {
    let client = UpstreamClient()

    @Test("/healthz answers, unknown routes get 404 problems, wrong methods 405 with Allow")
    func routesAndProblems() async throws {
        let t = try TestNode()
        let health = try await client.send(UpstreamRequest(url: t.base + "/healthz"))
        #expect(health.status == 200)
        #expect(try JSONValue.parse(health.body)["status"]?.stringValue == "ok")

        let missing = try await client.send(UpstreamRequest(url: t.base + "/no/such/thing"))
        #expect(missing.status == 404)
        #expect(missing.header("content-type") == Problem.contentType)
        let problem = try JSONValue.parse(missing.body)
        #expect(problem["type"]?.stringValue == "urn:kassa:problem:not-found")
        #expect(problem["instance"]?.stringValue?.hasPrefix("urn:kassa:request:") == true)

        let wrong = try await client.send(UpstreamRequest(method: "DELETE", url: t.base + "/healthz"))
        #expect(wrong.status == 405)
        #expect(wrong.header("allow") == "GET")
        #expect(try JSONValue.parse(wrong.body)["type"]?.stringValue == "urn:kassa:problem:method-not-allowed")
        await t.stop()
    }

    @Test("operation links are followed only to the upstream's origin (scheme, host and port), as libcurl reads them")
    func upstreamAllowList() async throws {
        let t = try TestNode()
        let gateway = t.node.gateway
        let port = try #require(UpstreamURL(t.simulator.baseURL)?.port)
        #expect(gateway.swedbankPay.isAllowed("http://127.0.0.1:\(port)/psp/paymentorders/1"))
        #expect(gateway.swedbankPay.isAllowed("HTTP://127.0.0.1:\(port)/x"))
        #expect(!gateway.swedbankPay.isAllowed("http://127.0.0.1:1/psp/paymentorders/1"), "another port on the same host")
        #expect(!gateway.swedbankPay.isAllowed("http://127.0.0.1/x"), "the scheme's default port is another port")
        #expect(!gateway.swedbankPay.isAllowed("https://127.0.0.1:\(port)/x"), "another scheme")
        #expect(!gateway.swedbankPay.isAllowed("http://127.0.0.1@evil.example/psp"))
        #expect(!gateway.swedbankPay.isAllowed("ftp://127.0.0.1/psp"))
        #expect(!gateway.swedbankPay.isAllowed("http://evil.example/?h=127.0.0.1"))
        #expect(!gateway.swedbankPay.isAllowed("/psp/paymentorders/1"))
        await t.stop()
    }

    @Test("/readyz reports the store and an unreachable upstream")
    func readiness() async throws {
        let down = try TestNode(upstreamURL: "http://127.0.0.1:1/")
        let notReady = try await client.send(UpstreamRequest(url: down.base + "/readyz"))
        #expect(notReady.status == 503)
        let body = try JSONValue.parse(notReady.body)
        #expect(body["checks"]?["store"]?.stringValue == "ok")
        #expect(body["checks"]?["upstream"]?.stringValue == "unreachable")

        // The embedded simulator is reachable.
        let up = try TestNode()
        let ready = try await client.send(UpstreamRequest(url: up.base + "/readyz"))
        #expect(ready.status == 200)
        let readyBody = try JSONValue.parse(ready.body)
        #expect(readyBody["status"]?.stringValue == "ready")
        #expect(readyBody["checks"]?["store"]?.stringValue == "ok" && readyBody["checks"]?["upstreamCircuit"]?.stringValue == "closed")
        await down.stop(); await up.stop()
    }

    @Test("every request is written to the event log with its route and status")
    func requestsAreLogged() async throws {
        let t = try TestNode()
        _ = try await client.send(UpstreamRequest(url: t.base + "/no/such/thing", headers: [("X-Request-Id", "abc-123")]))
        await t.node.store.eventLog.flush()
        let events = try t.node.store.eventLog.events().filter { $0.kind == "http.request" }
        #expect(events.count == 1)
        #expect(events.first?.status == 404)
        #expect(events.first?.data?["requestId"]?.stringValue == "abc-123")
        #expect(events.first.map { TraceContext.isTraceID($0.traceID ?? "") } == true)
        #expect(events.first?.data?["path"]?.stringValue == "/no/such/thing")
        await t.stop()
    }
}
