import Foundation
import KassaCore
@testable import KassaGateway
import KassaUpstream
import Testing
@testable import kassa

/// OpenTelemetry traces, exported over OTLP/HTTP to a real receiver that decodes the protobuf
/// with OpenTelemetry's own proto package (Tests/python/otlp_receiver.py).
@Suite("Traces over OTLP/HTTP", .timeLimit(.minutes(2)))
struct TracingTests {
    struct ExportedSpan {
        let json: JSONValue
        var traceID: String { json["traceId"]?.stringValue ?? "" }
        var spanID: String { json["spanId"]?.stringValue ?? "" }
        var parentID: String { json["parentSpanId"]?.stringValue ?? "" }
        var name: String { json["name"]?.stringValue ?? "" }
        var kind: String { json["kind"]?.stringValue ?? "" }
        func attribute(_ key: String) -> JSONValue? { json["attributes"]?[key] }
        func string(_ key: String) -> String? { attribute(key)?.stringValue }
    }

    /// A receiver on an ephemeral port; its spans so far.
    final class Receiver: Sendable {
        let child: ChildProcess
        let port: Int

        init() async throws {
            child = try ChildProcess(["python3", testsPath("python/otlp_receiver.py")], environment: ProcessInfo.processInfo.environment)
            for _ in 0..<500 {
                if let line = child.stdoutText.split(separator: "\n").first, line.hasPrefix("port "), let port = Int(line.dropFirst(5)) {
                    self.port = port
                    return
                }
                if child.status != nil { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw TestFailure("the OTLP receiver did not start: \(child.stderrText)")
        }

        var spans: [ExportedSpan] {
            child.stdoutText.split(separator: "\n").dropFirst().compactMap { try? JSONValue.parse(Array($0.utf8)) }.map(ExportedSpan.init)
        }

        func stop() {
            child.closeInput()
            _ = child.waitForExit(seconds: 5)
        }
    }

    @Test("a full Swish payment is one trace: the create request, its upstream calls and their attempts, commands, pushes and commits")
    func fullFlow() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let t = try TestNode(configure: { $0.otlpEndpoint = "http://127.0.0.1:\(receiver.port)/v1/traces" })
        let merchantTrace = "0af7651916cd43dd8448eb211c80319c", merchantSpan = "b7ad6b7169203331"
        let r = try await UpstreamClient().send(UpstreamRequest(
            method: "POST", url: t.base + "/v1/sessions",
            headers: [("Your-Api-Key", "test-key"), ("Content-Type", "application/json"), ("traceparent", "00-\(merchantTrace)-\(merchantSpan)-01")],
            body: (["paymentOrder": SessionClient.order()] as JSONValue).bytes))
        #expect(r.status == 201, "\(r.text)")
        let created = try JSONValue.parse(r.body)
        let session = SessionClient.Created(id: created["id"]!.stringValue!, token: created["clientToken"]!.stringValue!,
                                            streamUrl: created["streamUrl"]!.stringValue!)
        let stream = try await t.sessions.stream(session)
        _ = try await stream.event(.paymentSessionFetched)
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "Swish", "msisdn": "+46739000001"]])
        _ = try await stream.event(.paymentSessionComplete)
        stream.connection.close()
        #expect(try await UpstreamClient().send(UpstreamRequest(url: t.base + "/healthz")).status == 200)
        #expect(try await UpstreamClient().send(UpstreamRequest(url: t.base + "/metrics")).status == 200)
        let lastUpstreamTraceparent = try #require(t.simulator.lastTraceparent)
        let logs = t.logs.text
        // The graceful stop flushes the exporter after the node has drained.
        await t.stop(keepDirectory: true)
        // Read back after a restart, the session's later spans still hang below its creating request.
        let again = try TestNode(directory: t.dir, configure: { $0.otlpEndpoint = "http://127.0.0.1:\(receiver.port)/v1/traces" })
        #expect(try await again.sessions.snapshot(session).status == 200)
        await again.stop()
        var spans: [ExportedSpan] = []
        for _ in 0..<250 {
            spans = receiver.spans
            if spans.contains(where: { $0.name == "session read back" }) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!receiver.child.stdoutText.contains("\"error\""), "\(receiver.child.stdoutText.prefix(400))")

        #expect(!spans.contains { $0.name.hasSuffix("/healthz") || $0.name.hasSuffix("/metrics") }, "probes and scrapes make no spans")
        // One trace, the merchant's; the create request is its root below the merchant's span.
        let inSession = spans.filter { $0.traceID == merchantTrace }
        let root = try #require(inSession.first { $0.name == "POST /v1/sessions" }, "spans: \(spans.map(\.name))")
        #expect(root.kind == "SPAN_KIND_SERVER" && root.parentID == merchantSpan)
        #expect(root.string("http.request.method") == "POST" && root.string("http.route") == "/v1/sessions")
        #expect(root.attribute("http.response.status_code")?.intValue == 201)
        #expect(root.json["resource"]?["service.name"]?.stringValue == "kassa")
        let byID = Dictionary(inSession.map { ($0.spanID, $0) }, uniquingKeysWith: { a, _ in a })
        for span in inSession where span.spanID != root.spanID {
            #expect(byID[span.parentID] != nil, "\(span.name) has a parent in the trace")
            #expect((span.json["end"]?.doubleValue ?? 0) >= (span.json["start"]?.doubleValue ?? 1), "\(span.name) ends after it starts")
        }
        func parent(_ span: ExportedSpan) -> ExportedSpan? { byID[span.parentID] }
        func ancestors(_ span: ExportedSpan) -> [String] {
            var names: [String] = [], at = span
            while let up = parent(at) { names.append(up.name); at = up }
            return names
        }

        // The payment order created for the session: an HTTP client span below the request.
        let order = try #require(inSession.first { $0.string("kassa.upstream.operation") == "create-paymentorder" })
        #expect(order.kind == "SPAN_KIND_CLIENT" && order.name == "POST" && order.parentID == root.spanID)
        #expect(order.attribute("http.response.status_code")?.intValue == 201 && order.string("server.address") == "127.0.0.1")

        // Each session call is a span of its own with its attempts below it; no URL holds the session's token.
        let calls = inSession.filter { $0.name.hasPrefix("swedbankpay ") }
        #expect(calls.count >= 3, "\(calls.map(\.name))")
        for call in calls {
            let attempts = inSession.filter { $0.parentID == call.spanID && $0.attribute("http.request.method") != nil }
            #expect(!attempts.isEmpty, "\(call.name) has its HTTP attempts")
            #expect(attempts.allSatisfy { $0.string("kassa.upstream.operation") == call.string("kassa.upstream.operation") })
            #expect(call.attribute("kassa.upstream.retries")?.intValue == attempts.count - 1)
            #expect(call.string("kassa.session.id") == session.id)
        }
        let fetch = try #require(calls.first { $0.name == "swedbankpay view-paymentsession" })
        #expect(fetch.parentID == root.spanID, "the session's first read goes below its creating request")
        for attempt in inSession where attempt.kind == "SPAN_KIND_CLIENT" && attempt.attribute("url.full") != nil {
            #expect(!(attempt.string("url.full") ?? "").contains(session.token))
            #expect(attempt.string("http.request.method") != nil && attempt.attribute("server.port") != nil)
        }
        // What Swedbank Pay received names the attempt span it came from.
        let upstreamParent = try #require(TraceContext.parentID(fromTraceparent: lastUpstreamTraceparent))
        #expect(byID[upstreamParent]?.kind == "SPAN_KIND_CLIENT", "traceparent upstream: \(lastUpstreamTraceparent)")

        // Pushes are producer spans below what caused them; the commits they waited for are spans too.
        let fetched = try #require(inSession.first { $0.name == "push PaymentSessionFetched" })
        #expect(fetched.kind == "SPAN_KIND_PRODUCER")
        #expect(ancestors(fetched) == ["swedbankpay prepare-payment", "swedbankpay view-paymentsession", "POST /v1/sessions"],
                "the session read itself, prepared the payment, then pushed")
        #expect(fetched.string("messaging.operation.type") == "send" && fetched.attribute("kassa.push.seq")?.intValue == 1)
        let command = try #require(inSession.first { $0.name == "command attempt Swish" })
        #expect(command.kind == "SPAN_KIND_SERVER" && command.parentID == root.spanID && command.string("kassa.command.source") == "ws")
        let complete = try #require(inSession.first { $0.name == "push PaymentSessionComplete" })
        #expect(ancestors(complete).contains(command.name), "the completion descends from the command: \(ancestors(complete))")
        let readBack = try #require(inSession.first { $0.name == "session read back" })
        #expect(readBack.parentID == root.spanID && readBack.string("kassa.session.id") == session.id)
        let commits = inSession.filter { $0.name == "event-log commit" }
        #expect(!commits.isEmpty && commits.allSatisfy { $0.string("db.system.name") == "sqlite" && $0.kind == "SPAN_KIND_CLIENT" })

        // Log lines carry the ids: the create request's access line, and the session's state changes.
        let lines = logs.split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
        #expect(lines.contains { $0["span_id"]?.stringValue == root.spanID && $0["trace_id"]?.stringValue == merchantTrace
                                 && $0["route"]?.stringValue == "sessions.create" })
        #expect(lines.contains { $0["message"]?.stringValue == "session completed" && $0["span_id"]?.stringValue == root.spanID })
    }

    @Test("without --otlp-endpoint nothing is exported and log lines carry the trace id alone")
    func offByDefault() async throws {
        let t = try TestNode()
        let (_, stream) = try await t.sessions.fetched()
        stream.connection.close()
        #expect(t.node.traceExport == nil && !t.node.gateway.telemetry.isOn)
        let lines = t.logs.text.split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
        #expect(lines.contains { $0["trace_id"] != nil })
        #expect(!lines.contains { $0["span_id"] != nil })
        await t.stop()
    }

    @Test("--otlp-endpoint takes a collector's base URL or a traces URL")
    func endpointOption() throws {
        #expect(try Serve.tracesURL("http://collector:4318") == "http://collector:4318/v1/traces")
        #expect(try Serve.tracesURL("http://collector:4318/") == "http://collector:4318/v1/traces")
        #expect(try Serve.tracesURL("https://otel.example/custom/traces") == "https://otel.example/custom/traces")
        #expect(throws: (any Error).self) { try Serve.tracesURL("collector:4318") }
        #expect(throws: (any Error).self) { try Serve.tracesURL("ftp://collector/") }
    }
}
