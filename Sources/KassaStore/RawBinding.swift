import GRDB
import GRDBSQLite

/// One execution of a prepared statement that returns no rows, its parameters bound in order
/// through SQLite's own calls. For the writer's statements that run several times a flow (an
/// event's insert, a session's phase); everything else goes through GRDB's arguments.
struct RawBinding {
    private let statement: OpaquePointer
    private var index: Int32 = 0
    private var failure: Int32 = SQLITE_OK

    /// SQLite copies text before the bind returns (`SQLITE_TRANSIENT`, a macro Swift does not import).
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(_ statement: OpaquePointer) {
        self.statement = statement
        sqlite3_reset(statement)
    }

    mutating func bind(_ value: Int64?) {
        index += 1
        record(value.map { sqlite3_bind_int64(statement, index, $0) } ?? sqlite3_bind_null(statement, index))
    }

    mutating func bind(_ value: Double?) {
        index += 1
        record(value.map { sqlite3_bind_double(statement, index, $0) } ?? sqlite3_bind_null(statement, index))
    }

    mutating func bind(_ value: String?) {
        index += 1
        guard var value else { return record(sqlite3_bind_null(statement, index)) }
        let (statement, index) = (self.statement, self.index)
        record(value.withUTF8 { utf8 in
            // An empty string is text, not NULL: SQLite reads a null pointer as NULL.
            guard let base = utf8.baseAddress, !utf8.isEmpty else { return sqlite3_bind_text(statement, index, "", 0, Self.transient) }
            guard let count = Int32(exactly: utf8.count) else { return SQLITE_TOOBIG }
            return sqlite3_bind_text(statement, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), count, Self.transient)
        })
    }

    mutating func bind(blob: UnsafeRawBufferPointer) {
        index += 1
        guard let base = blob.baseAddress, !blob.isEmpty else { return record(sqlite3_bind_zeroblob(statement, index, 0)) }
        guard let count = Int32(exactly: blob.count) else { return record(SQLITE_TOOBIG) }
        record(sqlite3_bind_blob(statement, index, base, count, Self.transient))
    }

    private mutating func record(_ code: Int32) {
        if failure == SQLITE_OK { failure = code }
    }

    /// Runs the statement once; a failed bind or step throws SQLite's error, as GRDB would.
    func step(_ db: Database, sql: String) throws {
        assert(index == sqlite3_bind_parameter_count(statement), "every parameter is bound")
        let code = failure == SQLITE_OK ? sqlite3_step(statement) : failure
        defer { sqlite3_reset(statement) }
        guard code == SQLITE_DONE else {
            // A bind this type refused itself (text past 2 GiB) left no message on the connection.
            let message = failure == SQLITE_OK ? sqlite3_errmsg(db.sqliteConnection) : sqlite3_errstr(code)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message.map { String(cString: $0) }, sql: sql)
        }
    }
}
