import KassaEdge
import Synchronization

/// One session stream's ordered inbox. The service thread only appends (open, each frame,
/// close) and returns; one task at a time takes the items in order and carries them out, so
/// an `attempt` and the `abort` after it, or a subscribe and its unsubscribe, reach the
/// session in the order the client sent them. A drain task lives only while items wait.
final class StreamInbox: Sendable {
    enum Item: Sendable {
        case open(WebSocketUpgrade)
        case frame(String)
        case close(code: UInt16?)
    }

    private struct State {
        var items: [Item] = []
        var head = 0
        var draining = false
        /// The session the stream follows, once its open has been carried out.
        var session: SessionActor?
    }

    let connectionID: UInt64
    private let state = Mutex(State())

    init(connectionID: UInt64) { self.connectionID = connectionID }

    /// Appends `item`; true when the caller must start the drain (no task is draining).
    func append(_ item: Item) -> Bool {
        state.withLock { s in
            s.items.append(item)
            if s.draining { return false }
            s.draining = true
            return true
        }
    }

    /// The next item in order, or nil once there is none (the drain then ends).
    func next() -> Item? {
        state.withLock { s in
            guard s.head < s.items.count else {
                s.items.removeAll(keepingCapacity: false)
                s.head = 0
                s.draining = false
                return nil
            }
            let item = s.items[s.head]
            s.head += 1
            return item
        }
    }

    /// Nothing waits and nothing is being carried out: an answer made now cannot overtake one.
    var isIdle: Bool { state.withLock { !$0.draining } }

    var session: SessionActor? {
        get { state.withLock { $0.session } }
        set { state.withLock { $0.session = newValue } }
    }
}
