import Foundation
import GRDBSQLite
@testable import KassaStore
import Testing

/// The store's file system (GatheredWAL) against SQLite's own, on real files: raw connections on
/// the test's thread, so the thread's own write calls can be counted.
@Suite("Store: a commit's WAL frames in one write")
struct GatheredWALTests {
    static let gathered = "kassa-gathered-wal"

    /// A SQLite connection through the named file system, used on the calling thread only.
    final class Connection {
        let db: OpaquePointer

        init(_ path: String, vfs: String) throws {
            #expect(GatheredWAL.installed)
            var handle: OpaquePointer?
            let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs)
            guard code == SQLITE_OK, let handle else { throw StoreError("\(path): SQLite code \(code)") }
            db = handle
        }

        deinit { sqlite3_close(db) }

        func execute(_ sql: String) throws {
            let code = sqlite3_exec(db, sql, nil, nil, nil)
            guard code == SQLITE_OK else {
                throw StoreError("\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
        }

        func integer(_ sql: String) throws -> Int {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
                throw StoreError("\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
            defer { sqlite3_finalize(statement) }
            guard sqlite3_step(statement) == SQLITE_ROW else { throw StoreError("\(sql): no row") }
            return Int(sqlite3_column_int64(statement, 0))
        }

        func text(_ sql: String) throws -> String {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, sqlite3_step(statement) == SQLITE_ROW,
                  let text = sqlite3_column_text(statement, 0) else {
                sqlite3_finalize(statement)
                throw StoreError("\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
            defer { sqlite3_finalize(statement) }
            return String(cString: text)
        }

        /// A WAL database as the store makes one.
        func walDatabase(synchronous: String = "NORMAL") throws {
            try execute("PRAGMA page_size = \(Store.pageSize); PRAGMA journal_mode = WAL; PRAGMA synchronous = \(synchronous)")
            try execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body BLOB NOT NULL); CREATE INDEX t_body ON t(body)")
        }

        /// `rows` rows of `bytes` bytes each, the same on every run (so are the pages SQLite spills).
        func insert(_ rows: Int, bytes: Int = 1_500) throws {
            try execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows)) INSERT INTO t(body) SELECT printf('%0*d', \(bytes), i) FROM n")
        }
    }

    /// A copy of the database and its WAL as they are now, without the shared index, opened by
    /// SQLite's own file system: SQLite rebuilds the index from the WAL file's frames and commit marks.
    static func recoveredCopy(of path: String, in dir: TempDirectory) throws -> Connection {
        let copy = dir.file("copy")
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: copy + "/k.sqlite")
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "/k.sqlite-wal")
        return try Connection(copy + "/k.sqlite", vfs: "unix")
    }

    /// This thread's write calls so far (the kernel's count, /proc/thread-self/io).
    static func writeCalls() throws -> Int {
        let io = try String(contentsOfFile: "/proc/thread-self/io", encoding: .utf8)
        let line = try #require(io.split(separator: "\n").first { $0.hasPrefix("syscw:") })
        return try #require(Int(line.dropFirst("syscw:".count).trimmingCharacters(in: .whitespaces)))
    }

    @Test("a commit of 20 rows reaches the WAL in one write, where SQLite's own file system makes two a frame; another connection reads it at once")
    func oneWriteACommit() throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        var calls: [String: Int] = [:]
        for vfs in ["unix", Self.gathered] {
            let path = dir.file("\(vfs).sqlite")
            let writer = try Connection(path, vfs: vfs)
            try writer.walDatabase()
            try writer.insert(1)   // the WAL's header and first frames, before counting
            let before = try Self.writeCalls()
            try writer.execute("BEGIN")
            try writer.insert(20, bytes: 1_000)
            try writer.execute("COMMIT")
            calls[vfs] = try Self.writeCalls() - before
            let reader = try Connection(path, vfs: "unix")
            #expect(try reader.integer("SELECT COUNT(*) FROM t") == 21)
        }
        let own = try #require(calls["unix"]), gathered = try #require(calls[Self.gathered])
        // 20 rows of 1 KB in a table and an index: 20 pages or more, two writes each.
        #expect(own >= 40, "SQLite's own file system: \(own) writes")
        #expect(gathered == 1, "gathered: \(gathered) writes (SQLite's own: \(own))")
    }

    @Test("the WAL file alone holds every committed transaction: large ones written in parts, small ones, and none of a rolled-back one",
          arguments: ["NORMAL", "FULL"])   // the store's durability settings (FULL syncs the WAL at each commit)
    func walFileHoldsCommits(synchronous: String) throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("k.sqlite")
        let writer = try Connection(path, vfs: Self.gathered)
        try writer.walDatabase(synchronous: synchronous)
        // ≈ 900 KB in one transaction: more than one write's worth, and more than the page cache
        // holds, so SQLite spills pages to the WAL before the commit.
        try writer.execute("PRAGMA cache_size = 64")
        try writer.execute("BEGIN")
        try writer.insert(600)
        try writer.execute("COMMIT")
        for _ in 0..<20 { try writer.insert(3) }
        try writer.execute("BEGIN")
        try writer.insert(50)
        try writer.execute("ROLLBACK")
        try writer.insert(2)
        let recovered = try Self.recoveredCopy(of: path, in: dir)
        #expect(try recovered.integer("SELECT COUNT(*) FROM t") == 600 + 60 + 2)
        #expect(try recovered.text("PRAGMA integrity_check") == "ok")
        #expect(try writer.integer("SELECT COUNT(*) FROM t") == 662)
    }

    @Test("what a connection gathered is written before another takes a lock on the database's shared memory; a rolled-back transaction's frames never land on a later commit")
    func otherConnections() throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("k.sqlite")
        let first = try Connection(path, vfs: Self.gathered)
        try first.walDatabase()
        try first.insert(5)
        // Spilled frames of a transaction still open, the last of them still gathered.
        try first.execute("PRAGMA cache_size = 16")
        try first.execute("BEGIN")
        try first.insert(200)
        let files = GatheredWAL.files(of: path)
        #expect(files.holding.load(ordering: .acquiring) == 1)
        let reader = try Connection(path, vfs: Self.gathered)
        #expect(try reader.integer("SELECT COUNT(*) FROM t") == 5)
        #expect(files.holding.load(ordering: .acquiring) == 0, "the reader's lock wrote them out")
        try first.execute("ROLLBACK")
        // Another connection (SQLite's own file system) commits over the same stretch of the WAL.
        let second = try Connection(path, vfs: "unix")
        try second.insert(7)
        #expect(try first.integer("SELECT COUNT(*) FROM t") == 12)
        #expect(try first.text("PRAGMA integrity_check") == "ok")
        let recovered = try Self.recoveredCopy(of: path, in: dir)
        #expect(try recovered.integer("SELECT COUNT(*) FROM t") == 12)
    }
}
