import Foundation
import GRDB
import KassaCore
@testable import KassaGateway
import KassaSimulator
@testable import KassaStore
import KassaUpstream
import Testing
@testable import kassa

/// The support side: complete capture, the admin API, redaction, retention.
@Suite("Support: event log and admin API")
struct SupportTests {
    let client = UpstreamClient()

    func admin(_ t: TestNode, _ path: String, token: String = "test-admin") async throws -> UpstreamResponse {
        try await client.send(UpstreamRequest(url: t.base + path, headers: [("Authorization", "Bearer \(token)")]))
    }

    /// A completed Swish (MSISDN) payment and a declined one; returns their sessions.
    func twoPayments(_ t: TestNode) async throws -> (done: SessionClient.Created, declined: SessionClient.Created) {
        let (done, a) = try await t.sessions.fetched()
        try await a.send(["id": "1", "type": "attempt", "instrument": ["type": "Swish", "msisdn": "+46739000001"]])
        _ = try await a.event(.paymentSessionComplete)
        let (declined, b) = try await t.sessions.fetched()
        try await b.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-declined"]])
        _ = try await b.event(.sessionProblemOccurred)
        a.connection.close(); b.connection.close()
        // The closes and the search fields are written after the events; wait for them rather than for time.
        for _ in 0..<200 {
            await t.node.store.eventLog.flush()
            let closes = try t.node.store.searchEvents({ var q = Store.EventQuery(); q.kinds = ["ws.close"]; return q }()).count
            if closes == 2, try t.node.store.session(id: declined.id)?.lastProblemType != nil,
               try t.node.store.session(id: done.id)?.phase == "completed" { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (done, declined)
    }

    @Test("every step of a payment is an event, correlated by session and trace id")
    func completeCapture() async throws {
        let t = try TestNode()
        let (done, _) = try await twoPayments(t)
        let events = try t.node.store.timeline(sessionID: done.id)
        let kinds = Set(events.map(\.kind))
        for kind in ["session.created", "paymentorder.created", "http.request", "ws.open", "ws.close", "client.command",
                     "upstream.request", "upstream.response", "state.transition", "push.sent"] {
            #expect(kinds.contains(kind), "missing \(kind)")
        }
        let traces = Set(events.compactMap(\.traceID))
        #expect(traces.count == 1, "one trace for the whole session: \(traces)")
        #expect(events.contains { $0.kind == "ws.close" && $0.data?["code"]?.intValue == 1000 })
        await t.stop()
    }

    @Test("a client's traceparent is the session's trace and goes upstream")
    func traceparent() async throws {
        let t = try TestNode()
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        let r = try await client.send(UpstreamRequest(method: "POST", url: t.base + "/v1/sessions",
                                                      headers: [("Your-Api-Key", "test-key"), ("Content-Type", "application/json"),
                                                                ("traceparent", "00-\(trace)-00f067aa0ba902b7-01")],
                                                      body: (["paymentOrder": SessionClient.order()] as JSONValue).bytes))
        let id = try #require(try JSONValue.parse(r.body)["id"]?.stringValue)
        #expect(try t.node.store.session(id: id)?.traceID == trace)
        let sent = try #require(t.simulator.lastTraceparent)
        #expect(sent.hasPrefix("00-\(trace)-") && sent.hasSuffix("-01") && !sent.contains("00f067aa0ba902b7"), "a new span id, the same trace")
        let byTrace = try JSONValue.parse(try await admin(t, "/v1/admin/events?trace=\(trace)").body)["events"]?.arrayValue ?? []
        #expect(byTrace.count >= 3)
        await t.stop()
    }

    @Test("sessions are found by id, payee reference, payment order, MSISDN suffix, state, problem type and time")
    func sessionSearch() async throws {
        let t = try TestNode()
        let (done, declined) = try await twoPayments(t)
        func ids(_ query: String) async throws -> [String] {
            let r = try await admin(t, "/v1/admin/sessions?" + query)
            #expect(r.status == 200, "\(query): \(r.text)")
            return try JSONValue.parse(r.body)["sessions"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        let record = try #require(try t.node.store.session(id: done.id))
        #expect(try await ids("id=\(done.id)") == [done.id])
        #expect(try await ids("payeeReference=\(record.payeeReference!)") == [done.id])
        #expect(try await ids("paymentOrder=\(record.paymentOrderID!)") == [done.id])
        #expect(try await ids("msisdn=0001") == [done.id])
        #expect(try await ids("msisdn=46739000001") == [done.id], "a longer number is cut to its suffix")
        #expect(try await ids("state=completed") == [done.id])
        #expect(try await ids("problemType=https://api.payex.com/psp/errordetail/paymentorders/paymentattemptdeclined") == [declined.id])
        #expect(try await ids("from=\(record.createdAtMs)&to=\(record.createdAtMs + 1)").contains(done.id))
        #expect(Set(try await ids("")) == [done.id, declined.id])
        let page1 = try JSONValue.parse(try await admin(t, "/v1/admin/sessions?limit=1").body)
        let cursor = try #require(page1["nextCursor"]?.stringValue)
        let page2 = try JSONValue.parse(try await admin(t, "/v1/admin/sessions?limit=1&cursor=\(cursor)").body)
        #expect(page1["sessions"]?.arrayValue?.first?["id"] != page2["sessions"]?.arrayValue?.first?["id"])
        await t.stop()
    }

    @Test("events: filters and cursor pagination with no overlap and no gap")
    func eventList() async throws {
        let t = try TestNode()
        let (done, _) = try await twoPayments(t)
        let all = try t.node.store.timeline(sessionID: done.id)
        var seen: [Int] = []
        var cursor: String?
        repeat {
            let r = try await admin(t, "/v1/admin/events?session=\(done.id)&limit=3" + (cursor.map { "&cursor=\($0)" } ?? ""))
            let doc = try JSONValue.parse(r.body)
            seen += doc["events"]?.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
            cursor = doc["nextCursor"]?.stringValue
        } while cursor != nil
        #expect(seen == all.compactMap { $0.id.map(Int.init) }.sorted(), "the list pages in id order; the timeline is in time order")

        let pushes = try JSONValue.parse(try await admin(t, "/v1/admin/events?session=\(done.id)&kind=push.sent").body)["events"]?.arrayValue ?? []
        #expect(pushes.compactMap { $0["summary"]?.stringValue } == ["PaymentSessionFetched", "PaymentSessionComplete"])
        let warnings = try JSONValue.parse(try await admin(t, "/v1/admin/events?level=warning").body)["events"]?.arrayValue ?? []
        #expect(!warnings.isEmpty && warnings.allSatisfy { ["warning", "error"].contains($0["level"]?.stringValue ?? "") })
        let text = try JSONValue.parse(try await admin(t, "/v1/admin/events?q=PaymentSessionComplete").body)["events"]?.arrayValue ?? []
        #expect(text.contains { $0["session"]?.stringValue == done.id })
        await t.stop()
    }

    @Test("the timeline shows each step with the time since the start and since the previous step")
    func timeline() async throws {
        let t = try TestNode()
        let (done, _) = try await twoPayments(t)
        let doc = try JSONValue.parse(try await admin(t, "/v1/admin/sessions/\(done.id)/timeline").body)
        let events = try #require(doc["events"]?.arrayValue)
        let sinceStart = events.compactMap { $0["sinceStartMs"]?.doubleValue }
        #expect(sinceStart.first == 0)
        #expect(sinceStart == sinceStart.sorted())
        #expect(events.allSatisfy { ($0["sincePreviousMs"]?.doubleValue ?? -1) >= 0 })
        #expect(doc["session"]?["state"]?.stringValue == "completed")
        #expect((doc["durationMs"]?.doubleValue ?? 0) > 0)
        #expect(events.contains { $0["kind"]?.stringValue == "upstream.response" && $0["durationMs"] != nil && $0["status"]?.intValue == 200 })
        // A session in progress shows the phase its events last recorded, which its row may get up to a second later.
        let (open, stream) = try await t.sessions.fetched()
        await t.node.store.eventLog.flush()
        let inProgress = try JSONValue.parse(try await admin(t, "/v1/admin/sessions/\(open.id)/timeline").body)
        #expect(inProgress["session"]?["state"]?.stringValue == "awaitingInstrument")
        stream.connection.close()
        await t.stop()
    }

    @Test("without the admin token: 401", arguments: ["/v1/admin/events", "/v1/admin/sessions", "/v1/admin/sessions/0123456789abcdef0123456789abcdef/timeline"])
    func adminAuth(_ path: String) async throws {
        let t = try TestNode()
        #expect(try await admin(t, path, token: "wrong").status == 401)
        #expect(try await client.send(UpstreamRequest(url: t.base + path)).status == 401)
        #expect(try await admin(t, path, token: "test-key").status == 401, "a merchant key is not an admin token")
        await t.stop()
    }

    @Test("bad filters get a 400 naming the parameter", arguments: [
        ("/v1/admin/events?from=yesterday", "from"), ("/v1/admin/events?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "to"),
        ("/v1/admin/events?limit=0", "limit"), ("/v1/admin/events?limit=abc", "limit"), ("/v1/admin/events?cursor=-5", "cursor"),
        ("/v1/admin/events?level=loud", "level"), ("/v1/admin/events?kind=a%20b", "kind"), ("/v1/admin/events?session=xyz", "session"),
        ("/v1/admin/events?colour=red", "colour"), ("/v1/admin/sessions?state=happy", "state"), ("/v1/admin/sessions?msisdn=12", "msisdn"),
        ("/v1/admin/sessions?payeeReference=a%27b", "payeeReference"), ("/v1/admin/sessions?cursor=x", "cursor"),
        ("/v1/admin/events?q=" + String(repeating: "a", count: 300), "q"),
        // Numbers at and past their types' limits: each a 400 naming the parameter, never a trap.
        ("/v1/admin/events?limit=9223372036854775808", "limit"), ("/v1/admin/events?limit=-1", "limit"), ("/v1/admin/events?limit=1001", "limit"),
        ("/v1/admin/events?limit=%2B5", "limit"), ("/v1/admin/events?cursor=9223372036854775808", "cursor"), ("/v1/admin/events?cursor=-9223372036854775808", "cursor"),
        ("/v1/admin/events?from=9223372036854775807", "from"), ("/v1/admin/events?to=253402300800000", "to"),
        ("/v1/admin/events?from=-1", "from"), ("/v1/admin/sessions?cursor=9223372036854775807.0123456789abcdef0123456789abcdef", "cursor"),
        ("/v1/admin/sessions?cursor=-1.0123456789abcdef0123456789abcdef", "cursor"), ("/v1/admin/sessions?limit=18446744073709551616", "limit"),
    ])
    func badFilters(_ path: String, _ parameter: String) async throws {
        let t = try TestNode()
        let r = try await admin(t, path)
        #expect(r.status == 400)
        #expect(try JSONValue.parse(r.body)["parameter"]?.stringValue == parameter)
        await t.stop()
    }

    @Test("hostile strings are data, never SQL", arguments: [
        "' OR 1=1 --", "\"; DROP TABLE events; --", "%", "_", "\\", "') UNION SELECT * FROM sessions --", "Robert'); DELETE FROM events;--",
    ])
    func hostileStrings(_ hostile: String) async throws {
        let t = try TestNode()
        let (done, _) = try await twoPayments(t)
        let before = try t.node.store.eventCount()
        let encoded = PaymentURLHelper.percentEncode(hostile)
        for path in ["/v1/admin/events?q=\(encoded)", "/v1/admin/sessions?problemType=\(encoded)", "/v1/admin/sessions?paymentOrder=\(encoded.replacingOccurrences(of: "%20", with: ""))"] {
            let r = try await admin(t, path)
            #expect(r.status == 200 || r.status == 400, "\(path): \(r.status)")
            if r.status == 200 {
                // Matches, if any, hold the string literally: it was compared as text, not run.
                let doc = try JSONValue.parse(r.body)
                for row in (doc["events"] ?? doc["sessions"])?.arrayValue ?? [] {
                    #expect(row.text.contains(JSONValue.string(hostile).text.dropFirst().dropLast()), "\(path) matched \(row.text.prefix(80))")
                }
            }
        }
        #expect(try t.node.store.eventCount() >= before)
        #expect(try t.node.store.session(id: done.id) != nil)
        await t.stop()
    }

    @Test("after full flows, no secret or full MSISDN is in the database file or the logs; the suffix is searchable")
    func redactionScan() async throws {
        let t = try TestNode()
        let (done, declined) = try await twoPayments(t)
        let (card, s) = try await t.sessions.fetched()
        try await s.send(["id": "c", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-challenge"]])
        _ = try await s.event(.show3DSecure)
        await t.node.store.eventLog.flush()
        let (events, decoded) = try t.decodedEvents()
        #expect(events.contains { $0.kind == "upstream.response" && ($0.data?.text.count ?? 0) > 1_000 })
        await t.node.store.close()
        var bytes = Data()
        for suffix in ["", "-wal", "-shm"] {
            bytes += (try? Data(contentsOf: URL(fileURLWithPath: t.dir.file("kassa.sqlite" + suffix)))) ?? Data()
        }
        let everything = String(decoding: bytes, as: UTF8.self) + decoded + t.logs.text
        for secret in ["+46739000001", "46739000001", done.token, declined.token, card.token, "test-key", "second-key", "test-admin",
                       Simulator.defaultToken, "sim-card-challenge", "sim-card-frictionless", "sim-card-declined"] {
            #expect(!everything.contains(secret), "\(secret.prefix(12))… reached the database or the log")
        }
        #expect(everything.contains("…0001"), "the MSISDN suffix stays searchable")
        await t.node.edge.stop()
        t.dir.cleanup()
    }

    @Test("the admin stream delivers a session's events live")
    func adminStream() async throws {
        let t = try TestNode()
        let session = try await t.sessions.create(client: ["platform": "ios", "wallets": ["ApplePay"]])
        let live = try await sharedWebSocketClient.connect(port: t.node.port, path: "/v1/admin/stream?session=\(session.id)&token=test-admin")
        let stream = Stream(connection: live, checksContract: false)
        let c = try await t.sessions.stream(session)
        _ = try await c.event(.paymentSessionFetched)
        try await c.payByWallet("ApplePay", id: "1")
        let complete = try await stream.read { $0["kind"]?.stringValue == "push.sent" && $0["summary"]?.stringValue == "PaymentSessionComplete" }
        #expect(complete.allSatisfy { $0["session"]?.stringValue == session.id })
        let refused = try await onThread { [port = t.node.port] in try RawSocket(port: port).upgrade(path: "/v1/admin/stream?token=nope").status }
        #expect(refused == 401)
        await t.stop()
    }

    @Test("retention deletes events past their age and trims to the size limit; each delete finds its rows by time (events by a range of ids, the rest through an index on time)")
    func retention() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("r.sqlite"))
        let now: Int64 = 10 * 86_400_000
        let padding = String(repeating: "x", count: 500)
        for i in 0..<3_000 {
            store.eventLog.append(LogEvent(atMs: i < 1_000 ? 1_000 : now - 1_000, kind: "test", summary: "e\(i) \(padding)"))
        }
        await store.eventLog.flush()
        let byAge = try await Retention(maxAgeDays: 1, maxBytes: 1 << 40).run(store, nowMs: now)
        #expect(byAge == 1_000)
        let testEvents = try store.searchEvents({ var q = Store.EventQuery(); q.kinds = ["test"]; q.limit = 5_000; return q }())
        #expect(testEvents.count == 2_000, "the retention pass logs an event of its own; only the test's are counted")
        let used = try store.usedBytes()
        let bySize = try await Retention(maxAgeDays: 30, maxBytes: used / 2).run(store, nowMs: now)
        #expect(bySize > 0)
        // The pass's own event is committed first, so the reads below see one settled database.
        await store.eventLog.flush()
        #expect(try store.usedBytes() <= used / 2)
        #expect(try store.usedBytes() > used / 4, "no more than the excess went")
        #expect(try store.eventIDSpan() == Int64(try store.eventCount()), "only the oldest went: the ids left are contiguous")
        // The pass says what it cost: its write transactions (the age delete and the trims) and the longest.
        let passes = try store.searchEvents({ var q = Store.EventQuery(); q.kinds = ["retention"]; q.limit = 10; return q }())
        let trim = try #require(passes.first { $0.data?["deleted"]?.intValue == bySize })
        #expect((trim.data?["transactions"]?.intValue ?? 0) >= 2)
        #expect((trim.data?["slowestTransactionMs"]?.doubleValue ?? -1) > 0)
        // Which transaction was the slowest, and how long the first ones took (at most six).
        let transactions = trim.data?["transactions"]?.intValue ?? 0
        #expect((0..<transactions).contains(trim.data?["slowestTransaction"]?.intValue ?? -1))
        #expect(trim.data?["firstTransactionsMs"]?.arrayValue?.count == min(transactions, 6))
        #expect((trim.durationMs ?? 0) >= (trim.data?["slowestTransactionMs"]?.doubleValue ?? .infinity))
        let left = try store.searchEvents({ var q = Store.EventQuery(); q.kinds = ["test"]; q.limit = 1; return q }())
        #expect(left.first?.summary.hasPrefix("e\(1_000 + bySize) ") == true, "the oldest went first")

        // Each delete finds its rows by time (events by a range of ids), with many ended sessions stored
        // (with few rows SQLite may rightly prefer a scan: statistics make it plan for a big table).
        let statements = Store.retentionDeletes(endedPhases: Retention.endedPhases)
        try await store.pool.write { db in
            try db.execute(sql: "ANALYZE")
            try db.execute(sql: "UPDATE sqlite_stat1 SET stat = '100000 1' WHERE idx IN ('sessions_by_created', 'idempotency_by_created', 'payment_orders_without_session')")
            try db.execute(sql: "ANALYZE sqlite_schema")
        }
        // The ends of the event ids (for a window of time, and the trim's estimate) are read from
        // the table's ends: no scan, which in one SELECT of min and max there would be.
        let ends = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + EventLog.idEndsSQL).map { $0["detail"] as String }
        }
        #expect(!ends.contains { $0.hasPrefix("SCAN events") }, "\(ends)")
        #expect(try store.eventIDSpan() == (try await store.pool.read { db in try Int64.fetchOne(db, sql: "SELECT COUNT(*) FROM events") }))
        for sql in [statements.events, statements.sessions, statements.idempotency, statements.paymentOrders] {
            let plan = try await store.pool.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(Array(repeating: 0, count: sql.filter { $0 == "?" }.count)))
                    .map { $0["detail"] as String }
            }
            #expect(plan.contains { $0.contains("_by_created (created_at_ms<?)") || $0.contains("_without_session (created_at_ms<?)")
                        || $0.contains("INTEGER PRIMARY KEY (rowid<?)") }, "\(sql): \(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(sql): \(plan)")
        }
        await store.close()
    }
}

@Suite("CLI: kassa events")
struct EventsCommandTests {
    func run(_ arguments: [String]) async throws -> (Int32?, String, String) {
        let p = try KassaProcess(arguments)
        let status = try await onThread { p.waitForExit() }
        return (status, p.stdout, p.stderr)
    }

    @Test("reads a database file: table, JSON lines, CSV, with the API's filters and errors")
    func fromDatabase() async throws {
        let t = try TestNode()
        let (session, s) = try await t.sessions.fetched()
        await t.node.store.eventLog.flush()
        let db = t.dir.file("kassa.sqlite")

        let (status, table, _) = try await run(["events", "--db", db, "--session", session.id, "--kind", "push.sent"])
        #expect(status == 0)
        let lines = table.split(separator: "\n")
        #expect(lines.first?.hasPrefix("at") == true && lines.first?.contains("summary") == true)
        #expect(lines.count == 2 && lines[1].contains("PaymentSessionFetched"))
        #expect(lines[0].range(of: "kind")?.lowerBound.utf16Offset(in: lines[0]) == lines[1].range(of: "push.sent")?.lowerBound.utf16Offset(in: lines[1]),
                "columns are aligned")

        let (_, json, _) = try await run(["events", "--db", db, "--session", session.id, "--format", "json"])
        let objects = try json.split(separator: "\n").map { try JSONValue.parse(String($0)) }
        #expect(objects.count >= 5 && objects.allSatisfy { $0["session"]?.stringValue == session.id })

        let (_, csv, _) = try await run(["events", "--db", db, "--kind", "session.created", "--format", "csv"])
        #expect(csv.hasPrefix("at,node,session,seq,kind,level,status,ms,summary\n"))

        let (bad, _, err) = try await run(["events", "--db", db, "--from", "last tuesday"])
        #expect(bad != 0)
        #expect(err.contains("from must be an ISO 8601 time"))
        await t.stop()
    }

    @Test("queries running nodes with --url, merging by time, and --follow streams new events")
    func fromNodes() async throws {
        let a = try TestNode(), b = try TestNode()
        let sa = try await a.sessions.create()
        let sb = try await b.sessions.create()
        await a.node.store.eventLog.flush(); await b.node.store.eventLog.flush()
        let (status, out, err) = try await run(["events", "--url", a.base, "--url", b.base, "--admin-token", "test-admin",
                                               "--kind", "session.created", "--format", "json"])
        #expect(status == 0, "\(err)")
        let events = try out.split(separator: "\n").map { try JSONValue.parse(String($0)) }
        #expect(Set(events.compactMap { $0["session"]?.stringValue }) == [sa.id, sb.id])
        let times = events.compactMap { $0["atMs"]?.doubleValue }
        #expect(times == times.sorted())

        let follower = try KassaProcess(["events", "--url", a.base, "--admin-token", "test-admin", "--kind", "session.created",
                                         "--format", "json", "--follow"])
        let later = try await a.sessions.create()
        let deadline = Date().addingTimeInterval(10)
        while !follower.stdout.contains(later.id) && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(follower.stdout.contains(later.id))
        #expect(follower.stdout.components(separatedBy: sa.id).count == 2, "each event once")
        follower.signal(SIGTERM)
        await a.stop(); await b.stop()
    }
}
