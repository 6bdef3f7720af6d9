import KassaCore
import KassaEdge

/// `/v1/admin/stream?token=ADMIN[&session=ID]`: committed events, live, for the
/// admin page's timeline. Read-only: frames from the page are ignored.
extension Gateway {
    static let adminStreamPath = "/v1/admin/stream"

    func shouldAcceptAdminStream(_ upgrade: WebSocketUpgrade) -> HTTPResponse? {
        guard Authentication.holdsAdminToken(upgrade.headers, query: upgrade.query, adminToken: configuration.adminToken) else {
            return .problem(for: Self.unauthorized("the admin token is required (Authorization: Bearer)"))
        }
        if let session = upgrade.queryValue("session"), !PaymentURLHelper.isSafeID(session) {
            return .problem(.badRequest("session must be a session id", parameter: "session"))
        }
        return nil
    }

    func adminStreamOpened(_ upgrade: WebSocketUpgrade) {
        adminStreams.withLock { $0[upgrade.connectionID] = upgrade.queryValue("session") }
    }

    /// Runs on the event log's writer thread after each commit: only posts to the edge.
    func forwardToAdminStreams(_ events: [LogEvent]) {
        let streams = adminStreams.withLock { $0 }
        guard !streams.isEmpty, let edge else { return }
        for event in events {
            let frame = SupportAPI.eventJSON(event)
            for (connection, filter) in streams where filter == nil || filter == event.sessionID {
                edge.send(connection, json: frame)
            }
        }
    }
}
