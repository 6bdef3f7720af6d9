import Glibc
import GRDBSQLite
import KassaCore
import Synchronization

/// SQLite's default file system with two changes: a commit's WAL frames reach the file in one
/// write instead of two per frame, and each read of a database's files is timed for the store
/// that asked (`FileReader`, `Store.onFileRead`).
///
/// Why: SQLite writes each frame as two `pwrite`s, its 24-byte header and then its page. That is
/// ≈ 57 system calls a commit here. And a 2 KiB page never covers a whole 4 KiB file page, so each
/// write starts on a file page that the kernel must read back from disk first when it has dropped
/// it. In a soak, commits waited for those reads (bench/RESULTS.md, "What a slow second is").
///
/// How: the writes SQLite appends to a WAL file are gathered in memory and written out in one call
/// (at most `maxWrite` bytes a call), in their order, before anything could need them in the file:
/// - as soon as a commit frame's page is in. A commit frame is the only one whose header holds the
///   database's size after the commit (bytes 4–7; sqlite.org/fileformat2.html, "WAL Frame Format"),
///   so a commit is in the file when SQLite says it is done, as without gathering;
/// - before any other call on that WAL file (a read, a sync, a truncate, its size, its close), and
///   before a write that does not follow on;
/// - before any connection in the process takes or lets go of a lock on the database's shared
///   memory, or publishes a commit there (`xShmLock`, `xShmBarrier` on the main file). That covers
///   frames of a transaction that was rolled back: they are in the file before the write lock is
///   let go, as without gathering, so another writer overwrites them rather than the reverse.
///
/// A write-out that fails fails the call it was made for, and SQLite fails the transaction. One
/// made for another connection's call fails the owner's next call instead, and a lock being taken
/// with it. A barrier cannot fail, but a commit's own frames are written at its commit frame,
/// before SQLite's barrier: a barrier only writes out frames that no commit publishes.
enum GatheredWAL {
    /// Registers the file system as the process's default, once; every connection opened after it
    /// uses it. False when SQLite has no default file system to wrap (never on Linux).
    static let installed: Bool = {
        guard let base = sqlite3_vfs_find(nil) else { return false }
        baseVFS = base
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: base.pointee)
        // The default file system's other calls ignore the pointer they are given; only `xOpen` is ours.
        vfs.pointee.zName = UnsafePointer(strdup("kassa-gathered-wal"))
        vfs.pointee.pNext = nil
        vfs.pointee.szOsFile = Int32(innerOffset) + base.pointee.szOsFile
        vfs.pointee.xOpen = openFile
        return sqlite3_vfs_register(vfs, 1) == SQLITE_OK
    }()

    /// The most written in one call: the default file system writes at most 128 KiB − 1 bytes a
    /// call (its `seekAndWriteFd` masks the length with 0x1ffff). A larger commit takes more calls.
    static let maxWrite = 120 << 10

    /// The WAL files open on each database, by the database's path.
    static let databases = Mutex<[String: WALFiles]>([:])

    /// Our part of a wrapped file's object, ahead of the default file system's: the methods
    /// pointer, then our `WrappedFile` (a `GatheredWrites` for a WAL).
    fileprivate static let innerOffset = 2 * MemoryLayout<UnsafeRawPointer>.stride
    nonisolated(unsafe) fileprivate static var baseVFS: UnsafeMutablePointer<sqlite3_vfs>!

    static func files(of database: String) -> WALFiles {
        databases.withLock { all in
            if let files = all[database] { return files }
            let files = WALFiles()
            all[database] = files
            return files
        }
    }
}

/// The WAL files open on one database in this process (one a connection).
final class WALFiles: Sendable {
    private let files = Mutex<[ObjectIdentifier: GatheredWrites]>([:])
    /// Told of each read of the database's file or its WAL, by which thread and how long it took.
    let readObserver = Mutex<ReadObserver?>(nil)
    /// How many of them hold gathered bytes: most shared-memory calls find none and take no lock.
    let holding = Atomic<Int>(0)

    fileprivate func add(_ file: GatheredWrites) { files.withLock { $0[ObjectIdentifier(file)] = file } }
    fileprivate func remove(_ file: GatheredWrites) { _ = files.withLock { $0.removeValue(forKey: ObjectIdentifier(file)) } }

    /// Writes out what every WAL file of the database gathered; the first failure, if any.
    fileprivate func flushAll() -> Int32 {
        guard holding.load(ordering: .acquiring) > 0 else { return SQLITE_OK }
        return files.withLock { files in
            var code = SQLITE_OK
            for file in files.values {
                let flushed = file.flushForAnotherCall()
                if code == SQLITE_OK { code = flushed }
            }
            return code
        }
    }
}

/// A store's observer of reads, boxed: a closure kept in a `Mutex` itself comes back from each
/// `withLock { $0 }` wrapped in one more pair of conversion thunks, stored so (swiftlang/swift#91348),
/// and every read would call through all of them.
final class ReadObserver: Sendable {
    let observe: @Sendable (FileReader, Double) -> Void
    init(_ observe: @escaping @Sendable (FileReader, Double) -> Void) { self.observe = observe }
}

/// Ours in a wrapped file's object: what comes before the default file system's calls on it.
/// The main file's: its shared-memory calls write out what the database's WAL files gathered.
class WrappedFile: @unchecked Sendable {
    /// The default file system's object for the file (inside SQLite's, fixed while it is open).
    nonisolated(unsafe) let file: UnsafeMutablePointer<sqlite3_file>
    let database: WALFiles

    fileprivate init(file: UnsafeMutablePointer<sqlite3_file>, database: WALFiles) {
        self.file = file
        self.database = database
    }

    /// Before any call but a write or a shared-memory call.
    func beforeCall() -> Int32 { SQLITE_OK }
    func beforeSharedMemoryCall() -> Int32 { database.flushAll() }

    func write(_ data: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        file.pointee.pMethods?.pointee.xWrite?(file, data.baseAddress, Int32(data.count), offset) ?? SQLITE_MISUSE
    }

    /// Before the file closes.
    func closing() -> Int32 { SQLITE_OK }
}

/// A WAL file: what SQLite appended to it and is not yet in it. Written by the connection that
/// owns the file; written out by it, or by any connection's shared-memory call on the database.
final class GatheredWrites: WrappedFile, @unchecked Sendable {
    private struct State {
        var bytes: [UInt8] = []
        /// Where `bytes` go in the file; once written, where the next gathered write must go.
        var start: Int64 = 0
        /// The last write gathered was a frame's header; its page comes next.
        var pageNext = false
        /// That header is a commit frame's.
        var commits = false
        /// A write-out made for another connection's call failed: the owner's next call fails
        /// with it (its transaction cannot go on without those frames).
        var failure = SQLITE_OK
    }

    private let state = Mutex(State())

    override func beforeCall() -> Int32 { state.withLock { Self.takeFailure(&$0) ?? flush(&$0) } }

    /// For another connection's shared-memory call: what was gathered is dropped if it cannot be
    /// written, and the owner learns of it at its next call.
    fileprivate func flushForAnotherCall() -> Int32 {
        state.withLock { s in
            let code = flush(&s)
            if code != SQLITE_OK, s.failure == SQLITE_OK { s.failure = code }
            return code
        }
    }

    private static func takeFailure(_ s: inout State) -> Int32? {
        guard s.failure != SQLITE_OK else { return nil }
        defer { s.failure = SQLITE_OK }
        return s.failure
    }

    override func write(_ data: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        state.withLock { s in
            if let failure = Self.takeFailure(&s) { return failure }
            let follows = offset == s.start + Int64(s.bytes.count)
            let gathered = s.pageNext
                ? follows && data.count >= 512
                : (offset == 0 && data.count == 32) || (offset >= 32 && data.count == 24)
            guard gathered else {
                // Not a frame being appended (a page rewritten in place, say): as SQLite asked.
                s.pageNext = false
                s.commits = false
                let code = flush(&s)
                return code == SQLITE_OK ? super.write(data, at: offset) : code
            }
            if !follows || s.bytes.count + data.count > GatheredWAL.maxWrite {
                let code = flush(&s)
                guard code == SQLITE_OK else { return code }
                s.start = offset
            }
            if s.bytes.isEmpty { database.holding.add(1, ordering: .releasing) }
            s.bytes.append(contentsOf: data)
            if s.pageNext {
                s.pageNext = false
                if s.commits {
                    s.commits = false
                    return flush(&s)
                }
            } else if data.count == 24 {
                s.pageNext = true
                s.commits = data[4] | data[5] | data[6] | data[7] != 0
            }
            return SQLITE_OK
        }
    }

    /// Writes what was gathered, in one call. On failure it is dropped: SQLite fails the
    /// transaction, and frames past the last commit are never read.
    private func flush(_ s: inout State) -> Int32 {
        guard !s.bytes.isEmpty else { return SQLITE_OK }
        defer {
            s.start += Int64(s.bytes.count)
            s.bytes.removeAll(keepingCapacity: true)
            database.holding.subtract(1, ordering: .releasing)
        }
        let start = s.start
        return s.bytes.withUnsafeBytes { super.write($0, at: start) }
    }

    override func closing() -> Int32 {
        let code = beforeCall()
        database.remove(self)
        return code
    }
}

/// Which thread read a database's files. A page the kernel no longer holds is read from the disk,
/// and a read made by the event log's writer is made inside a commit: every push waiting for that
/// commit waits for the disk too. Which pages the kernel keeps is the host's choice (a memory
/// limit, or proactive reclaim of cold pages: bench/RESULTS.md, forty-fifth stop).
public enum FileReader: String, Sendable, CaseIterable {
    /// The event log's writer thread.
    case eventlog
    /// The thread copying the WAL back (`Checkpointer`).
    case checkpoint
    /// Any other: readers, migrations, support's queries.
    case other

    private static let threads = Mutex<[UInt: FileReader]>([:])

    /// The calling thread's reads count as `reader`'s until it calls `leave`.
    static func enter(_ reader: FileReader) { threads.withLock { $0[UInt(pthread_self())] = reader } }
    static func leave() { _ = threads.withLock { $0.removeValue(forKey: UInt(pthread_self())) } }
    static var current: FileReader { threads.withLock { $0[UInt(pthread_self())] } ?? .other }
}

// MARK: The file system's calls (C function pointers: no captures)

private func inner(_ file: UnsafeMutablePointer<sqlite3_file>) -> UnsafeMutablePointer<sqlite3_file> {
    (UnsafeMutableRawPointer(file) + GatheredWAL.innerOffset).assumingMemoryBound(to: sqlite3_file.self)
}

private func slot(_ file: UnsafeMutablePointer<sqlite3_file>) -> UnsafeMutableRawPointer {
    UnsafeMutableRawPointer(file) + MemoryLayout<UnsafeRawPointer>.stride
}

private func wrapped(_ file: UnsafeMutablePointer<sqlite3_file>) -> WrappedFile {
    Unmanaged<WrappedFile>.fromOpaque(slot(file).load(as: UnsafeRawPointer.self)).takeUnretainedValue()
}

/// Makes the default file system's call on `file`, after `first`.
private func forwarded(_ file: UnsafeMutablePointer<sqlite3_file>?, first: (WrappedFile) -> Int32,
                       _ call: (sqlite3_io_methods, UnsafeMutablePointer<sqlite3_file>) -> Int32?) -> Int32 {
    guard let file, let own = inner(file).pointee.pMethods else { return SQLITE_MISUSE }
    let code = first(wrapped(file))
    guard code == SQLITE_OK else { return code }
    return call(own.pointee, inner(file)) ?? SQLITE_MISUSE
}

private func call(_ file: UnsafeMutablePointer<sqlite3_file>?, _ call: (sqlite3_io_methods, UnsafeMutablePointer<sqlite3_file>) -> Int32?) -> Int32 {
    forwarded(file, first: { $0.beforeCall() }, call)
}

/// A shared-memory call after writing out what was gathered. Only taking a lock fails when that
/// write-out fails (no connection may go on past frames that are not in the file); letting go of a
/// lock, a barrier or a mapping is always made, whatever the write-out gave.
private func sharedMemoryCall(_ file: UnsafeMutablePointer<sqlite3_file>?, takesLock: Bool = false,
                              _ call: (sqlite3_io_methods, UnsafeMutablePointer<sqlite3_file>) -> Int32?) -> Int32 {
    forwarded(file, first: { wrapped in
        let code = wrapped.beforeSharedMemoryCall()
        return takesLock ? code : SQLITE_OK
    }, call)
}

/// One method table for both kinds of wrapped file; `WrappedFile` tells them apart.
nonisolated(unsafe) private let wrappedMethods: UnsafeMutablePointer<sqlite3_io_methods> = {
    var m = sqlite3_io_methods()
    m.iVersion = 3
    m.xWrite = { file, buffer, amount, offset in
        guard let file else { return SQLITE_MISUSE }
        return wrapped(file).write(UnsafeRawBufferPointer(start: buffer, count: Int(amount)), at: offset)
    }
    m.xClose = { file in
        guard let file else { return SQLITE_MISUSE }
        let code = wrapped(file).closing()
        Unmanaged<WrappedFile>.fromOpaque(slot(file).load(as: UnsafeRawPointer.self)).release()
        let closed = inner(file).pointee.pMethods?.pointee.xClose?(inner(file)) ?? SQLITE_OK
        return code == SQLITE_OK ? closed : code
    }
    m.xRead = { file, buffer, amount, offset in
        call(file) { methods, own in
            guard let file, let observer = wrapped(file).database.readObserver.withLock({ $0 }) else {
                return methods.xRead?(own, buffer, amount, offset)
            }
            let began = ContinuousClock.now
            let code = methods.xRead?(own, buffer, amount, offset)
            observer.observe(FileReader.current, began.duration(to: .now).inSeconds)
            return code
        }
    }
    m.xTruncate = { file, size in call(file) { $0.xTruncate?($1, size) } }
    m.xSync = { file, flags in call(file) { $0.xSync?($1, flags) } }
    m.xFileSize = { file, size in call(file) { $0.xFileSize?($1, size) } }
    m.xLock = { file, level in call(file) { $0.xLock?($1, level) } }
    m.xUnlock = { file, level in call(file) { $0.xUnlock?($1, level) } }
    m.xCheckReservedLock = { file, out in call(file) { $0.xCheckReservedLock?($1, out) } }
    m.xFileControl = { file, op, argument in call(file) { $0.xFileControl?($1, op, argument) } }
    m.xSectorSize = { file in
        guard let file, let own = inner(file).pointee.pMethods else { return 0 }
        return own.pointee.xSectorSize?(inner(file)) ?? 0
    }
    m.xDeviceCharacteristics = { file in
        guard let file, let own = inner(file).pointee.pMethods else { return 0 }
        return own.pointee.xDeviceCharacteristics?(inner(file)) ?? 0
    }
    m.xShmMap = { file, page, size, extend, region in sharedMemoryCall(file) { $0.xShmMap?($1, page, size, extend, region) } }
    m.xShmLock = { file, offset, n, flags in
        sharedMemoryCall(file, takesLock: flags & SQLITE_SHM_UNLOCK == 0) { $0.xShmLock?($1, offset, n, flags) }
    }
    m.xShmBarrier = { file in _ = sharedMemoryCall(file) { $0.xShmBarrier?($1); return SQLITE_OK } }
    m.xShmUnmap = { file, delete in sharedMemoryCall(file) { $0.xShmUnmap?($1, delete) } }
    m.xFetch = { file, offset, amount, pointer in call(file) { $0.xFetch?($1, offset, amount, pointer) } }
    m.xUnfetch = { file, offset, pointer in call(file) { $0.xUnfetch?($1, offset, pointer) } }
    let table = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
    table.initialize(to: m)
    return table
}()

private func openFile(_ vfs: UnsafeMutablePointer<sqlite3_vfs>?, _ name: sqlite3_filename?, _ file: UnsafeMutablePointer<sqlite3_file>?,
                      _ flags: Int32, _ outFlags: UnsafeMutablePointer<Int32>?) -> Int32 {
    guard let file, let base = GatheredWAL.baseVFS, let open = base.pointee.xOpen else { return SQLITE_MISUSE }
    let wal = flags & SQLITE_OPEN_WAL != 0, main = flags & SQLITE_OPEN_MAIN_DB != 0
    // Journals and temporary files: the default file system's object, where SQLite put it.
    guard wal || main, let name, let database = sqlite3_filename_database(name) else { return open(base, name, file, flags, outFlags) }
    let code = open(base, name, inner(file), flags, outFlags)
    // SQLite calls xClose when the methods are set, even after a failed open; the inner file
    // needs it when its own open set its methods.
    guard inner(file).pointee.pMethods != nil else {
        file.pointee.pMethods = nil
        return code
    }
    let files = GatheredWAL.files(of: String(cString: database))
    let object: WrappedFile
    if wal {
        let writes = GatheredWrites(file: inner(file), database: files)
        files.add(writes)
        object = writes
    } else {
        object = WrappedFile(file: inner(file), database: files)
    }
    slot(file).storeBytes(of: UnsafeRawPointer(Unmanaged.passRetained(object).toOpaque()), as: UnsafeRawPointer.self)
    file.pointee.pMethods = UnsafePointer(wrappedMethods)
    return code
}
