import Foundation
import KassaCore
import KassaUpstream
import Testing

/// Three `kassa serve` nodes behind a real HAProxy (docker/haproxy.cfg), the simulator on its own.
@Suite("Several nodes behind HAProxy")
struct ClusterTests {
    let client = UpstreamClient()

    func listeningPort(_ p: KassaProcess) async throws -> Int {
        let line = try await onThread { p.waitForLog(message: "listening") }
        return try #require(line?["address"]?.stringValue?.split(separator: ":").last.flatMap { Int($0) })
    }

    @Test("each session stays on one node; when that node dies, another picks the session up and the client resumes")
    func failover() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let sim = try KassaProcess(["sim", "--listen", "127.0.0.1:0", "--payer-delay-ms", "100"])
        let simPort = try await listeningPort(sim)
        let ports = try (0..<4).map { _ in try closedPort() }
        // Each node knows the others (--peers), so its support API reads every node's part.
        func nodeArguments(_ i: Int) -> [String] {
            ["serve", "--listen", "127.0.0.1:\(ports[i])", "--db", dir.file("node\(i).sqlite"),
             "--api-keys", "k", "--admin-token", "a", "--upstream-url", "http://127.0.0.1:\(simPort)",
             "--upstream-token", "kassa-simulator-token", "--cluster-secret", "shared-cluster-secret-0123456789abcdef",
             "--node-name", "node\(i)", "--peers", (0..<3).filter { $0 != i }.map { "http://127.0.0.1:\(ports[$0])" }.joined(separator: ",")]
        }
        var nodes: [KassaProcess] = []
        for i in 0..<3 { nodes.append(try KassaProcess(nodeArguments(i))) }
        for node in nodes { _ = try await listeningPort(node) }

        // The committed config, with this run's ports.
        var config = try String(contentsOfFile: testsPath("../docker/haproxy.cfg"), encoding: .utf8)
        config = config.replacingOccurrences(of: "bind 127.0.0.1:8080", with: "bind 127.0.0.1:\(ports[3])")
        for i in 0..<3 { config = config.replacingOccurrences(of: "127.0.0.1:808\(i + 1)", with: "127.0.0.1:\(ports[i])") }
        let configFile = dir.file("haproxy.cfg")
        try config.write(toFile: configFile, atomically: true, encoding: .utf8)
        let haproxy = try ChildProcess(["haproxy", "-db", "-f", configFile], environment: ProcessInfo.processInfo.environment)
        defer { haproxy.signal(SIGTERM); for node in nodes { node.signal(SIGKILL) }; sim.signal(SIGTERM) }
        let front = "http://127.0.0.1:\(ports[3])"
        var up = false
        for _ in 0..<100 where !up {
            up = (try? await client.send(UpstreamRequest(url: front + "/healthz", totalTimeoutMs: 500)))?.status == 200
            if !up { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(up, "HAProxy answers: \(haproxy.stderrText)")
        // A path that reads one way at the proxy and another at the node is refused at the proxy.
        for tricky in ["/v1/sessions/..%2F..%2Fv1/admin/events", "/v1/sessions/%2e%2e/admin", "/v1/sessions/x%5c..%5cadmin"] {
            let refused = try await client.send(UpstreamRequest(url: front + tricky))
            #expect(refused.status == 400 && refused.header("content-type") == "application/problem+json", "\(tricky): \(refused.status)")
        }

        let c = SessionClient(base: front, port: ports[3])
        // Which node drives each session: the one whose event log has its pushes.
        func owners(_ id: String) async throws -> [Int] {
            var found: [Int] = []
            for i in 0..<3 {
                // A dead node does not answer: it holds nothing any more.
                guard let r = try? await client.send(UpstreamRequest(url: "http://127.0.0.1:\(ports[i])/v1/admin/events?session=\(id)&kind=push.sent&local=true",
                                                                     headers: [("Authorization", "Bearer a")])) else { continue }
                if !(try JSONValue.parse(r.body)["events"]?.arrayValue ?? []).isEmpty { found.append(i) }
            }
            return found
        }
        // At least six sessions, on at least two nodes. A consistent hash over three nodes can put
        // six ids on one, and a node HAProxy's checks find slow on a busy machine gets none for a
        // while: more sessions are made then, up to 24.
        var sessions: [(SessionClient.Created, Stream)] = []
        var ownerOf: [String: Int] = [:]
        while sessions.count < 24 && (sessions.count < 6 || Set(ownerOf.values).count < 2) {
            let created = try await c.create(key: "k", client: ["platform": "ios", "wallets": ["ApplePay"]])
            let stream = try await c.stream(created)
            _ = try await stream.event(.paymentSessionFetched)
            try await stream.send(["id": "p", "type": "ping"])
            _ = try await stream.ack("p")
            let found = try await owners(created.id)
            #expect(found.count == 1, "session \(created.id) ran on nodes \(found)")
            ownerOf[created.id] = found.first
            sessions.append((created, stream))
        }
        try #require(Set(ownerOf.values).count >= 2, "\(sessions.count) sessions spread over the nodes: \(ownerOf)")

        // The node of the first session dies. Its client reconnects through HAProxy with since.
        let (victim, victimStream) = sessions[0]
        let dead = try #require(ownerOf[victim.id])
        nodes[dead].signal(SIGKILL)
        _ = try? await victimStream.read { _ in false }
        var resumed: Stream?
        for _ in 0..<60 where resumed == nil {
            resumed = try? await c.stream(victim, since: 1)
            if resumed == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let stream = try #require(resumed, "the client could not reconnect")
        // Apple Pay is native only on iOS: the node that picked the session up knows the
        // client's platform from the token.
        try await stream.payByWallet("ApplePay", id: "go")
        #expect(stream.received.contains { $0["re"] == "go" && $0["ok"] == true })
        let complete = try await stream.event(.paymentSessionComplete)
        #expect((complete["seq"]?.intValue ?? 0) > 1, "the stream continues after the seq the client had")
        let newOwners = try await owners(victim.id).filter { $0 != dead }
        #expect(newOwners.count == 1, "another node picked the session up: \(newOwners)")

        // The other sessions carry on where they were.
        let (other, otherStream) = try #require(sessions.first { ownerOf[$0.0.id].map { $0 != dead } ?? false })
        try await otherStream.payByWallet("ApplePay", id: "x")
        _ = try await otherStream.event(.paymentSessionComplete)
        #expect(try await owners(other.id) == [try #require(ownerOf[other.id])])

        // One timeline from every node. A node that did not drive the session reads it from its
        // peers: while the dead node is down, its part is missing and it is named unreachable;
        // once it is back (its part is in its own database), the timeline is whole, each row marked.
        let owner = try #require(newOwners.first)
        let bystander = try #require((0..<3).first { $0 != dead && $0 != owner })
        func timeline(from i: Int) async throws -> JSONValue {
            let r = try await client.send(UpstreamRequest(url: "http://127.0.0.1:\(ports[i])/v1/admin/sessions/\(victim.id)/timeline",
                                                          headers: [("Authorization", "Bearer a")]))
            #expect(r.status == 200, "\(r.text)")
            return try JSONValue.parse(r.body)
        }
        let partial = try await timeline(from: bystander)
        #expect(partial["unreachable"] == [.string("http://127.0.0.1:\(ports[dead])")])
        let partialNodes = partial["nodes"]?.arrayValue ?? []
        #expect(partialNodes.contains(.string("node\(dead)")) == false)
        #expect(partialNodes.contains(.string("node\(owner)")), "\(partialNodes)")
        nodes[dead] = try KassaProcess(nodeArguments(dead))
        _ = try await listeningPort(nodes[dead])
        let whole = try await timeline(from: bystander)
        let rows = whole["events"]?.arrayValue ?? []
        #expect(whole["unreachable"] == [])
        let wholeNodes = Set(whole["nodes"]?.arrayValue ?? [])
        #expect(wholeNodes.contains(.string("node\(dead)")) && wholeNodes.contains(.string("node\(owner)")), "\(wholeNodes)")
        #expect(rows.contains { $0["kind"] == "push.sent" && $0["summary"]?.stringValue?.contains("PaymentSessionFetched") == true
                                && $0["node"] == .string("node\(dead)") }, "the first pushes came from the node that died")
        #expect(rows.contains { $0["summary"]?.stringValue?.contains("PaymentSessionComplete") == true && $0["node"] == .string("node\(owner)") })
        let times = rows.compactMap { $0["atMs"]?.doubleValue }
        #expect(times == times.sorted() && times.count == rows.count, "one timeline in time order")
        // The same from the shell, asking the bystander alone.
        let shell = try KassaProcess(["events", "--url", "http://127.0.0.1:\(ports[bystander])", "--admin-token", "a",
                                      "--session", victim.id, "--format", "csv"])
        #expect(try await onThread { shell.waitForExit() } == 0, "\(shell.stderr)")
        let csv = shell.stdout.split(separator: "\n").dropFirst()
        #expect(csv.contains { $0.contains(",node\(dead),") } && csv.contains { $0.contains(",node\(owner),") }, "\(shell.stdout.prefix(2000))")
        // And on the bystander's admin page: one waterfall, rows labelled with both nodes.
        let screenshot = try DemoPageTests.screenshotPath("admin-failover.png")
        let (status, output) = try await runPython([testsPath("python/admin_failover.py"), "http://127.0.0.1:\(ports[bystander])", "a",
                                                    victim.id, screenshot, "node\(dead)", "node\(owner)"])
        #expect(status == 0, "\(output.suffix(2000))")
    }
}
