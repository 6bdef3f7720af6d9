import Foundation
import KassaCore
import KassaEdge
import Synchronization

/// Why a flow failed: a short reason from a bounded set, the key of the report's `failed`.
struct FlowFailure: Error {
    /// What went wrong, the same for every flow it happens to (the report counts by it).
    let reason: String
    /// This flow's particulars (the seq expected and the one read), for the report's samples.
    var detail: String?
    /// The session the flow was on, once it had one: its events are in the gateway's log.
    var session: String?
    init(_ reason: String, detail: String? = nil) { self.reason = reason; self.detail = detail }
}

/// Reads one session stream and checks every frame: pushes belong to the session,
/// their `seq` goes up by exactly one (no gap, no duplicate), acknowledgements
/// answer commands sent, and nothing arrives that the flow did not expect.
final class StreamReader: @unchecked Sendable {
    let connection: WebSocketClientConnection
    let session: String
    private var iterator: WebSocketClientEvents.AsyncIterator
    private let recorder: LoadRecorder
    private let deadlines: Deadlines
    private let deadline: Deadlines.Slot
    private let stepTimeout: Duration
    /// The seq of the last push read; the next must be one more.
    private(set) var lastSeq: Int64
    private var acks: [String: StreamFrame] = [:]
    /// Pushes read while waiting for an answer, not yet asked for.
    private var early: [StreamFrame] = []
    private(set) var closed = false

    init(connection: WebSocketClientConnection, session: String, since: Int64,
         recorder: LoadRecorder, deadlines: Deadlines, stepTimeout: Duration) {
        self.connection = connection
        self.session = session
        self.iterator = connection.events.makeAsyncIterator()
        self.recorder = recorder
        self.deadlines = deadlines
        self.deadline = deadlines.register(connection)
        self.stepTimeout = stepTimeout
        self.lastSeq = since
    }

    deinit { deadlines.unregister(deadline) }

    /// Reads until the push of type `type`, which it returns. Pushes of the types in
    /// `tolerating` may come first; any other push fails the flow.
    @discardableResult
    func push(_ type: PushType, tolerating: Set<PushType> = []) async throws(FlowFailure) -> StreamFrame {
        while true {
            let frame = early.isEmpty ? try await next(waitingFor: type.rawValue) : early.removeFirst()
            guard !frame.hasRe, let pushed = frame.type else { continue }
            if pushed == type.rawValue { return frame }
            if !(PushType(rawValue: pushed).map(tolerating.contains) ?? false) {
                throw FlowFailure("unexpected \(pushed) while waiting for \(type.rawValue)")
            }
        }
    }

    /// Waits for the answer to command `id`; a refusal fails the flow with the problem's type.
    /// Pushes may overtake the answer (the session pushes while handling the command):
    /// those in `tolerating` are kept for the next `push` calls.
    @discardableResult
    func ack(_ id: String, tolerating: Set<PushType> = []) async throws(FlowFailure) -> StreamFrame {
        while acks[id] == nil {
            let frame = try await next(waitingFor: "the answer to \(id)")
            guard !frame.hasRe, let pushed = frame.type else { continue }
            guard PushType(rawValue: pushed).map(tolerating.contains) ?? false else { throw FlowFailure("unexpected \(pushed) while waiting for a command answer") }
            early.append(frame)
        }
        return acks.removeValue(forKey: id)!
    }

    func send(_ command: JSONValue) { connection.send(command) }

    func send(text: String) { connection.send(text) }

    /// Closes the stream and waits until it is closed.
    func close() async {
        guard !closed else { return }
        connection.close()
        while let event = await iterator.next() {
            if case .closed = event { break }
        }
        finish()
    }

    /// Holds the stream open until `until` (wall clock of the run), pinging every `pingEvery` if set.
    func hold(until end: ContinuousClock.Instant, pingEvery: Duration?, recordPing: (ContinuousClock.Instant) -> Void) async throws(FlowFailure) {
        var n = 0
        while ContinuousClock.now < end {
            let wake = pingEvery.map { min(ContinuousClock.now + $0, end) } ?? end
            do { try await Task.sleep(until: wake, clock: .continuous) } catch { return }
            guard !closed else { throw FlowFailure("stream closed while idle") }
            if pingEvery != nil, ContinuousClock.now < end {
                n += 1
                let id = "idle-\(n)"
                let sent = ContinuousClock.now
                send(ClientCommand.ping.frame(id: id))
                try await ack(id)
                recordPing(sent)
            }
        }
        // A final round trip shows the stream outlived the hold.
        send(ClientCommand.ping.frame(id: "idle-end"))
        try await ack("idle-end")
    }

    private func finish() {
        guard !closed else { return }
        closed = true
        recorder.streamClosed()
    }

    private func next(waitingFor what: String) async throws(FlowFailure) -> StreamFrame {
        guard !closed else { throw FlowFailure("stream closed while waiting for \(what)") }
        deadline.arm(after: stepTimeout)
        let event = await iterator.next()
        let timedOut = deadline.disarm()
        switch event {
        case nil, .closed?:
            finish()
            if timedOut { throw FlowFailure("timeout waiting for \(what)") }
            if case .closed(let code)? = event, let code { throw FlowFailure("stream closed with \(code) while waiting for \(what)") }
            throw FlowFailure("stream closed while waiting for \(what)")
        case .text(let text, let receivedAtNs)?:
            guard let frame = StreamFrame.read(text) else {
                recorder.protocolError()
                throw FlowFailure("protocol: a frame is not JSON")
            }
            if frame.hasRe {
                recorder.frame(push: false)
                guard let ok = frame.ok, let id = frame.re else {
                    recorder.protocolError()
                    throw FlowFailure("protocol: an answer without a command id")
                }
                if !ok { throw FlowFailure("command refused: \(frame.problemType ?? "no problem type")") }
                acks[id] = frame
                return frame
            }
            guard let seq = frame.seq, seq >= 1, let pushSession = frame.session, frame.type != nil else {
                recorder.protocolError()
                throw FlowFailure("protocol: a frame that is neither a push nor an answer")
            }
            recorder.frame(push: true)
            guard pushSession == session else { recorder.protocolError(); throw FlowFailure("protocol: a push for another session") }
            if seq != lastSeq + 1 {
                recorder.protocolError()
                throw FlowFailure(seq <= lastSeq ? "protocol: duplicate or old seq" : "protocol: gap in seq",
                                  detail: "seq \(seq) (\(frame.type ?? "")) after seq \(lastSeq)")
            }
            lastSeq = seq
            if let at = frame.at.flatMap(Timestamp.parseISO8601Microseconds) {
                // A live push's `at` has microseconds (a replay's only milliseconds, but replays are not timed).
                let madeNs = UInt64(max(at, 0)) * 1_000
                // A push made before this stream opened is a replay (an observer that joined late
                // reads the session's earlier pushes): the time since is not a push latency.
                if madeNs >= connection.openedAtNs - connection.openedAtNs % 1_000_000 {
                    recorder.record("push", microseconds: receivedAtNs > madeNs ? (receivedAtNs - madeNs) / 1000 : 0)
                }
            }
            return frame
        }
    }
}

/// The members of a stream frame the load client checks, read from its bytes: a push's `data`
/// (instrument lists, problems) is stepped over, not built into a tree for every frame.
struct StreamFrame {
    /// The frame had `re`: it answers a command (`re` is its id as text, nil when unreadable).
    var hasRe = false
    var re: String?
    var ok: Bool?
    var problemType: String?
    var type: String?
    /// A whole number (`JSONValue.intValue`); nil for any other value.
    var seq: Int64?
    var session: String?
    var at: String?

    /// Nil when the text is not one JSON object.
    static func read(_ text: String) -> StreamFrame? {
        (try? JSONReader.read(Array(text.utf8)) { r throws(JSONParseError) -> StreamFrame? in
            var frame = StreamFrame()
            let isObject = try r.object { r, name throws(JSONParseError) in
                switch name {
                case "re": frame.hasRe = true; frame.re = CommandAnswer.id(try r.value())
                case "ok": frame.ok = try r.bool()
                case "type": frame.type = try r.string()
                case "seq": frame.seq = try r.value().intValue.map(Int64.init)
                case "session": frame.session = try r.string()
                case "at": frame.at = try r.string()
                case "problem": _ = try r.object { r, name throws(JSONParseError) in if name == "type" { frame.problemType = try r.string() } }
                default: break
                }
            }
            return isObject ? frame : nil
        }) ?? nil
    }
}

/// Step deadlines for every open stream, swept by one task: an overdue stream is closed,
/// which ends the read that waited on it. Each stream has its own slot, registered once:
/// arming and disarming a step (twice per frame) are atomic stores on the slot, not lock
/// round trips on a table every client thread shares.
final class Deadlines: Sendable {
    final class Slot: Sendable {
        let connection: WebSocketClientConnection
        /// Monotonic nanoseconds by which the awaited frame must arrive; 0 while nothing is awaited.
        fileprivate let dueNs = Atomic<UInt64>(0)
        fileprivate let expired = Atomic<Bool>(false)

        init(connection: WebSocketClientConnection) { self.connection = connection }

        func arm(after timeout: Duration) {
            dueNs.store(Deadlines.nowNs() + max(LoadRecorder.microseconds(timeout) * 1_000, 1), ordering: .releasing)
        }

        /// Returns whether the deadline had passed (and the stream was closed for it).
        func disarm() -> Bool {
            dueNs.store(0, ordering: .releasing)
            return expired.exchange(false, ordering: .acquiringAndReleasing)
        }
    }

    private let slots = Mutex<[ObjectIdentifier: Slot]>([:])

    static func nowNs() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func register(_ connection: WebSocketClientConnection) -> Slot {
        let slot = Slot(connection: connection)
        slots.withLock { $0[ObjectIdentifier(slot)] = slot }
        return slot
    }

    func unregister(_ slot: Slot) {
        _ = slots.withLock { $0.removeValue(forKey: ObjectIdentifier(slot)) }
    }

    /// Closes every stream whose deadline has passed.
    func sweep() {
        let now = Self.nowNs()
        let overdue = slots.withLock { all in
            all.values.filter { slot in
                let due = slot.dueNs.load(ordering: .acquiring)
                // Claimed here, or disarmed by its reader first: never both.
                guard due != 0, due <= now, slot.dueNs.compareExchange(expected: due, desired: 0, ordering: .acquiringAndReleasing).exchanged
                else { return false }
                slot.expired.store(true, ordering: .releasing)
                return true
            }
        }
        for slot in overdue { slot.connection.close() }
    }
}
