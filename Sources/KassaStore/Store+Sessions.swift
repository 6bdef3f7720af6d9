import Foundation
import GRDB
import KassaCore

extension Store {
    /// A PaymentSession as stored: enough to find it, check its client, and
    /// pick it up after a restart (its pushed events are in `events`).
    public struct SessionRecord: Sendable, Equatable {
        public var id: String
        public var clientTokenSHA256: String
        public var viewHref: String
        public var payeeReference: String?
        public var paymentOrderID: String?
        public var phase: String
        public var createdAtMs: Int64
        public var updatedAtMs: Int64
        public var traceID: String?
        /// The last four digits of the MSISDN of the latest Swish attempt, for support searches.
        public var msisdnSuffix: String?
        public var lastProblemType: String?
        /// The client's device data, sealed (`TokenKeys.seal`); nil when the client sent none.
        public var clientDeviceSealed: String?
        /// The gateway's public base URL when the session was created (its notification URL's base).
        public var publicBaseURL: String?
        /// The span id of the request that created the session, when traces were on.
        public var rootSpanID: String?

        public init(id: String, clientTokenSHA256: String, viewHref: String, payeeReference: String?, paymentOrderID: String?,
                    phase: String, createdAtMs: Int64, updatedAtMs: Int64, traceID: String? = nil, msisdnSuffix: String? = nil,
                    lastProblemType: String? = nil, clientDeviceSealed: String? = nil, publicBaseURL: String? = nil,
                    rootSpanID: String? = nil) {
            self.rootSpanID = rootSpanID
            self.clientDeviceSealed = clientDeviceSealed
            self.publicBaseURL = publicBaseURL
            self.traceID = traceID
            self.msisdnSuffix = msisdnSuffix
            self.lastProblemType = lastProblemType
            self.id = id
            self.clientTokenSHA256 = clientTokenSHA256
            self.viewHref = viewHref
            self.payeeReference = payeeReference
            self.paymentOrderID = paymentOrderID
            self.phase = phase
            self.createdAtMs = createdAtMs
            self.updatedAtMs = updatedAtMs
        }

        init(row: Row) {
            self.init(id: row["id"], clientTokenSHA256: row["client_token_sha256"], viewHref: row["view_href"],
                      payeeReference: row["payee_reference"], paymentOrderID: row["payment_order_id"], phase: row["phase"],
                      createdAtMs: row["created_at_ms"], updatedAtMs: row["updated_at_ms"], traceID: row["trace_id"],
                      msisdnSuffix: row["msisdn_suffix"], lastProblemType: row["last_problem_type"],
                      clientDeviceSealed: row["client_device_sealed"], publicBaseURL: row["public_base_url"],
                      rootSpanID: row["root_span_id"])
        }
    }

    /// Inserts a session with the event log's next batch; returns once it is committed.
    /// Throws `Store.NotStored` when the disk has not taken it within `within`.
    public func insertSession(_ s: SessionRecord, within: Duration = Store.rowWriteTimeout) async throws {
        eventLog.insert(session: s)
        try await committed("session \(s.id)", within: within)
    }

    /// The blocking form, for the rare insert that must happen before an answer on the edge thread.
    /// Behind the commit gate, as every write is (see `EventLog.writeBehindGate`).
    public func insertSessionNow(_ s: SessionRecord) throws {
        try eventLog.writeBehindGate { db in try Self.insert(s, db) }
    }

    static let insertSessionSQL = """
        INSERT INTO sessions(id, client_token_sha256, view_href, payee_reference, payment_order_id, phase, created_at_ms, updated_at_ms,
                             trace_id, msisdn_suffix, last_problem_type, client_device_sealed, public_base_url, root_span_id, unfinished)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Bound through SQLite's own calls, as the events are: one a flow, on the writer thread.
    static func insert(_ s: SessionRecord, _ db: Database) throws {
        var binding = RawBinding(try db.cachedStatement(sql: insertSessionSQL).sqliteStatement)
        binding.bind(s.id)
        binding.bind(s.clientTokenSHA256)
        binding.bind(s.viewHref)
        binding.bind(s.payeeReference)
        binding.bind(s.paymentOrderID)
        binding.bind(s.phase)
        binding.bind(s.createdAtMs)
        binding.bind(s.updatedAtMs)
        binding.bind(s.traceID)
        binding.bind(s.msisdnSuffix)
        binding.bind(s.lastProblemType)
        binding.bind(s.clientDeviceSealed)
        binding.bind(s.publicBaseURL)
        binding.bind(s.rootSpanID)
        binding.bind(Retention.endedPhases.contains(s.phase) ? nil : Int64(1))
        try binding.step(db, sql: insertSessionSQL)
    }

    public func session(id: String) throws -> SessionRecord? {
        try pool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM sessions WHERE id = ?", arguments: [id]).map(SessionRecord.init(row:)) }
    }

    /// Sessions not yet ended, oldest first: what a restart picks up.
    public func unfinishedSessions() throws -> [SessionRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM sessions WHERE \(Self.unfinished) ORDER BY created_at_ms").map(SessionRecord.init(row:))
        }
    }

    /// The condition of the partial index `sessions_unfinished` (v18), written out: SQLite uses
    /// that index only for a query whose terms imply it. The mark is 1 from the session's insert
    /// until its phase becomes one of `Retention.endedPhases`, then NULL (`EventLog.apply`).
    static let unfinished = "unfinished IS NOT NULL"

    /// Seals the upstream URLs of rows written before they were sealed (at start-up), once: the
    /// rows written since are this version's, always sealed. The pass reads the whole table under
    /// the commit gate (2.8 s cold at 143 000 sessions), so a start after it skips it (`once_done`).
    @discardableResult
    public func sealPlainViewHrefs(_ seal: (_ href: String, _ id: String) -> String) throws -> Int {
        try eventLog.writeBehindGate { db in
            let pass = "seal-plain-view-hrefs"
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM once_done WHERE name = ?", arguments: [pass]) == true { return 0 }
            let rows = try Row.fetchAll(db, sql: "SELECT id, view_href FROM sessions WHERE view_href LIKE 'http%'")
            for row in rows {
                let id: String = row["id"], href: String = row["view_href"]
                try db.execute(sql: "UPDATE sessions SET view_href = ? WHERE id = ?", arguments: [seal(href, id), id])
            }
            try db.execute(sql: "INSERT INTO once_done(name) VALUES (?)", arguments: [pass])
            return rows.count
        }
    }

    // MARK: Idempotency

    public struct StoredAnswer: Sendable, Equatable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]
        /// What the key was first used for: a digest of method, path and body.
        public var requestSHA256: String?

        public init(status: Int, contentType: String, body: [UInt8], requestSHA256: String? = nil) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.requestSHA256 = requestSHA256
        }
    }

    public func idempotentAnswer(scope: String, key: String) throws -> StoredAnswer? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT status, content_type, body, request_sha256 FROM idempotency WHERE scope = ? AND key = ?",
                             arguments: [scope, key]).map {
                StoredAnswer(status: $0["status"], contentType: $0["content_type"], body: [UInt8](($0["body"] as Data?) ?? Data()),
                             requestSHA256: $0["request_sha256"])
            }
        }
    }

    /// An answer kept for its idempotency key, written with the event log's next batch.
    struct RememberedAnswer: Sendable {
        var scope: String
        var key: String
        var answer: StoredAnswer
        var atMs: Int64
    }

    /// Keeps the first answer for a key (a later one for the same key is ignored), with the event
    /// log's next batch: no transaction of its own. Returns once it is committed; throws
    /// `Store.NotStored` when the disk has not taken it within `within`.
    public func rememberAnswer(scope: String, key: String, _ answer: StoredAnswer, atMs: Int64,
                               within: Duration = Store.rowWriteTimeout) async throws {
        eventLog.remember(RememberedAnswer(scope: scope, key: key, answer: answer, atMs: atMs))
        try await committed("answer for an idempotency key", within: within)
    }

    static func insert(_ r: RememberedAnswer, _ db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO idempotency(scope, key, status, content_type, body, created_at_ms, request_sha256)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [r.scope, r.key, r.answer.status, r.answer.contentType, Data(r.answer.body), r.atMs,
                                     r.answer.requestSHA256])
    }
}
