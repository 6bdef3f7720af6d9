import Foundation
import GRDB
import KassaCore

/// The support queries: events by filters, sessions by what support knows,
/// one session's timeline. Every value is a bound parameter, never SQL text.
extension Store {
    public struct EventQuery: Sendable, Equatable {
        public var sessionID: String?
        public var kinds: [String] = []
        public var minimumLevel: LogEvent.Level?
        public var fromMs: Int64?
        public var toMs: Int64?
        public var text: String?
        public var traceID: String?
        /// Only events after this id (the cursor).
        public var afterID: Int64?
        public var limit: Int = 100

        public init() {}
    }

    public func searchEvents(_ q: EventQuery) throws -> [LogEvent] {
        try pool.read { db in try Self.events(matching: q, db) }
    }

    /// The events `q` asks for, oldest first: the support API's search and the event log's own
    /// `events(…)` alike.
    static func events(matching q: EventQuery, _ db: Database) throws -> [LogEvent] {
        var clauses: [String] = []
        var arguments: StatementArguments = []
        if let s = q.sessionID { clauses.append("id IN (\(EventLog.sessionEventIDs))"); arguments += EventLog.sessionIDArguments(s) }
        if !q.kinds.isEmpty {
            clauses.append("kind IN (\(q.kinds.map { _ in "?" }.joined(separator: ",")))")
            arguments += StatementArguments(q.kinds)
        }
        if let level = q.minimumLevel {
            let levels = LogEvent.Level.allCases.drop(while: { $0 != level }).map(\.rawValue)
            clauses.append("level IN (\(levels.map { _ in "?" }.joined(separator: ",")))")
            arguments += StatementArguments(levels)
        }
        try EventLog.timeWindow(fromMs: q.fromMs, toMs: q.toMs, db, into: &clauses, &arguments)
        if let trace = q.traceID { clauses.append("trace_id IN (?, ?)"); arguments += StoredID.forms(trace) }
        if let text = q.text, !text.isEmpty {
            let pattern = "%" + Self.escapeLike(text) + "%"
            clauses.append("(summary LIKE ? ESCAPE '\\' OR kassa_event_data(data) LIKE ? ESCAPE '\\')")
            arguments += [pattern, pattern]
        }
        if let after = q.afterID { clauses.append("id > ?"); arguments += [after] }
        let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
        arguments += [q.limit]
        return try Row.fetchAll(db, sql: "SELECT * FROM events \(whereClause) ORDER BY id LIMIT ?", arguments: arguments)
            .map(EventLog.event(from:))
    }

    public struct SessionQuery: Sendable, Equatable {
        public var id: String?
        public var payeeReference: String?
        public var paymentOrderID: String?
        public var msisdnSuffix: String?
        public var phase: String?
        public var problemType: String?
        public var fromMs: Int64?
        public var toMs: Int64?
        /// Only sessions created before this point (the cursor: newest first).
        public var before: (createdAtMs: Int64, id: String)?
        public var limit: Int = 50

        public init() {}

        public static func == (a: SessionQuery, b: SessionQuery) -> Bool {
            a.id == b.id && a.payeeReference == b.payeeReference && a.paymentOrderID == b.paymentOrderID
                && a.msisdnSuffix == b.msisdnSuffix && a.phase == b.phase && a.problemType == b.problemType
                && a.fromMs == b.fromMs && a.toMs == b.toMs && a.before?.createdAtMs == b.before?.createdAtMs
                && a.before?.id == b.before?.id && a.limit == b.limit
        }
    }

    /// Sessions, newest first.
    public func searchSessions(_ q: SessionQuery) throws -> [SessionRecord] {
        var clauses: [String] = []
        var arguments: StatementArguments = []
        if let v = q.id { clauses.append("id = ?"); arguments += [v] }
        // Through the payment order's row, which names its session (v19).
        if let v = q.payeeReference { clauses.append("id IN (SELECT session_id FROM payment_orders WHERE payee_reference = ?)"); arguments += [v] }
        if let v = q.paymentOrderID { clauses.append("id IN (SELECT session_id FROM payment_orders WHERE payment_order_id = ?)"); arguments += [v] }
        if let v = q.msisdnSuffix { clauses.append("msisdn_suffix = ?"); arguments += [v] }
        if let v = q.phase {
            clauses.append("phase = ?")
            arguments += [v]
            // A phase before the end is found through the sessions in progress alone.
            if !Retention.endedPhases.contains(v) { clauses.append(Self.unfinished) }
        }
        if let v = q.problemType { clauses.append("last_problem_type = ?"); arguments += [v] }
        if let v = q.fromMs { clauses.append("created_at_ms >= ?"); arguments += [v] }
        if let v = q.toMs { clauses.append("created_at_ms < ?"); arguments += [v] }
        if let before = q.before {
            clauses.append("(created_at_ms < ? OR (created_at_ms = ? AND id < ?))")
            arguments += [before.createdAtMs, before.createdAtMs, before.id]
        }
        let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
        arguments += [q.limit]
        return try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM sessions \(whereClause) ORDER BY created_at_ms DESC, id DESC LIMIT ?", arguments: arguments)
                .map(SessionRecord.init(row:))
        }
    }

    /// Every event of one session, in time order.
    public func timeline(sessionID: String, limit: Int = 5_000) throws -> [LogEvent] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM events WHERE id IN (\(EventLog.sessionEventIDs)) ORDER BY at_ms, id LIMIT ?",
                             arguments: EventLog.sessionIDArguments(sessionID) + [limit])
                .map(EventLog.event(from:))
        }
    }

    /// `%`, `_` and `\` match themselves in a LIKE pattern built from user text.
    static func escapeLike(_ s: String) -> String {
        var out = ""
        for c in s {
            if c == "%" || c == "_" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        return out
    }

    // MARK: Retention

    /// Deletes events older than `olderThanMs`, and ended sessions with them.
    @discardableResult
    public func deleteEvents(olderThanMs cutoff: Int64, endedPhases: [String]) async throws -> Int {
        let statements = Self.retentionDeletes(endedPhases: endedPhases)
        return try await gatedWrite { db in
            try db.execute(sql: statements.events, arguments: [try EventLog.firstID(atOrAfterMs: cutoff, db), cutoff])
            let deleted = db.changesCount
            try db.execute(sql: statements.sessions, arguments: StatementArguments([cutoff, cutoff]) + StatementArguments(endedPhases))
            try db.execute(sql: statements.idempotency, arguments: [cutoff])
            try db.execute(sql: statements.paymentOrders, arguments: [cutoff])
            return deleted
        }
    }

    /// Each finds its rows by time, so a pass costs what it deletes, not a scan of the table under
    /// the write lock (pushes wait for the event log's commits, which wait for that lock): events
    /// through their ids (`EventLog.firstID(atOrAfterMs:)`), the others through an index on time.
    /// A session updated before the cutoff was created before it: `created_at_ms`
    /// bounds the search, and `+phase` keeps SQLite from walking an index on phase instead (the
    /// one before v14 held every ended session: 210 ms at 86 000 sessions, cold, in a soak's
    /// database; 0.6 ms by creation time). The newest event always stays: SQLite gives the next
    /// one its id plus one (v20), so event ids never go back (see `EventLog.sessionEventIDs`).
    /// A session's payment order goes with the session (a trigger, v21); an order made through the
    /// merchant API alone goes by its own age.
    static func retentionDeletes(endedPhases: [String]) -> (events: String, sessions: String, idempotency: String, paymentOrders: String) {
        let marks = endedPhases.map { _ in "?" }.joined(separator: ",")
        return ("DELETE FROM events WHERE id < min(?, (SELECT max(id) FROM events)) AND at_ms < ?",
                "DELETE FROM sessions WHERE created_at_ms < ? AND updated_at_ms < ? AND +phase IN (\(marks))",
                "DELETE FROM idempotency WHERE created_at_ms < ?",
                "DELETE FROM payment_orders WHERE session_id IS NULL AND created_at_ms < ?")
    }

    /// The thread retention's deletes run on, started with the first.
    static let retentionThread = SerialThread(name: "kassa-retention")

    /// Deletes the oldest `count` events, never the newest (see `retentionDeletes`).
    @discardableResult
    public func deleteOldestEvents(_ count: Int) async throws -> Int {
        try await gatedWrite { db in
            try db.execute(sql: "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE id < (SELECT max(id) FROM events) ORDER BY id LIMIT ?)",
                           arguments: [count])
            return db.changesCount
        }
    }

    /// A write transaction behind the event log's commit gate, as the log's own commits are, so
    /// the checkpointer can start the WAL over between a pass's deletes too (see `Checkpointer`).
    /// On retention's own thread, not the Swift pool's: it may wait for the gate. One thread for
    /// every pass: on a fresh Dispatch thread each time, the soak's resident memory grew ≈ 6 MiB a
    /// minute (malloc arenas; flat with MALLOC_ARENA_MAX=2).
    private func gatedWrite<T: Sendable>(_ work: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let eventLog = eventLog
        return try await withCheckedThrowingContinuation { continuation in
            Store.retentionThread.async {
                continuation.resume(with: Result { try eventLog.writeBehindGate(work) })
            }
        }
    }

    /// Bytes the database holds in live pages (the file less its free pages).
    public func usedBytes() throws -> Int64 {
        try pool.read { db in
            let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let free = try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            let size = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
            return (pages - free) * size
        }
    }

    public func eventCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM events") ?? 0 }
    }

    /// The span of event ids, oldest to newest: the count of events when only the oldest are
    /// deleted, read from the ends of the rowid b-tree (a COUNT(*) reads the whole table, and so
    /// does `max(id) - min(id)` in one SELECT: see `EventLog.idEnds`).
    public func eventIDSpan() throws -> Int64 {
        try pool.read { db in try EventLog.idEnds(db).map { $0.last - $0.first + 1 } ?? 0 }
    }
}
