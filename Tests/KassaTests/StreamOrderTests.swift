import Foundation
import KassaCore
@testable import KassaGateway
import KassaStore
import KassaUpstream
import Testing
@testable import kassa

/// One stream's frames reach its session in the order they were sent, and the edge's
/// service thread never touches the store.
@Suite("Sessions: ordered streams, a service thread that never waits")
struct StreamOrderTests {
    @Test("back-to-back attempt and abort on many sessions reach each session in order")
    func commandPairsInOrder() async throws {
        try await withTestNode { t in
            var streams: [(SessionClient.Created, Stream)] = []
            for _ in 0..<24 { streams.append(try await t.sessions.fetched()) }
            for (_, stream) in streams {
                // Sent together, with nothing awaited in between.
                stream.sendText(#"{"id":"a","type":"attempt","instrument":{"type":"Swish","msisdn":"+46739000001"}}"#)
                stream.sendText(#"{"id":"b","type":"abort"}"#)
                stream.sendText(#"{"id":"c","type":"retry"}"#)
            }
            for (_, stream) in streams { _ = try await stream.ack("c") }
            await t.node.store.eventLog.flush()
            for (session, stream) in streams {
                let commands = try t.node.store.eventLog.events(sessionID: session.id).filter { $0.kind == "client.command" }.map(\.summary)
                #expect(commands == ["ws: attempt Swish", "ws: abort", "ws: retry"], "\(session.id)")
                let answers = stream.received.compactMap { $0["re"]?.stringValue }
                #expect(answers == ["a", "b", "c"], "answers come back in the order the commands were sent")
            }
            #expect(t.node.edge.blockingCallsOnServiceThread == 0)
        }
    }

    @Test("a stream for a session only the store holds is opened off the service thread; refusals come as a problem and a close")
    func storeLookupsOffTheServiceThread() async throws {
        try await withTestNode(configure: { $0.endedSessionMemorySeconds = 0.1 }) { t in
            let (session, stream) = try await t.sessions.fetched()
            try await stream.send(["id": "1", "type": "abort"])
            _ = try await stream.event(.paymentSessionCanceled)
            stream.connection.close()
            for _ in 0..<50 where t.node.gateway.sessions.held(session.id) != nil { try await Task.sleep(for: .milliseconds(100)) }
            #expect(t.node.gateway.sessions.held(session.id) == nil, "evicted: only the store has it now")

            // Read back from the store by the stream's inbox, replayed, and in order.
            let replay = try await t.sessions.stream(session)
            _ = try await replay.event(.paymentSessionCanceled)
            #expect(replay.types == ["PaymentSessionFetched", "PaymentSessionCanceled"])
            replay.connection.close()
            for _ in 0..<50 where t.node.gateway.sessions.held(session.id) != nil { try await Task.sleep(for: .milliseconds(100)) }

            // A well-formed token sealed by another cluster: the store decides, after the upgrade.
            let foreign = try TokenKeys(secrets: ["another-cluster-secret-0123456789abcdef"])
            let forged = SessionToken.issue(sessionID: session.id, href: "https://elsewhere.example/x", expiresAt: 4_000_000_000, keys: foreign)
            let refused = try await t.sessions.stream(SessionClient.Created(id: session.id, token: forged, streamUrl: "/v1/sessions/\(session.id)/stream"))
            let frames = try await refused.collectUntilClosed()
            #expect(frames.problem?["status"]?.intValue == 401)
            #expect(frames.closeCode == 4401)

            #expect(t.node.edge.blockingCallsOnServiceThread == 0, "no store call ran on the service thread")
        }
    }

    @Test("withTestNode stops its node even when the test body throws")
    func scopedNodeStops() async throws {
        final class Seen: @unchecked Sendable { var base = "" }
        let seen = Seen()
        await #expect(throws: TestFailure.self) {
            try await withTestNode { t in
                seen.base = t.base
                throw TestFailure("thrown on purpose")
            }
        }
        let client = UpstreamClient()
        await #expect(throws: (any Error).self, "the node's port no longer answers") {
            _ = try await client.send(UpstreamRequest(url: seen.base + "/healthz", connectTimeoutMs: 500, totalTimeoutMs: 1_000))
        }
    }

    @Test("the check works: a store call on a thread marked non-blocking is counted")
    func checkCountsViolations() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let marked = NonBlockingThread(name: "test")
        try await onThread {
            marked.markCurrentThread()
            _ = try store.session(id: "00")
        }
        #expect(marked.violations.load(ordering: .relaxed) == 1)
        _ = await store.close()
    }
}

extension Stream {
    /// Every frame until the server closes the stream, with the close code.
    func collectUntilClosed() async throws -> (problem: JSONValue?, closeCode: UInt16?) {
        var problem: JSONValue?
        var iterator = connection.events.makeAsyncIterator()
        while let event = await iterator.next() {
            switch event {
            case .text(let text, _): if let value = try? JSONValue.parse(text), value["ok"] == false { problem = value["problem"] }
            case .closed(let code): return (problem, code)
            }
        }
        return (problem, nil)
    }
}
