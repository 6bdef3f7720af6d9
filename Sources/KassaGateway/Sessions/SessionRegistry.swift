import KassaCore
import Synchronization

/// The sessions this node holds, and which WebSocket follows which session.
/// Read from the libwebsockets thread too, so it sits behind a mutex.
final class SessionRegistry: Sendable {
    private let sessions = Mutex<[String: SessionActor]>([:])
    private let streams = Mutex<[UInt64: String]>([:])

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

    func follow(connection: UInt64, session: String) { streams.withLock { $0[connection] = session } }

    func unfollow(connection: UInt64) -> String? { streams.withLock { $0.removeValue(forKey: connection) } }

    func followed(by connection: UInt64) -> String? { streams.withLock { $0[connection] } }

    /// True when `token` is the session's client token (compared as SHA-256 digests, in constant time).
    static func tokenMatches(_ token: String?, _ actor: SessionActor) -> Bool {
        guard let token, !token.isEmpty else { return false }
        return Secrets.constantTimeEquals(SHA256.hex(token), actor.clientTokenSHA256)
    }
}
