import Foundation
import KassaCore
import KassaEdge
@testable import KassaGateway
import KassaStore
import KassaSimulator
import KassaUpstream
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import Tracing
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
        // The client's address is personal data: only its network is kept.
        #expect(events.first?.data?["remote"]?.stringValue == "127.0.0.0/24")
        await t.stop()
    }

    @Test("fixed documents are answered without a task, through the same links, and logged only when refused")
    func fixedDocumentsAnsweredNow() async throws {
        let t = try TestNode()
        let gateway = t.node.gateway
        let key = [("Your-Api-Key", "test-key")]
        // The edge asks respondNow first: a fixed document gets its answer there, anything else nil.
        let root = gateway.respondNow(to: HTTPRequest(method: .GET, path: "/swedbank-pay-mobile/", headers: HTTPHeaders(key)))
        #expect(root?.status == 200 && root?.headers.contains { $0.0 == "x-request-id" } == true)
        #expect(gateway.respondNow(to: HTTPRequest(method: .GET, path: "/kassa.js"))?.status == 200)
        #expect(gateway.respondNow(to: HTTPRequest(method: .GET, path: "/swedbank-pay-mobile/"))?.status == 401, "the key is still checked")
        #expect(gateway.respondNow(to: HTTPRequest(method: .POST, path: "/v1/sessions", headers: HTTPHeaders(key))) == nil)
        #expect(gateway.respondNow(to: HTTPRequest(method: .GET, path: "/readyz")) == nil)

        // Over the wire: the same answers, counted; the event log keeps the refusal only.
        let served = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/", headers: key))
        #expect(served.status == 200 && served.header("cache-control") == "public, max-age=86400")
        #expect(try JSONValue.parse(served.body)["paymentorders"]?.stringValue == "/swedbank-pay-mobile/paymentorders")
        let head = try await client.send(UpstreamRequest(method: "HEAD", url: t.base + "/kassa.js"))
        #expect(head.status == 200 && head.body.isEmpty)
        let refused = try await client.send(UpstreamRequest(url: t.base + "/swedbank-pay-mobile/", headers: [("Your-Api-Key", "wrong")]))
        #expect(refused.status == 401 && refused.header("content-type") == "application/problem+json")
        await t.node.store.eventLog.flush()
        let logged = try t.node.store.eventLog.events().filter { $0.kind == "http.request" }
        #expect(logged.map(\.status) == [401, 401], "\(logged.map(\.summary))")
        let metrics = try await client.send(UpstreamRequest(url: t.base + "/metrics"))
        let text = String(decoding: metrics.body, as: UTF8.self)
        #expect(text.contains(#"kassa_http_requests_total{route="merchant.root",status="200"} 2"#))
        #expect(text.contains(#"kassa_http_requests_total{route="client-kit",status="200"} 2"#))
        await t.stop()
    }

    final class Trace: Sendable {
        let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    /// A link that writes down what it saw, and answers, throws or mends when told to.
    struct Recorder: Middleware {
        let name: String
        let trace: Trace
        var answersOnEnter = false
        var mendsFailure = false

        func enter(_ exchange: Exchange) throws -> HTTPResponse? {
            trace.append("enter \(name)")
            return answersOnEnter ? HTTPResponse(status: 204) : nil
        }

        func leave(_ exchange: Exchange, _ outcome: Result<HTTPResponse, any Error>) throws -> HTTPResponse {
            switch outcome {
            case .success(let response):
                trace.append("leave \(name) \(response.status)")
                return response
            case .failure(let error):
                trace.append("leave \(name) failure")
                if mendsFailure { return HTTPResponse(status: 500) }
                throw error
            }
        }
    }

    @Test("the chain runs its links the same in a task and without one: entered outside in, left inside out, an early answer skips the rest")
    func chainRunsAlike() async throws {
        struct Failed: Error {}
        let exchange = Exchange(request: HTTPRequest(method: .GET, path: "/"), routing: .notFound, requestID: "r", traceID: "t",
                                span: NoOpTracer.NoOpSpan(context: .topLevel), spanID: nil)
        func traces(_ links: (Trace) -> [any Middleware], handler: @escaping @Sendable () throws -> HTTPResponse)
            async -> (task: [String], now: [String], statuses: [Int?]) {
            let inTask = Trace(), now = Trace()
            let a = try? await MiddlewareChain(links: links(inTask)).run(exchange) { _ in
                inTask.append("handler")
                return try handler()
            }
            let b = try? MiddlewareChain(links: links(now)).runNow(exchange) { _ in
                now.append("handler")
                return try handler()
            }
            return (inTask.all, now.all, [a?.status, b?.status])
        }
        let plain = await traces({ [Recorder(name: "a", trace: $0), Recorder(name: "b", trace: $0)] }) { HTTPResponse(status: 200) }
        #expect(plain.task == ["enter a", "enter b", "handler", "leave b 200", "leave a 200"])
        #expect(plain.now == plain.task && plain.statuses == [200, 200])

        let early = await traces({ [Recorder(name: "a", trace: $0), Recorder(name: "b", trace: $0, answersOnEnter: true),
                                    Recorder(name: "c", trace: $0)] }) { HTTPResponse(status: 200) }
        #expect(early.task == ["enter a", "enter b", "leave a 204"], "the link that answered is not left, nor anything inside it")
        #expect(early.now == early.task && early.statuses == [204, 204])

        let mended = await traces({ [Recorder(name: "a", trace: $0), Recorder(name: "b", trace: $0, mendsFailure: true),
                                     Recorder(name: "c", trace: $0)] }) { throw Failed() }
        #expect(mended.task == ["enter a", "enter b", "enter c", "handler", "leave c failure", "leave b failure", "leave a 500"])
        #expect(mended.now == mended.task && mended.statuses == [500, 500])

        let thrown = await traces({ [Recorder(name: "a", trace: $0)] }) { throw Failed() }
        #expect(thrown.task == ["enter a", "handler", "leave a failure"] && thrown.now == thrown.task && thrown.statuses == [nil, nil])
    }
}
