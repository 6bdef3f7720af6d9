import GRDB
import GRDBSQLite
import Synchronization

/// One execution of a prepared statement that returns no rows, its parameters bound in order
/// through SQLite's own calls. For the writer's statements that run once or more a flow (an
/// event's insert, a session's row and phase, a payment order's row); everything else goes
/// through GRDB's arguments.
///
/// Text and blobs are copied into one buffer and bound in place when the statement runs
/// (`SQLITE_STATIC`). With `SQLITE_TRANSIENT` SQLite made a copy of its own of each, an allocation
/// per value: a quarter of the writer thread's allocations. The buffer is borrowed from `spare` and
/// given back after the step, so row after row binds without allocating.
struct RawBinding {
    private let statement: OpaquePointer
    private var index: Int32 = 0
    private var failure: Int32 = SQLITE_OK
    private var buffers: Buffers

    /// Where each text or blob parameter's bytes are in `bytes`.
    struct Span: Sendable {
        var index: Int32
        var start: Int
        var count: Int
        var blob: Bool
    }

    struct Buffers: Sendable {
        var bytes: [UInt8] = []
        var spans: [Span] = []
    }

    /// The buffers between two bindings. The writer binds one row at a time, so it finds them here;
    /// a binding that finds them taken starts empty ones.
    private static let spare = Mutex(Buffers())
    /// A buffer grown past this by one large row is not kept.
    static let keptBytes = 256 * 1024

    /// SQLite copies text before the bind returns (`SQLITE_TRANSIENT`, a macro Swift does not import).
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    /// SQLite reads the bytes where they are, until the statement is reset (`SQLITE_STATIC`).
    static let inPlace = unsafeBitCast(0, to: sqlite3_destructor_type.self)

    init(_ statement: OpaquePointer) {
        self.statement = statement
        buffers = Self.spare.withLock { spare in
            var taken = Buffers()
            swap(&spare, &taken)
            return taken
        }
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
        guard var value else { return bind(utf8: nil as [UInt8]?) }
        value.withUTF8 { bind(utf8: $0) }
    }

    /// Text given as its UTF-8 bytes.
    mutating func bind<Bytes: Collection<UInt8>>(utf8 text: Bytes?) {
        index += 1
        guard let text else { return record(sqlite3_bind_null(statement, index)) }
        let start = buffers.bytes.count
        buffers.bytes.append(contentsOf: text)
        buffers.spans.append(Span(index: index, start: start, count: buffers.bytes.count - start, blob: false))
    }

    /// A blob written straight into the buffer: `write` fills at most `capacity` bytes and says how
    /// many, or nil for none. False (nothing bound) when it wrote none.
    mutating func bind(blobOfAtMost capacity: Int, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Int?) -> Bool {
        let start = buffers.bytes.count
        buffers.bytes.append(contentsOf: repeatElement(0, count: capacity))
        let written = buffers.bytes.withUnsafeMutableBufferPointer { all in write(UnsafeMutableBufferPointer(rebasing: all[start...])) }
        guard let written, written > 0, written <= capacity else {
            buffers.bytes.removeSubrange(start...)
            return false
        }
        buffers.bytes.removeSubrange((start + written)...)
        index += 1
        buffers.spans.append(Span(index: index, start: start, count: written, blob: true))
        return true
    }

    private mutating func record(_ code: Int32) {
        if failure == SQLITE_OK { failure = code }
    }

    /// Runs the statement once; a failed bind or step throws SQLite's error, as GRDB would.
    mutating func step(_ db: Database, sql: String) throws {
        assert(index == sqlite3_bind_parameter_count(statement), "every parameter is bound")
        let code = buffers.bytes.withUnsafeBufferPointer { bytes -> Int32 in
            for span in buffers.spans where failure == SQLITE_OK {
                guard let count = Int32(exactly: span.count) else { record(SQLITE_TOOBIG); break }
                guard count > 0, let base = bytes.baseAddress.map({ UnsafeRawPointer($0 + span.start) }) else {
                    // An empty string is text, not NULL: SQLite reads a null pointer as NULL.
                    record(sqlite3_bind_text(statement, span.index, "", 0, Self.transient))
                    continue
                }
                record(span.blob
                    ? sqlite3_bind_blob(statement, span.index, base, count, Self.inPlace)
                    : sqlite3_bind_text(statement, span.index, base.assumingMemoryBound(to: CChar.self), count, Self.inPlace))
            }
            defer {
                // Unbound before the bytes go back: the statement keeps no pointer into them.
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            return failure == SQLITE_OK ? sqlite3_step(statement) : failure
        }
        giveBack()
        guard code == SQLITE_DONE else {
            // A bind this type refused itself (text past 2 GiB) left no message on the connection.
            let message = failure == SQLITE_OK ? sqlite3_errmsg(db.sqliteConnection) : sqlite3_errstr(code)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message.map { String(cString: $0) }, sql: sql)
        }
    }

    private mutating func giveBack() {
        guard buffers.bytes.capacity <= Self.keptBytes else { return }
        buffers.bytes.removeAll(keepingCapacity: true)
        buffers.spans.removeAll(keepingCapacity: true)
        var returned = Buffers()
        swap(&returned, &buffers)
        Self.spare.withLock { spare in
            if spare.bytes.capacity < returned.bytes.capacity { swap(&spare, &returned) }
        }
    }
}
