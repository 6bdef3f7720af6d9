import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#endif
import GRDBSQLite
import KassaCore

/// The SQLite database: event log and session store, one `DatabasePool` in
/// WAL mode. Durability: `synchronous=NORMAL` by default, which in WAL mode
/// keeps every committed transaction through a process crash (kill -9) but
/// may lose the last ones on power loss; `.full` also survives power loss.
///
/// ```swift
/// let store = try Store.open(path: "kassa.sqlite")
/// store.eventLog.append(LogEvent(atMs: 0, kind: "note", summary: "hello"))
/// await store.eventLog.flush()
/// ```
public final class Store: Sendable {
    public enum Durability: String, Sendable { case normal, full }

    public let path: String
    private let database: DatabasePool
    /// The database; every read and write starts here, and never on a thread that must not block.
    public var pool: DatabasePool {
        NonBlockingThread.checkMayBlock("Store")
        return database
    }
    public let eventLog: EventLog
    private let checkpointer: Checkpointer?

    /// Bytes SQLite holds in this process (mostly its page caches, each bounded by its
    /// `cache_size`): part of the resident memory that does not grow with connections.
    public static var sqliteMemoryBytes: Int64 { sqlite3_memory_used() }

    /// The writer's page cache once the database is past 1 GiB: it keeps the indexes' hot
    /// pages in memory (with 16 MiB, the soak's commits, and the pushes waiting on them, slowed
    /// past ~1 GB). KASSA_SQLITE_CACHE_MIB sets it (default 64 MiB).
    static let largeWriterCacheKiB = 1024 * (ProcessInfo.processInfo.environment["KASSA_SQLITE_CACHE_MIB"]
        .flatMap { Int($0) }.map { max($0, 1) } ?? 64)
    /// The writer's page cache below 1 GiB.
    static let smallWriterCacheKiB = 8 * 1024

    /// The writer's page cache ceiling for a database of `pages` pages of `pageSize` bytes.
    /// Below 1 GiB, SQLite walks the writer's whole page cache at the end of every write
    /// transaction that rebalanced an index: the rebalance parks a page under the number of the
    /// page holding the lock byte (1 GiB / page size + 1), which is past the database's end, and
    /// the commit then drops pages past the end by scanning the cache's entire hash table.
    /// That walk costs in proportion to the cache, so the cache stays small there. Past 1 GiB no page is ever past
    /// the end and the walk never happens.
    static func writerCacheKiB(pages: Int, pageSize: Int) -> Int {
        let lockBytePage = (1 << 30) / max(pageSize, 512) + 1
        return pages >= lockBytePage ? largeWriterCacheKiB : smallWriterCacheKiB
    }

    /// Sets the writer connection's page cache for the database's present size if it differs
    /// from `currentKiB`; returns the size in effect.
    static func sizeWriterCache(_ db: Database, currentKiB: Int?) throws -> Int {
        let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
        let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
        let kiB = writerCacheKiB(pages: pages, pageSize: pageSize)
        if kiB != currentKiB { try db.execute(sql: "PRAGMA cache_size = -\(kiB)") }
        return kiB
    }

    /// The database's open files in this process, found by the name SQLite gives the database
    /// (its full path): `onFileRead` watches their reads. Nil for a database in memory.
    private let files: WALFiles?

    private init(path: String, pool: DatabasePool, commitGather: Duration) {
        self.path = path
        self.database = pool
        let fileName = try? pool.read { db in sqlite3_db_filename(db.sqliteConnection, "main").map { String(cString: $0) } }
        self.files = (fileName ?? nil).flatMap { $0.isEmpty ? nil : GatheredWAL.files(of: $0) }
        self.eventLog = EventLog(pool: pool, commitGather: commitGather)
        let eventLog = self.eventLog
        self.checkpointer = Checkpointer(path: path, gate: eventLog.commitGate, written: { eventLog.writtenCount },
                                         heldCommits: { eventLog.walRestarted(holdingCommitsFor: $0) })
    }

    /// Bytes per page of a database this store creates.
    static let pageSize = 2_048

    /// Opens (creating if needed) and migrates the database, or fails with a
    /// message that names the path and the cause.
    /// `commitGather`: how long after a commit the next one asked for waits (`EventLog.defaultCommitGather`).
    public static func open(path: String, durability: Durability = .normal, upTo lastMigration: String? = nil,
                            commitGather: Duration = EventLog.defaultCommitGather) throws(StoreError) -> Store {
        // Before the first connection: each commit's WAL frames in one write (see GatheredWAL).
        _ = GatheredWAL.installed
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // A new database only (one that exists keeps its page size). Each commit rewrites
            // every page it touches, ≈ 27 a commit here, most of them index leaves holding a
            // few new entries: smaller pages write fewer bytes for the same change.
            try db.execute(sql: "PRAGMA page_size = \(Store.pageSize)")
            try db.execute(sql: "PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
            // Readers serve point lookups and need little cache; the writer's follows the
            // database's size (see `sizeWriterCache`).
            if db.configuration.readonly {
                try db.execute(sql: "PRAGMA cache_size = -8192")
            } else {
                _ = try Store.sizeWriterCache(db, currentKiB: nil)
            }
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            // What is deleted or rewritten is zeroed in the pages SQLite writes anyway: old
            // values do not linger in free space (FAST: no extra I/O for it).
            try db.execute(sql: "PRAGMA secure_delete = FAST")
            // The checkpointer thread copies the WAL back (see Checkpointer); the writer does it
            // itself only if the WAL passes ~256 MiB, a backstop should that thread fall behind.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 65536")
            try EventData.registerFunction(db)
        }
        // Owner-only: the event log describes payments. SQLite gives the WAL and shared-memory
        // files the database file's mode, so making that one 0600 first covers all three.
        if path != ":memory:" {
            let fd = Glibc.open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
            if fd >= 0 { Glibc.close(fd) }
            for file in [path, path + "-wal", path + "-shm"] { _ = chmod(file, 0o600) }
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw StoreError("cannot open database \(path): \(Self.reason(error))")
        }
        // A file a later release migrated may hold rows in forms this build would misread.
        let unknown = (try? pool.read { db in try Migrations.migrator.appliedIdentifiers(db) })?.subtracting(Migrations.names) ?? []
        guard unknown.isEmpty else {
            throw StoreError("cannot open database \(path): a later release of Kassa has changed it (\(unknown.sorted().joined(separator: ", "))); "
                             + "run that release or a newer one")
        }
        do {
            if let lastMigration {
                try Migrations.migrator.migrate(pool, upTo: lastMigration)
            } else {
                try Migrations.migrator.migrate(pool)
                // The events a previous run committed but did not file in `session_events` yet: the
                // sessions picked up now read their events without scanning those. A disk that
                // refuses the write (read-only) leaves them to the writer: readers still find them.
                try? pool.write { db in try EventLog.indexSessionEvents(db) }
            }
        } catch {
            throw StoreError("cannot prepare database \(path): \(Self.reason(error))")
        }
        return Store(path: path, pool: pool, commitGather: commitGather)
    }

    /// The migrations applied to this database, oldest first.
    public func appliedMigrations() throws -> [String] {
        try pool.read { db in try Migrations.migrator.appliedMigrations(db) }
    }

    /// True when the database answers a read and the writer has no pending failure.
    public func isHealthy() -> Bool {
        guard eventLog.lastWriteError == nil else { return false }
        return (try? pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") }) == 1
    }

    /// Calls `observer` after each read of the database's file or its WAL, on the thread that made
    /// it, with which thread that was and the read's seconds (for metrics: a read that took
    /// milliseconds came from the disk). It replaces the one set before, and must return quickly.
    public func onFileRead(_ observer: @escaping @Sendable (_ reader: FileReader, _ seconds: Double) -> Void) {
        let boxed = ReadObserver(observer)
        files?.readObserver.withLock { $0 = boxed }
    }

    /// Stops the event log's writer after at most `grace` of flushing; returns the events it could not write.
    @discardableResult
    public func close(grace: Duration = .seconds(5)) async -> [LogEvent] {
        let unwritten = await eventLog.close(grace: grace)
        checkpointer?.stop()
        files?.readObserver.withLock { $0 = nil }
        return unwritten
    }

    /// How long a request waits for its rows (a session, a payment order) to commit before it is
    /// refused: past it the disk is failing, and the writer's error is in `/readyz`.
    public static let rowWriteTimeout: Duration = .seconds(5)

    /// Rows the disk did not take in time; they stay queued and are written once it does.
    public struct NotStored: Error, CustomStringConvertible {
        public var what: String
        public var description: String { "\(what) not stored in time: the event log's writer is failing" }
    }

    /// Waits for the rows queued with the event log (`what`) to commit; throws `NotStored` past `within`.
    func committed(_ what: @autoclosure () -> String, within: Duration) async throws {
        guard await eventLog.flush(deadline: .now + within) else { throw NotStored(what: what()) }
    }

    public static func reason(_ error: Error) -> String {
        if let e = error as? DatabaseError {
            switch e.resultCode {
            case .SQLITE_NOTADB, .SQLITE_CORRUPT: return "the file is not a Kassa database or is corrupt"
            case .SQLITE_CANTOPEN: return "the file cannot be opened or created (check the directory exists and is writable)"
            case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_AUTH: return "the file is read-only"
            case .SQLITE_FULL: return "the disk is full"
            default: return e.message ?? "\(e.resultCode)"
            }
        }
        return "\(error)"
    }
}

// MARK: - Payment orders

extension Store {
    /// A payment order the gateway created: its own payee reference, Swedbank
    /// Pay's id, and where to change its instrument (instrument mode only).
    public struct PaymentOrderRecord: Sendable, Equatable {
        public var payeeReference: String
        public var paymentOrderID: String?
        public var setInstrumentHref: String?
        /// The API version Kassa asked for when it created the order (nil: none, the body decided).
        public var apiVersion: String?
        public var createdAtMs: Int64
        /// The session made from this order (nil: made through the merchant API alone). A session
        /// is found by its payee reference or payment order through this.
        public var sessionID: String?
    }

    /// Records a payment order with the event log's next batch; returns once it is committed.
    /// Throws `Store.NotStored` when the disk has not taken it within `within`. With `waiting`
    /// false it returns at once: for a caller that waits for a row it queues next (a session's),
    /// whose commit carries this one too, as the log commits rows in the order they were queued.
    public func recordPaymentOrder(payeeReference: String, paymentOrderID: String?, setInstrumentHref: String? = nil,
                                   apiVersion: String? = nil, sessionID: String? = nil, atMs: Int64,
                                   within: Duration = Store.rowWriteTimeout, waiting: Bool = true) async throws {
        eventLog.upsert(paymentOrder: PaymentOrderRecord(payeeReference: payeeReference, paymentOrderID: paymentOrderID,
                                                         setInstrumentHref: setInstrumentHref, apiVersion: apiVersion, createdAtMs: atMs,
                                                         sessionID: sessionID))
        if waiting { try await committed("payment order \(payeeReference)", within: within) }
    }

    static let upsertPaymentOrderSQL = """
        INSERT INTO payment_orders(payee_reference, payment_order_id, setinstrument_href, api_version, created_at_ms, session_id)
        VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT(payee_reference) DO UPDATE SET payment_order_id = excluded.payment_order_id,
            setinstrument_href = excluded.setinstrument_href, api_version = excluded.api_version,
            session_id = coalesce(excluded.session_id, session_id)
        """

    /// Bound through SQLite's own calls, as the events are: one a flow, on the writer thread.
    static func upsert(_ order: PaymentOrderRecord, _ db: Database) throws {
        var binding = RawBinding(try db.cachedStatement(sql: upsertPaymentOrderSQL).sqliteStatement)
        binding.bind(order.payeeReference)
        binding.bind(order.paymentOrderID)
        binding.bind(order.setInstrumentHref)
        binding.bind(order.apiVersion)
        binding.bind(order.createdAtMs)
        binding.bind(order.sessionID)
        try binding.step(db, sql: upsertPaymentOrderSQL)
    }

    public func paymentOrder(payeeReference: String) throws -> PaymentOrderRecord? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM payment_orders WHERE payee_reference = ?", arguments: [payeeReference]).map(Self.paymentOrder)
        }
    }

    /// The order by Swedbank Pay's id (`/psp/paymentorders/…`).
    public func paymentOrder(id: String) throws -> PaymentOrderRecord? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM payment_orders WHERE payment_order_id = ?", arguments: [id]).map(Self.paymentOrder)
        }
    }

    static func paymentOrder(_ row: Row) -> PaymentOrderRecord {
        PaymentOrderRecord(payeeReference: row["payee_reference"], paymentOrderID: row["payment_order_id"],
                           setInstrumentHref: row["setinstrument_href"], apiVersion: row["api_version"], createdAtMs: row["created_at_ms"],
                           sessionID: row["session_id"])
    }
}
