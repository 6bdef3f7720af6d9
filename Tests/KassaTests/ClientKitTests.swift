import Foundation
import KassaClient
import KassaCore
@testable import KassaGateway
import KassaUpstream
import Testing
@testable import kassa

/// What clients build on: browser access (CORS, Origin on upgrades), token lifetimes, and the
/// Swift client library against a running gateway.
@Suite("Client kit", .timeLimit(.minutes(1)))
struct ClientKitTests {
    static let shop = "https://shop.example"

    func request(_ t: TestNode, _ method: String, _ path: String, _ headers: [(String, String)]) async throws -> UpstreamResponse {
        try await t.sessions.client.send(UpstreamRequest(method: method, url: t.base + path, headers: headers))
    }

    func metrics(_ t: TestNode) async throws -> String { try await request(t, "GET", "/metrics", []).text }

    static func header(_ r: UpstreamResponse, _ name: String) -> String? {
        r.headers.first { $0.0.lowercased() == name }?.1
    }

    @Test("CORS: the client endpoints answer the listed origins, preflight included; merchant and admin endpoints never do")
    func corsOnlyForClientEndpoints() async throws {
        let t = try TestNode { $0.corsOrigins = [Self.shop, "http://localhost:3000"] }
        let s = try await t.sessions.create()
        let preflight = { (path: String, origin: String, method: String) in
            try await self.request(t, "OPTIONS", path, [("Origin", origin), ("Access-Control-Request-Method", method),
                                                         ("Access-Control-Request-Headers", "authorization, content-type")])
        }
        let allowed = try await preflight("/v1/sessions/\(s.id)/abort", Self.shop, "POST")
        #expect(allowed.status == 204)
        #expect(Self.header(allowed, "access-control-allow-origin") == Self.shop)
        #expect(Self.header(allowed, "access-control-allow-headers")?.contains("authorization") == true)
        #expect(Self.header(allowed, "access-control-allow-methods")?.contains("POST") == true)
        #expect(try await preflight("/v1/sessions/\(s.id)", "http://localhost:3000", "GET").status == 204, "a listed origin with its port")

        for (path, origin, method) in [("/v1/sessions/\(s.id)/abort", "https://evil.example", "POST"),
                                       ("/v1/sessions/\(s.id)/abort", "https://shop.example.evil.example", "POST"),
                                       ("/v1/sessions", Self.shop, "POST"),
                                       ("/v1/admin/events", Self.shop, "GET"),
                                       ("/swedbank-pay-mobile/paymentorders", Self.shop, "POST")] {
            let refused = try await preflight(path, origin, method)
            #expect(refused.status == 403, "\(method) \(path) from \(origin)")
            #expect(Self.header(refused, "access-control-allow-origin") == nil, "\(path) from \(origin)")
        }

        let read = try await request(t, "GET", "/v1/sessions/\(s.id)", [("Origin", Self.shop), ("Authorization", "Bearer \(s.token)")])
        #expect(read.status == 200)
        #expect(Self.header(read, "access-control-allow-origin") == Self.shop)
        let wrongToken = try await request(t, "GET", "/v1/sessions/\(s.id)", [("Origin", Self.shop), ("Authorization", "Bearer nope")])
        #expect(wrongToken.status == 401)
        #expect(Self.header(wrongToken, "access-control-allow-origin") == Self.shop, "the page can read why it was refused")
        let other = try await request(t, "GET", "/v1/sessions/\(s.id)", [("Origin", "https://evil.example"), ("Authorization", "Bearer \(s.token)")])
        #expect(Self.header(other, "access-control-allow-origin") == nil)
        let admin = try await request(t, "GET", "/v1/admin/events", [("Origin", Self.shop), ("Authorization", "Bearer test-admin")])
        #expect(admin.status == 200)
        #expect(Self.header(admin, "access-control-allow-origin") == nil, "the admin endpoints never answer CORS")
        let create = try await t.sessions.client.send(UpstreamRequest(
            method: "POST", url: t.base + "/v1/sessions",
            headers: [("Origin", Self.shop), ("Your-Api-Key", "test-key"), ("Content-Type", "application/json")],
            body: (["paymentOrder": SessionClient.order()] as JSONValue).bytes))
        #expect(create.status == 201)
        #expect(Self.header(create, "access-control-allow-origin") == nil, "the merchant endpoints never answer CORS")
        await t.stop()
    }

    @Test("an origin is a scheme, a host and a port, in lower case; anything else is none")
    func originNormalised() {
        #expect(CrossOrigin.normalized("HTTPS://Shop.Example/") == "https://shop.example")
        #expect(CrossOrigin.normalized("http://localhost:3000") == "http://localhost:3000")
        #expect(CrossOrigin.parsed("https://shop.example:8443")?.authority == "shop.example:8443")
        for refused in ["null", "*", "https://*.example", "https://shop.example/path", "https://user@shop.example", "ftp://shop.example",
                        "https://", "https://shop.example:0", "https://shop.example:99999", "shop.example", "https:/shop.example",
                        "ws://shop.example", "https://shop.example:80:81", "https://-shop.example"] {
            #expect(CrossOrigin.normalized(refused) == nil, "\(refused)")
        }
    }

    @Test("a stream upgrade from a page of another origin is refused unless listed; apps without Origin and Kassa's own pages are not")
    func upgradeOrigin() async throws {
        let t = try TestNode { $0.corsOrigins = [Self.shop] }
        let s = try await t.sessions.create()
        let port = t.node.port
        let path = "/v1/sessions/\(s.id)/stream?token=\(s.token)"
        func upgrade(_ origin: String?, path: String = path) async throws -> Int {
            try await onThread { try RawSocket(port: port).upgrade(path: path, headers: origin.map { ["Origin: \($0)"] } ?? []).status }
        }
        #expect(try await upgrade("https://evil.example") == 403, "cross-site WebSocket hijacking")
        #expect(try await upgrade("null") == 403)
        #expect(try await upgrade(Self.shop) == 101)
        #expect(try await upgrade("http://127.0.0.1") == 101, "the same origin as the Host")
        #expect(try await upgrade(nil) == 101, "a native app sends no Origin")
        #expect(try await upgrade("ws://127.0.0.1") == 101, "or its own ws(s) URL, as SwiftNIO's client does")
        #expect(try await upgrade(Self.shop, path: "/v1/admin/stream?token=test-admin") == 403, "the admin stream takes only Kassa's own pages")
        #expect(try await upgrade("http://127.0.0.1", path: "/v1/admin/stream?token=test-admin") == 101)
        #expect(try await metrics(t).contains("kassa_cors_refused_total 3"))
        await t.stop()
    }

    @Test("a client token lapses a set time after its session ended (401 token-expired), in memory and read back from the store")
    func tokenAfterEnd() async throws {
        let clock = ManualClock(nowMs: SystemClock().nowMs())
        let t = try TestNode(clock: clock) { $0.clientTokenAfterEndSeconds = 300 }
        let (s, _) = try await t.sessions.canceled()
        clock.advance(byMs: 299_000)
        #expect(try await t.sessions.snapshot(s).status == 200, "the outcome can still be read")
        clock.advance(byMs: 2_000)
        let expired = try await t.sessions.snapshot(s)
        #expect(expired.status == 401)
        let problem = try JSONValue.parse(expired.body)
        #expect(problem["type"] == "urn:kassa:problem:token-expired")
        #expect(problem["detail"]?.stringValue?.contains("after its session ended") == true)
        let port = t.node.port
        #expect(try await onThread { try RawSocket(port: port).upgrade(path: "/v1/sessions/\(s.id)/stream?token=\(s.token)").status } == 401)

        // Read back from the store after the session left memory: the end time is the row's.
        let (other, otherStream) = try await t.sessions.canceled()
        otherStream.connection.close()
        try await Task.sleep(for: .milliseconds(200))
        await t.node.gateway.evictSessions(nowMs: clock.nowMs() + 3_600_000, waiting: true)
        #expect(t.node.gateway.sessions.registry.session(other.id) == nil, "left memory")
        #expect(try await t.sessions.snapshot(other).status == 200)
        clock.advance(byMs: 301_000)
        let restored = try await t.sessions.snapshot(other)
        #expect(restored.status == 401)
        #expect(try JSONValue.parse(restored.body)["type"] == "urn:kassa:problem:token-expired")
        #expect(try await metrics(t).contains(#"kassa_client_tokens_refused_total{reason="expired"} 3"#))
        await t.stop()
    }

    @Test("KassaClient pays with Swish over its own WebSocket, resumes after a dropped connection without gap or repeat, and ends")
    func swiftClientLibrary() async throws {
        let t = try TestNode()
        let created = try await t.sessions.create()
        let session = KassaSession(baseURL: t.base, handle: SessionHandle(id: created.id, clientToken: created.token, streamUrl: created.streamUrl))
        session.start()
        var seqs: [Int64] = []
        var types: [String] = []
        var dropped = false
        for try await event in session.events {
            seqs.append(event.seq)
            types.append(event.type)
            switch event.event {
            case .paymentSessionFetched(let instruments):
                #expect(instruments.contains { $0["type"] == "Swish" })
                // A command the state does not take is refused with its problem, and nothing changes.
                await #expect(throws: KassaClientError.self) { try await session.send(.retry) }
                do { try await session.send(.retry) } catch KassaClientError.commandRefused(let problem) {
                    #expect(problem.type == "urn:kassa:problem:command-not-allowed")
                }
                // Drop the connection from the server's side: the library reconnects with since.
                await t.node.store.eventLog.flush()
                let open = try t.node.store.eventLog.events().last { $0.kind == "ws.open" && $0.sessionID == created.id }
                let connection = try #require(open?.data?["connection"]?.intValue)
                t.node.edge.close(UInt64(connection), code: 1011, reason: "test drop")
                dropped = true
                // A command sent into the closing connection would have an unknown outcome; wait for the reconnect.
                for _ in 0..<100 where session.connections < 2 { try await Task.sleep(for: .milliseconds(50)) }
                let answer = try await session.send(.attempt(.swish(msisdn: "+46739000001")))
                #expect(answer.ok)
            default: break
            }
        }
        #expect(dropped)
        #expect(types.last == "PaymentSessionComplete", "\(types)")
        #expect(seqs == Array(1...Int64(seqs.count)), "gap-free and unrepeated across the drop: \(seqs)")
        #expect(session.connections == 2, "one reconnect")
        await #expect(throws: KassaClientError.closed) { try await session.send(.abort) }
        await t.node.store.eventLog.flush()
        let opens = try t.node.store.eventLog.events().filter { $0.kind == "ws.open" && $0.sessionID == created.id }
        #expect(opens.count == 2)
        #expect(opens.last?.data?["since"]?.intValue ?? 0 >= 1, "resumed with since")
        await t.stop()
    }

    @Test("KassaClient stops with the gateway's problem when its token has expired")
    func swiftClientRefused() async throws {
        let clock = ManualClock(nowMs: SystemClock().nowMs())
        let t = try TestNode(clock: clock) { $0.clientTokenAfterEndSeconds = 0 }
        let (created, _) = try await t.sessions.canceled()
        clock.advance(byMs: 1_000)
        let session = KassaSession(baseURL: t.base, handle: SessionHandle(id: created.id, clientToken: created.token, streamUrl: created.streamUrl))
        session.start()
        do {
            for try await _ in session.events {}
            Issue.record("the stream should end with the refusal")
        } catch KassaClientError.refused(let problem) {
            #expect(problem.type == "urn:kassa:problem:token-expired")
            #expect(problem.status == 401)
        }
        #expect(session.connections == 0)
        await t.stop()
    }
}

@Suite("Stream contract (asyncapi.yaml)")
struct StreamContractTests {
    @Test("every command KassaProtocol can write matches its message in asyncapi.yaml, and decodes back to itself")
    func commandsMatchTheContract() throws {
        let commands: [ClientCommand] = [
            .attempt(.swish()), .attempt(.swish(msisdn: "+46739000001")), .attempt(InstrumentChoice(type: "CreditCard", paymentToken: "t-1")),
            .abort, .retry, .fallback(restrictToInstruments: nil), .fallback(restrictToInstruments: ["Vipps"]), .instrumentMode("Invoice"),
            .threeDSecure(cres: "eyJ0"), .threeDSecureLoadFailed(reason: "timeout"), .threeDSecureMethod(completed: true),
            .wallet(payload: "c2lt"), .walletCanceled, .appLaunchFailed, .ping,
        ]
        #expect(Set(commands.map(\.type)) == Set(CommandType.allCases), "every command type is covered")
        for command in commands {
            let frame = command.frame(id: "c1")
            #expect(StreamContract.check(command: frame).isEmpty, "\(StreamContract.check(command: frame))")
            #expect(try JSONDecoder().decode(ClientCommand.self, from: Data(frame.text.utf8)) == command)
        }
    }

    @Test("the contract catches a frame that breaks it")
    func contractCatchesBreaks() {
        let good: JSONValue = ["seq": 1, "session": "6e0312c4a9f04b7e8d1c2b3a4f5e6d7c", "type": "LaunchClientApp", "at": "2026-11-24T08:00:00.000Z",
                               "data": ["url": "swish://paymentrequest?token=x"]]
        #expect(StreamContract.check(serverFrame: good).isEmpty, "\(StreamContract.check(serverFrame: good))")
        #expect(!StreamContract.check(serverFrame: good.replacing("data", with: [:])).isEmpty, "LaunchClientApp without its url")
        #expect(!StreamContract.check(serverFrame: good.replacing("seq", with: "1")).isEmpty, "a seq as a string")
        #expect(!StreamContract.check(serverFrame: ["re": "c1", "ok": "yes"]).isEmpty, "an answer whose ok is not a boolean")
        #expect(!StreamContract.check(serverFrame: good.replacing("type", with: "Unheard")).isEmpty, "an event the contract lacks")
        #expect(StreamContract.check(serverFrame: ["re": "c1", "ok": false, "problem": ["type": "urn:kassa:problem:x", "title": "X", "status": 409]]).isEmpty)
    }
}
