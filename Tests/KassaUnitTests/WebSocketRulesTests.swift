@testable import KassaEdge
import Testing

/// (Swift Testing's #expect cannot call a mutating method, so each decision is taken first, then checked.)
@Suite("Edge: WebSocket rules without sockets")
struct WebSocketRulesTests {
    func frame(_ n: Int, _ fill: UInt8 = 0x61) -> [UInt8] { [UInt8](repeating: fill, count: n) }

    @Test("frames leave in the order they were queued, and the close only after all of them")
    func order() {
        var q = OutboundQueue(maxBytes: 1_000)
        let first = q.enqueue(frame(10, 1)), second = q.enqueue(frame(10, 2))
        #expect(first == .queued && second == .queued)
        let closed = q.close(code: 1000, reason: "done")
        #expect(closed)
        let afterClose = q.enqueue(frame(10, 3))
        #expect(afterClose == .closing, "nothing is queued after a close")
        let secondClose = q.close(code: 1001, reason: "later")
        #expect(!secondClose, "the first close wins")

        var steps: [OutboundQueue.Step] = []
        var written: [UInt8] = []
        while true {
            let step = q.nextStep()
            steps.append(step)
            guard step == .frames else { break }
            written.append(q.takeFirst().frame[0])
        }
        #expect(written == [1, 2])
        #expect(steps == [.frames, .frames, .close(code: 1000, reason: "done")])
        #expect(q.bytes == 0)
    }

    @Test("a due ping goes before waiting frames; then the frames, then nothing")
    func pingFirst() {
        var q = OutboundQueue(maxBytes: 1_000)
        _ = q.enqueue(frame(5))
        q.pingDue = true
        let ping = q.nextStep()
        #expect(ping == .ping)
        #expect(q.wantsWriteable, "the frame still waits")
        let frames = q.nextStep()
        #expect(frames == .frames)
        _ = q.takeFirst()
        let nothing = q.nextStep()
        #expect(nothing == .nothing)
        #expect(q.isIdle)
    }

    @Test("one frame past the byte bound drops the queue and closes with 4008; a frame that fits exactly does not")
    func slowConsumer() {
        var q = OutboundQueue(maxBytes: 100)
        let fits = q.enqueue(frame(60)), exactly = q.enqueue(frame(40))
        #expect(fits == .queued && exactly == .queued)
        #expect(q.bytes == 100)
        let over = q.enqueue(frame(1))
        #expect(over == .slowConsumer)
        #expect(q.frameCount == 0 && q.bytes == 0)
        let step = q.nextStep()
        #expect(step == .close(code: WebSocketCloseCode.slowConsumer, reason: "slow consumer: resume with since"))
    }

    @Test("a coalesced batch takes frames in order up to its byte limit, at least one, and the rest wait")
    func batches() {
        var q = OutboundQueue(maxBytes: 10_000)
        for i in 1...5 { _ = q.enqueue(frame(400, UInt8(i))) }
        let first = q.takeBatch(byteLimit: 1_000).map { $0.frame[0] }
        #expect(first == [1, 2, 3])
        #expect(q.frameCount == 2 && q.bytes == 800)
        let alone = q.takeBatch(byteLimit: 10).map { $0.frame[0] }
        #expect(alone == [4], "a frame larger than the limit still goes, alone")
        let last = q.takeBatch(byteLimit: 1_000).map { $0.frame[0] }
        #expect(last == [5])
        let none = q.takeBatch(byteLimit: 1_000)
        #expect(none.isEmpty)
    }

    @Test("heartbeat: ping after the interval of silence, once per interval; hang up after the idle timeout, once")
    func heartbeat() {
        var h = Heartbeat(pingAfterSeconds: 20, hangUpAfterSeconds: 60)
        let unwatched = h.check(nowMs: 1_000_000)
        #expect(unwatched == .wait, "not watched before the peer was first heard")
        h.heard(atMs: 1_000)
        let decisions = [20_999, 21_000, 30_000, 41_000].map { h.check(nowMs: Int64($0)) }
        #expect(decisions == [.wait, .ping, .wait, .ping], "one ping per interval of silence")
        h.heard(atMs: 45_000)
        let afterPong = [60_000, 105_000, 200_000].map { h.check(nowMs: Int64($0)) }
        #expect(afterPong == [.wait, .hangUp, .wait], "a pong restarts the silence; hung up once, then no longer watched")
    }

    @Test("heartbeat with pings and the idle timeout off never acts")
    func heartbeatOff() {
        var h = Heartbeat(pingAfterSeconds: 0, hangUpAfterSeconds: 0)
        h.heard(atMs: 1)
        let decision = h.check(nowMs: Int64.max / 2)
        #expect(decision == .wait)
    }
}
