import Foundation
import KassaCore
import KassaEdge
import KassaUpstream
import Testing

@Suite("Upstream client (libcurl)")
struct UpstreamClientTests {
    let client = UpstreamClient()

    @Test("an upstream URL is read by libcurl's own parser: scheme, host, path; userinfo and brackets do not fool it")
    func upstreamURLParts() {
        let plain = UpstreamURL("HTTPS://Api.ExternalIntegration.PayEx.com/psp/paymentorders/abc?x=1")
        #expect(plain == UpstreamURL(scheme: "https", host: "api.externalintegration.payex.com", path: "/psp/paymentorders/abc", port: 443))
        #expect(plain?.origin == "https://api.externalintegration.payex.com:443")
        #expect(UpstreamURL("http://allowed.example@evil.example/x")?.host == "evil.example")
        #expect(UpstreamURL("http://[::1]:8080/a")?.host == "::1")
        #expect(UpstreamURL("http://[::1]:8080/a")?.origin == "http://[::1]:8080")
        #expect(UpstreamURL("http://x.example/a")?.port == 80 && UpstreamURL("https://x.example:8443/a")?.port == 8443)
        #expect(UpstreamURL("http://127.0.0.1:9")?.path == "/")
        #expect(UpstreamURL("/psp/paymentorders") == nil)
        #expect(UpstreamURL("not a url") == nil)
    }

    @Test("an href on a known origin that libcurl reads as written is read the same without it; any other is left to libcurl")
    func plainHrefs() {
        let reader = PlainHrefReader(origins: ["https://api.example.com:443", "http://127.0.0.1:8080", "http://[::1]:9000"].compactMap { UpstreamURL($0) })
        let plain = [
            "https://api.example.com/psp/paymentorders/09ccd29a-7c4f-4752-9396-12100cbfecce",
            "https://api.example.com:443/psp/paymentsessions/abc/methods/CreditCard/attempts",
            "https://api.example.com/", "https://api.example.com/a/b/", "https://api.example.com/a.b/c~d_e-f.?x=1&y=2",
            "https://api.example.com/a?x=/y", "https://api.example.com/a/?", "http://127.0.0.1:8080/psp/x?_tc_tid=30f2168171e142d38bcd4af2c3721959",
        ]
        for href in plain {
            #expect(reader.read(href) != nil, "\(href)")
            #expect(reader.read(href) == UpstreamURL(href), "\(href): as libcurl reads it")
        }
        let leftToLibcurl = [
            "https://API.example.com/a", "https://api.example.com/a/../b", "https://api.example.com/./a", "https://api.example.com/a/..",
            "https://api.example.com//evil.example/a", "https://api.example.com/a//b", "https://api.example.com/a%2Fb", "https://api.example.com/a#f",
            "https://api.example.com/a b", "https://api.example.com@evil.example/a", "https://api.example.com.evil.example/a",
            "https://api.example.com:8443/a", "http://api.example.com/a", "https://api.example.com/a?b?c", "https://api.example.com/a\\b",
            "http://127.0.0.1/a", "http://[::1]:9000/a", "https://api.example.com", "https://api.example.com/a/.well-known",
            "https://api.example.com/a?x=%41", "https://api.example.com/\u{e9}", "https://api.example.com/a?x=1#", " https://api.example.com/a",
        ]
        for href in leftToLibcurl { #expect(reader.read(href) == nil, "\(href)") }
    }

    @Test("100 concurrent requests to a local server all complete")
    func concurrent() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let port = server.port
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for i in 0..<100 {
                group.addTask {
                    let body = Array("request \(i)".utf8)
                    let r = try await client.send(UpstreamRequest(method: "POST", url: "http://127.0.0.1:\(port)/echo", body: body))
                    return (r.status, r.text == "request \(i)" ? 1 : 0)
                }
            }
            return try await group.reduce(into: [(Int, Int)]()) { $0.append($1) }
        }
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0.0 == 200 && $0.1 == 1 })
    }

    @Test("calls beyond the connection bound wait for a kept connection instead of opening their own")
    func boundedConnections() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let url = "http://127.0.0.1:\(server.port)/pause"
        // Each answer says whether its exchange opened a connection or took a kept one.
        func connectionsUsed(by client: UpstreamClient, calls: Int) async throws -> (statuses: [Int], opened: Int) {
            try await withThrowingTaskGroup(of: UpstreamResponse.self) { group in
                for _ in 0..<calls { group.addTask { try await client.send(UpstreamRequest(url: url, totalTimeoutMs: 5_000)) } }
                return try await group.reduce(into: ([Int](), 0)) { $0.statuses.append($1.status); $0.opened += $1.reusedConnection ? 0 : 1 }
            }
        }
        // Twelve calls of 50 ms at once through two connections: they take turns on those two.
        let bounded = UpstreamClient(maxConnections: 2)
        defer { bounded.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        let few = try await connectionsUsed(by: bounded, calls: 12)
        #expect(few.statuses == Array(repeating: 200, count: 12))
        #expect(few.opened == 2, "two connections opened, then kept and reused: \(few.opened) opened")
        #expect(start.duration(to: clock.now) >= .milliseconds(250), "six rounds of 50 ms on two connections")
        #expect(bounded.waitingNow == 0 && bounded.waitedTotal == 10, "ten calls waited for a connection")
        // With room for all of them, each call has a connection of its own at once.
        let roomy = UpstreamClient(maxConnections: 16)
        defer { roomy.shutdown() }
        let many = try await connectionsUsed(by: roomy, calls: 12)
        #expect(many.opened == 12 && roomy.waitedTotal == 0)
    }

    @Test("a call waiting for a connection keeps its own deadline, and can be cancelled")
    func waitingCallTimesOut() async throws {
        let (server, handler) = try startTestEdge()
        defer { Task { await server.stop() } }
        let single = UpstreamClient(maxConnections: 1)
        defer { single.shutdown() }
        var started = handler.slowStarted.makeAsyncIterator()
        let busy = Task { try await single.send(UpstreamRequest(url: "http://127.0.0.1:\(server.port)/slow", totalTimeoutMs: 5_000)) }
        _ = await started.next()
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: UpstreamError.timeout) {
            _ = try await single.send(UpstreamRequest(url: "http://127.0.0.1:\(server.port)/fast", totalTimeoutMs: 300))
        }
        #expect(start.duration(to: clock.now) < .milliseconds(1_500), "not held until the slow call ends (2 s)")
        let waiter = Task { try await single.send(UpstreamRequest(url: "http://127.0.0.1:\(server.port)/fast", totalTimeoutMs: 5_000)) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(single.waitingNow == 1)
        let cancelled = clock.now
        waiter.cancel()
        let outcome = await waiter.result
        #expect(throws: UpstreamError.cancelled) { try outcome.get() }
        #expect(cancelled.duration(to: clock.now) < .milliseconds(1_000) && single.waitingNow == 0, "taken out of the queue at once")
        #expect(try await busy.value.text == "slow")
    }

    @Test("a kept connection the upstream closes while idle is let go, and the next call opens another")
    func idleConnectionClosedByUpstream() async throws {
        // The edge closes a kept connection whose next request is a second late.
        let (server, _) = try startTestEdge { $0.requestTimeoutSeconds = 1 }
        defer { Task { await server.stop() } }
        let url = "http://127.0.0.1:\(server.port)/fast"
        let own = UpstreamClient(maxConnections: 4)
        defer { own.shutdown() }
        let first = try await own.send(UpstreamRequest(url: url))
        let second = try await own.send(UpstreamRequest(url: url))
        #expect(!first.reusedConnection && second.reusedConnection)
        try await Task.sleep(for: .milliseconds(2_500))
        let third = try await own.send(UpstreamRequest(url: url))
        #expect(third.status == 200 && third.text == "fast")
        #expect(!third.reusedConnection, "the closed connection is not used again")
        let fourth = try await own.send(UpstreamRequest(url: url))
        #expect(fourth.reusedConnection, "the new one is kept")
    }

    @Test("libcurl sends a request again when a kept connection dies unanswered, however many exchanges its handle has made")
    func resendOnDeadKeptConnectionEveryTime() async throws {
        // An upstream that answers the first request on each connection and resets the connection
        // when the next one arrives on it (a kept connection closed as a request meets it). libcurl
        // sends that request again on a new connection, up to five times per handle between
        // `curl_easy_reset`s: a kept handle that never had one ran out after five such races in its
        // life, and the sixth failed. One connection, so one handle, for eight calls: seven races.
        let listener = try BlackHoleListener()
        let single = UpstreamClient(maxConnections: 1)
        defer { single.shutdown() }
        let calls = 8
        let upstream = Task {
            try await onThread { () -> (connections: Int, reset: Int) in
                var connections = 0, reset = 0
                while let connection = RawSocket(acceptingFrom: listener, timeoutMs: 1_000) {
                    connections += 1
                    guard connection.readHTTPResponse() != nil else { continue }
                    try connection.send("HTTP/1.1 200 OK\r\nContent-Length: \(String(connections).utf8.count)\r\n\r\n\(connections)")
                    guard connection.readHTTPResponse() != nil else { continue }
                    connection.abort()
                    reset += 1
                }
                return (connections, reset)
            }
        }
        let url = "http://127.0.0.1:\(listener.port)/psp/paymentorders"
        var answers: [String] = []
        for call in 1...calls {
            do {
                answers.append(try await single.send(UpstreamRequest(method: "POST", url: url, body: Array(#"{"call":\#(call)}"#.utf8))).text)
            } catch {
                answers.append("\(error)")
            }
        }
        #expect(answers == (1...calls).map(String.init), "each call answered on a connection of its own")
        single.shutdown()   // closes the last kept connection: the upstream stops waiting on it
        let seen = try await upstream.value
        #expect(seen.connections == calls && seen.reset == calls - 1, "\(seen)")
    }

    @Test("a kept connection idle past the client's bound is not used again; one idle less is")
    func keptConnectionIdleBound() async throws {
        let (server, _) = try startTestEdge()   // keeps an idle connection for 10 s
        defer { Task { await server.stop() } }
        let url = "http://127.0.0.1:\(server.port)/fast"
        let bounded = UpstreamClient(maxConnections: 2, keptIdleSeconds: 1)
        let usual = UpstreamClient(maxConnections: 2)
        defer { bounded.shutdown(); usual.shutdown() }
        _ = try await bounded.send(UpstreamRequest(url: url))
        _ = try await usual.send(UpstreamRequest(url: url))
        // libcurl counts idle time in whole seconds and lets a connection go past the bound: 2 s idle.
        try await Task.sleep(for: .milliseconds(2_200))
        let afterBound = try await bounded.send(UpstreamRequest(url: url))
        let afterUsual = try await usual.send(UpstreamRequest(url: url))
        #expect(afterBound.status == 200 && !afterBound.reusedConnection, "idle 2 s, past the 1 s bound: a new connection")
        #expect(afterUsual.status == 200 && afterUsual.reusedConnection, "idle 2 s, within the default \(UpstreamClient.defaultKeptIdleSeconds) s: reused")
        #expect(UpstreamClient.defaultKeptIdleSeconds < 60, "under the usual idle timeout of servers and load balancers")
    }

    @Test("calls to a host name complete at once: the resolver's own socket, closed by libcurl, leaves nothing behind in the curl thread's set")
    func hostNameCalls() async throws {
        // The machine's name goes through libcurl's threaded resolver and its socket pair, which
        // libcurl lets go of and closes itself; "localhost" (the fallback) it answers itself.
        let (name, address) = loopbackHostName() ?? ("localhost", "127.0.0.1")
        let (server, _) = try startTestEdge { $0.host = address }
        defer { Task { await server.stop() } }
        let clock = ContinuousClock()
        for _ in 0..<4 {
            // A new client resolves the name again (libcurl keeps its answers per client).
            let own = UpstreamClient(maxConnections: 2)
            defer { own.shutdown() }
            for _ in 0..<3 {
                let start = clock.now
                let answer = try await own.send(UpstreamRequest(url: "http://\(name):\(server.port)/fast", totalTimeoutMs: 5_000))
                #expect(answer.text == "fast")
                #expect(start.duration(to: clock.now) < .seconds(2), "no call waits for its deadline or the loop's one-second wake-up")
            }
        }
    }

    @Test("status, headers and body are exposed; connections are reused")
    func responseAndReuse() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let url = "http://127.0.0.1:\(server.port)/echo"
        let first = try await client.send(UpstreamRequest(method: "PUT", url: url, headers: [("Content-Type", "text/plain")], body: Array("abc".utf8)))
        #expect(first.status == 200)
        #expect(first.header("X-Echo-Method") == "PUT")
        #expect(first.header("content-type") == "application/octet-stream")
        #expect(first.text == "abc")
        let second = try await client.send(UpstreamRequest(method: "POST", url: url, body: Array("def".utf8)))
        #expect(second.reusedConnection, "the second exchange reuses the kept connection")
        let missing = try await client.send(UpstreamRequest(url: "http://127.0.0.1:\(server.port)/missing"))
        #expect(missing.status == 404)
    }

    @Test("a kept easy handle carries nothing from the exchange before: method, body, headers")
    func keptHandleStartsClean() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let base = "http://127.0.0.1:\(server.port)"
        // One exchange at a time, so each takes the handle the one before left.
        let post = try await client.send(UpstreamRequest(method: "POST", url: base + "/echo", headers: [("X-Only-Once", "1")], body: Array("posted".utf8)))
        #expect(post.header("x-echo-method") == "POST" && post.text == "posted")
        let get = try await client.send(UpstreamRequest(url: base + "/echo"))
        #expect(get.header("x-echo-method") == "GET", "the POST's body must not make the next GET a POST")
        #expect(get.header("x-echo-length") == "0")
        let headers = try await client.send(UpstreamRequest(url: base + "/headers"))
        #expect(!headers.text.lowercased().contains("x-only-once"), "a header of an earlier exchange is gone: \(headers.text)")
        // A refused request hands its handle back too; the next exchange is unaffected.
        await #expect(throws: UpstreamError.self) {
            try await client.send(UpstreamRequest(url: base + "/echo", headers: [("X-Bad", "a\r\nb")]))
        }
        let head = try await client.send(UpstreamRequest(method: "HEAD", url: base + "/echo"))
        #expect(head.status == 200 && head.body.isEmpty)
        let delete = try await client.send(UpstreamRequest(method: "DELETE", url: base + "/echo"))
        #expect(delete.header("x-echo-method") == "DELETE" && delete.header("x-echo-length") == "0")
        // The handle keeps only the options every exchange shares: each method after each other.
        let afterHead = try await client.send(UpstreamRequest(method: "HEAD", url: base + "/echo"))
        #expect(afterHead.body.isEmpty)
        let getAfterHead = try await client.send(UpstreamRequest(url: base + "/echo"))
        #expect(getAfterHead.header("x-echo-method") == "GET" && getAfterHead.header("x-echo-length") == "0")
        let fullAfterHead = try await client.send(UpstreamRequest(method: "PATCH", url: base + "/echo", body: Array("patched".utf8)))
        #expect(fullAfterHead.header("x-echo-method") == "PATCH" && fullAfterHead.text == "patched", "a body is read after a HEAD")
        let emptyPost = try await client.send(UpstreamRequest(method: "POST", url: base + "/echo", body: []))
        #expect(emptyPost.header("x-echo-method") == "POST" && emptyPost.header("x-echo-length") == "0", "the body before is not sent again")
        let getAfterCustom = try await client.send(UpstreamRequest(url: base + "/echo"))
        #expect(getAfterCustom.header("x-echo-method") == "GET", "PATCH and POST are not kept")
        // Another CA file than the kept handle's takes a new handle; plain HTTP ignores it either way.
        let otherCA = try await client.send(UpstreamRequest(method: "PUT", url: base + "/echo", body: Array("ca".utf8),
                                                            caCertificatePath: "/nonexistent/ca.pem"))
        #expect(otherCA.header("x-echo-method") == "PUT" && otherCA.text == "ca")
        let backToDefault = try await client.send(UpstreamRequest(url: base + "/echo"))
        #expect(backToDefault.header("x-echo-method") == "GET" && backToDefault.header("x-echo-length") == "0")
    }

    @Test("every header a request names arrives as given, in a list of one allocation; no Expect: 100-continue")
    func headersArriveAsGiven() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let long = String(repeating: "v", count: 3_000)
        // Names the edge reads (libwebsockets' known headers), so its /headers route can say what came.
        let sent = [("Accept", "application/problem+json"), ("User-Agent", long), ("Referer", "https://shop.example/a b  c"),
                    ("Authorization", "Bearer t"), ("Content-Type", "application/json")]
        for headers in [sent, [], [sent[0]]] {
            let answer = try await client.send(UpstreamRequest(method: "POST", url: "http://127.0.0.1:\(server.port)/headers", headers: headers,
                                                               body: Array(String(repeating: "b", count: 2_000).utf8)))
            let got = try JSONValue.parse(answer.body)
            for (name, value) in headers {
                #expect(got[name.lowercased()]?.stringValue == value, "\(name): \(got[name.lowercased()]?.stringValue?.prefix(40) ?? "absent")")
            }
            #expect(got["expect"] == nil, "no Expect header: \(answer.text.prefix(200))")
        }
    }

    @Test("a black-hole port times out within its deadline with a typed error")
    func blackHoleTimesOut() async throws {
        let hole = try BlackHoleListener()
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: UpstreamError.timeout) {
            _ = try await client.send(UpstreamRequest(url: "http://127.0.0.1:\(hole.port)/", totalTimeoutMs: 400))
        }
        let elapsed = start.duration(to: clock.now)
        #expect(elapsed >= .milliseconds(350))
        // Loose: a paused VM or two busy cores must not fail it; the point is that nothing else ends it.
        #expect(elapsed < .seconds(8), "well before anything else would end it (tests run in parallel on two cores)")
        _ = hole
    }

    @Test("a closed port fails to connect")
    func connectRefused() async throws {
        // Port 1: privileged, nothing listens there (a freed ephemeral port could be taken by a parallel test).
        await #expect {
            _ = try await client.send(UpstreamRequest(url: "http://127.0.0.1:1/"))
        } throws: { error in
            if case .connectFailed = error as? UpstreamError { return true }
            return false
        }
    }

    @Test("cancelling the caller's task ends the exchange at once")
    func cancellation() async throws {
        let hole = try BlackHoleListener()
        let clock = ContinuousClock()
        let start = clock.now
        let task = Task {
            try await client.send(UpstreamRequest(url: "http://127.0.0.1:\(hole.port)/", totalTimeoutMs: 10_000))
        }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        let result = await task.result
        #expect(throws: UpstreamError.cancelled) { try result.get() }
        #expect(start.duration(to: clock.now) < .seconds(8), "before the 10 s deadline (loose: a paused VM must not fail it)")
        _ = hole
    }

    @Test("a header with a line break is refused before anything is sent")
    func headerInjection() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let url = "http://127.0.0.1:\(server.port)/echo"
        // A value with CR LF or a lone LF, a name with a colon; the bad header first or after good ones.
        for (headers, bad) in [([("X-A", "b\r\nX-Evil: 1")], "X-A"), ([("Accept", "x"), ("X-B", "b\nc")], "X-B"),
                               ([("Accept", "x"), ("X-C: d", "e")], "X-C: d")] {
            await #expect {
                _ = try await client.send(UpstreamRequest(url: url, headers: headers))
            } throws: { error in
                if case .invalidRequest(let message) = error as? UpstreamError { return message.contains(bad) }
                return false
            }
        }
        // The handle the refused requests took serves the next one.
        let answer = try await client.send(UpstreamRequest(method: "POST", url: url, headers: [("X-Fine", "yes")], body: Array("ok".utf8)))
        #expect(answer.status == 200)
        #expect(answer.body == Array("ok".utf8))
    }

    @Test("a response over the size limit is refused")
    func tooLarge() async throws {
        let (server, _) = try startTestEdge()
        defer { Task { await server.stop() } }
        let small = UpstreamClient(maxResponseBytes: 1000)
        await #expect(throws: UpstreamError.responseTooLarge(limit: 1000)) {
            _ = try await small.send(UpstreamRequest(method: "POST", url: "http://127.0.0.1:\(server.port)/echo",
                                                     body: [UInt8](repeating: 1, count: 5000)))
        }
    }
}

/// The machine's own name and the loopback address it resolves to, if it does.
private func loopbackHostName() -> (name: String, address: String)? {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count) == 0 else { return nil }
    let name = String(cString: buffer)
    var hints = addrinfo()
    hints.ai_family = AF_INET
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var result: UnsafeMutablePointer<addrinfo>?
    guard !name.isEmpty, name != "localhost", getaddrinfo(name, nil, &hints, &result) == 0, let first = result, let address = first.pointee.ai_addr else {
        return nil
    }
    defer { freeaddrinfo(result) }
    var inet = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
    var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
    guard inet_ntop(AF_INET, &inet, &text, socklen_t(text.count)) != nil else { return nil }
    let dotted = String(cString: text)
    return dotted.hasPrefix("127.") ? (name, dotted) : nil
}
