import KassaCore
import Synchronization

/// The sessions this node holds, and which WebSocket follows which session.
/// Read from the libwebsockets thread too, so it sits behind a mutex.
final class SessionRegistry: Sendable {
    private let sessions = Mutex<[String: SessionActor]>([:])
    private struct Streams {
        var sessionOf: [UInt64: String] = [:]
        var followers: [String: Int] = [:]
    }
    private let streams = Mutex(Streams())
    /// Ended sessions in the order they ended, with when they may leave memory.
    private let endings = Mutex<(queue: [(id: String, dueMs: Int64)], head: Int)>(([], 0))

    func session(_ id: String) -> SessionActor? { sessions.withLock { $0[id] } }

    /// Adds the session unless one with its id is already held; returns the one held.
    @discardableResult
    func add(_ actor: SessionActor) -> SessionActor {
        sessions.withLock { all in
            if let existing = all[actor.id] { return existing }
            all[actor.id] = actor
            return actor
        }
    }

    var count: Int { sessions.withLock { $0.count } }

    func follow(connection: UInt64, session: String) {
        streams.withLock { s in
            if let previous = s.sessionOf.updateValue(session, forKey: connection) { Self.decrement(&s.followers, previous) }
            s.followers[session, default: 0] += 1
        }
    }

    func unfollow(connection: UInt64) -> String? {
        streams.withLock { s in
            guard let session = s.sessionOf.removeValue(forKey: connection) else { return nil }
            Self.decrement(&s.followers, session)
            return session
        }
    }

    private static func decrement(_ followers: inout [String: Int], _ session: String) {
        let left = (followers[session] ?? 1) - 1
        followers[session] = left > 0 ? left : nil
    }

    func followed(by connection: UInt64) -> String? { streams.withLock { $0.sessionOf[connection] } }

    // MARK: Ended sessions leave memory

    /// An ended session may leave memory at `dueMs`; its row and events stay in the
    /// store, and `Gateway.session(_:)` restores it from there if it is asked for again.
    func ended(_ id: String, dueMs: Int64) {
        endings.withLock { $0.queue.append((id, dueMs)) }
    }

    /// Drops the ended sessions that are due and followed by no stream (those wait for the next
    /// sweep); returns the sessions dropped.
    func evictEnded(nowMs: Int64) -> [SessionActor] {
        let due = endings.withLock { e -> [String] in
            var ids: [String] = []
            while e.head < e.queue.count, e.queue[e.head].dueMs <= nowMs {
                ids.append(e.queue[e.head].id)
                e.head += 1
            }
            if e.head > 4_096, e.head * 2 > e.queue.count {
                e.queue.removeFirst(e.head)
                e.head = 0
            }
            return ids
        }
        guard !due.isEmpty else { return [] }
        var evicted: [SessionActor] = []
        var followed: [String] = []
        // Streams, then sessions: a stream that follows after this cannot miss the session,
        // because the edge follows first and looks the session up (or reads it back) after.
        streams.withLock { s in
            sessions.withLock { all in
                for id in due {
                    if s.followers[id] != nil { followed.append(id) } else if let actor = all.removeValue(forKey: id) { evicted.append(actor) }
                }
            }
        }
        if !followed.isEmpty {
            let later = nowMs + 1_000
            endings.withLock { e in for id in followed { e.queue.append((id, later)) } }
        }
        return evicted
    }

    /// Drops the sessions that have waited for the payer's choice since `quietBeforeMs` or
    /// earlier with no stream following them; returns them. A command or a subscription that
    /// reaches a dropped one is handed to the session read back from the store, which re-reads
    /// it upstream (the source of truth).
    func evictQuiet(quietBeforeMs: Int64) -> [SessionActor] {
        var evicted: [SessionActor] = []
        streams.withLock { s in
            sessions.withLock { all in
                for (id, actor) in all where s.followers[id] == nil {
                    let since = actor.quietSinceMs.load(ordering: .acquiring)
                    guard since > 0, since <= quietBeforeMs,
                          actor.quietSinceMs.compareExchange(expected: since, desired: SessionActor.leftMemory,
                                                             ordering: .acquiringAndReleasing).exchanged else { continue }
                    evicted.append(actor)
                }
                for actor in evicted { all.removeValue(forKey: actor.id) }
            }
        }
        return evicted
    }

    /// True when `token` is the session's client token: in the current format, not expired, and
    /// either the very token the session was stored with (compared as SHA-256 digests, in constant
    /// time), which keeps working across a restart even when each process draws its own cluster
    /// secret, or sealed by one of `keys` for this session. The digest goes first: it is the usual
    /// case and costs a hash, where opening the seal costs a decryption and a JSON parse.
    static func tokenMatches(_ token: String?, _ actor: SessionActor, keys: TokenKeys, nowSeconds: Int64) -> Bool {
        guard let token, let header = SessionToken.header(token), header.expiresAt > nowSeconds else { return false }
        if Secrets.constantTimeEquals(Hashing.sha256Hex(token), actor.clientTokenSHA256) { return true }
        guard let claim = SessionToken.open(token, keys: keys) else { return false }
        return claim.sessionID == actor.id
    }
}
