/// The edge's rules for one WebSocket, as values with no socket: what is written next and in
/// which order, when a peer is too slow, when to ping it and when to hang up. The lws callback
/// only carries out their decisions; the unit tests check the rules alone.

/// What waits to be written to one WebSocket: a due ping first, then the frames in the order
/// they were queued, then at most one close, after every frame queued before it.
struct OutboundQueue {
    typealias Item = (frame: [UInt8], stamp: ContinuousClock.Instant?)

    /// Bytes that may wait; one more frame past it makes the peer a slow consumer.
    let maxBytes: Int
    private var items: [Item] = []
    private var head = 0
    private(set) var bytes = 0
    private(set) var pendingClose: (code: UInt16, reason: String)?
    var pingDue = false

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    var frameCount: Int { items.count - head }
    /// Nothing (frame, ping or close) waits for a writeable callback.
    var isIdle: Bool { pendingClose == nil && frameCount == 0 && !pingDue }
    /// Something waits, so another writeable callback is needed.
    var wantsWriteable: Bool { !isIdle }

    enum Enqueued: Equatable {
        case queued
        /// Over `maxBytes`: every waiting frame is dropped and a 4008 close queued (the client resumes with `since`).
        case slowConsumer
        /// A close is already queued: nothing more goes out.
        case closing
    }

    mutating func enqueue(_ frame: [UInt8], stamp: ContinuousClock.Instant? = nil) -> Enqueued {
        guard pendingClose == nil else { return .closing }
        guard bytes + frame.count <= maxBytes else {
            items.removeAll()
            head = 0
            bytes = 0
            pendingClose = (WebSocketCloseCode.slowConsumer, "slow consumer: resume with since")
            return .slowConsumer
        }
        items.append((frame, stamp))
        bytes += frame.count
        return .queued
    }

    /// Queues a close after the waiting frames; false when one is already queued (the first wins).
    @discardableResult
    mutating func close(code: UInt16, reason: String) -> Bool {
        guard pendingClose == nil else { return false }
        pendingClose = (code, reason)
        return true
    }

    enum Step: Equatable {
        case ping, frames, close(code: UInt16, reason: String), nothing
    }

    /// What one writeable callback does: a due ping goes before everything, frames before the close.
    mutating func nextStep() -> Step {
        if pingDue {
            pingDue = false
            return .ping
        }
        if frameCount > 0 { return .frames }
        if let close = pendingClose { return .close(code: close.code, reason: close.reason) }
        return .nothing
    }

    /// The next frame in order; the storage is reset (capacity kept) once the queue is empty.
    mutating func takeFirst() -> Item {
        let next = items[head]
        items[head] = ([], nil)
        head += 1
        bytes -= next.frame.count
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
        return next
    }

    /// The frames for one coalesced write, in order: at least one, and no more once `byteLimit`
    /// is reached (the rest wait for the next callback).
    mutating func takeBatch(byteLimit: Int) -> [Item] {
        var batch: [Item] = []
        var size = 0
        while frameCount > 0, batch.isEmpty || size < byteLimit {
            let item = takeFirst()
            size += item.frame.count
            batch.append(item)
        }
        return batch
    }
}

/// When to ping a silent peer and when to give up on it, from the time it was last heard.
struct Heartbeat {
    /// Milliseconds of silence before a ping (0: never), and before hanging up (0: never).
    let pingAfterMs: Int64
    let hangUpAfterMs: Int64
    /// When the peer was last heard from (a frame or a pong); 0 while not watched.
    private(set) var lastHeardMs: Int64 = 0
    private var pingSentMs: Int64 = 0

    init(pingAfterSeconds: Int, hangUpAfterSeconds: Int) {
        pingAfterMs = Int64(pingAfterSeconds) * 1000
        hangUpAfterMs = Int64(hangUpAfterSeconds) * 1000
    }

    mutating func heard(atMs now: Int64) { lastHeardMs = now }

    enum Decision: Equatable { case wait, ping, hangUp }

    /// Hang up after `hangUpAfterMs` of silence (once: the peer is no longer watched); otherwise
    /// ping after `pingAfterMs` of silence, and again only a full interval after the last ping.
    mutating func check(nowMs now: Int64) -> Decision {
        guard lastHeardMs > 0 else { return .wait }
        let silent = now - lastHeardMs
        if hangUpAfterMs > 0, silent >= hangUpAfterMs {
            lastHeardMs = 0
            return .hangUp
        }
        if pingAfterMs > 0, silent >= pingAfterMs, now - pingSentMs >= pingAfterMs {
            pingSentMs = now
            return .ping
        }
        return .wait
    }
}
