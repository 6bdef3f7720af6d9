import Foundation
import GRDB
import KassaCore
import Synchronization

/// The append-only event log. `append` never blocks on the disk: events are
/// queued and one writer thread commits them in batches (every ≤ 10 ms or
/// 1 000 events, one transaction a batch; a small one asked for right after
/// another waits `commitGather` to gather more). Readers query in parallel.
/// The rows a flow writes besides its events (its session, its payment order, their changes)
/// ride along with the next batch too: no flow has a write transaction of its own.
public final class EventLog: Sendable {
    public static let maxBatch = 1_000
    public static let maxDelay = 0.010
    /// A commit asked for (by a push, a new session's row) within this long of the last one's end
    /// waits this long, and what is asked for meanwhile goes in the same commit. Below saturation
    /// every push and new session otherwise took a commit of its own and woke each thread on its
    /// own: at 500 card payments a second, 2.9 commits and 36 context switches a payment, 1.66 ms
    /// of CPU; with the pause, 1.1 commits, 23 switches, 1.35 ms (bench/RESULTS.md). A quiet
    /// gateway does not wait (its last commit is long past); the gateway's push p99 was 3.2 ms at
    /// 75 % of capacity. A 2 ms pause saved more and passed 5 ms there.
    public static let defaultCommitGather: Duration = .milliseconds(1)
    let commitGather: Duration
    /// …unless this many events and rows are queued already: a commit carrying that many gains
    /// little by waiting. At saturation each commit finds ≈ 80 queued, and pausing it anyway cost
    /// card flows ≈ 5 % more CPU (four pairs); with this bound they are within the spread.
    static let gatherBelow = 32

    /// Whether the writer waits `pause` before it takes the queue: something is queued, not much,
    /// and the last commit ended less than `pause` ago (commits are following one another).
    static func gathers(queued: Int, sinceLastCommit: Duration, pause: Duration) -> Bool {
        queued > 0 && queued < gatherBelow && sinceLastCommit < pause
    }
    /// The queue's buffers are reused up to this many entries (a busy second's batches).
    static let keptQueueCapacity = 4_096

    /// A queued event: its data only as the text the row stores. The tree is let go on the thread
    /// that built it, not freed by the writer, which only writes.
    struct Pending {
        var event: LogEvent
        /// The data's JSON text, redacted, as UTF-8: kept as bytes, since it is only stored (a
        /// `String` of it was a validation and a copy an event).
        var data: [UInt8]?

        /// The event with its data read back from the text (for the few that need the whole event).
        var restored: LogEvent {
            var restored = event
            restored.data = data.flatMap { try? JSONValue.parse($0) }
            return restored
        }
    }

    /// A change to a session's row that rides along with the next batch of events
    /// (its phase, and the fields support searches by): no transaction of its own.
    public struct SessionUpdate: Sendable {
        public var id: String
        public var phase: String?
        public var atMs: Int64?
        public var msisdnSuffix: String?
        public var lastProblemType: String?

        public init(id: String, phase: String? = nil, atMs: Int64? = nil, msisdnSuffix: String? = nil, lastProblemType: String? = nil) {
            self.id = id
            self.phase = phase
            self.atMs = atMs
            self.msisdnSuffix = msisdnSuffix
            self.lastProblemType = lastProblemType
        }
    }

    /// A row written with the next batch, before its events, in the order queued.
    enum RowWrite: Sendable {
        case newSession(Store.SessionRecord)
        case paymentOrder(Store.PaymentOrderRecord)
        case sessionUpdate(SessionUpdate)
        case answer(Store.RememberedAnswer)
    }

    /// How long a session's phase between its first and its end may wait before it reaches the
    /// session's row (`HeldPhases`).
    static let phaseHold: Duration = .seconds(1)

    /// The phases a session passes through between its creation and its end, held back from its
    /// row for up to `phaseHold`: a later phase replaces a held one, and the end, written at once,
    /// drops it. Each write of a session's row rewrites one of the table's 2 KiB pages in the WAL,
    /// and a card payment changed phase three times (a fifth of its WAL bytes); one that ends
    /// within the hold now writes its row twice, created and ended. What reads the row's phase
    /// does not need it sooner: a restart only asks whether a session ended
    /// (`PaymentSessionMachine.init(restoring:)`), and support sees a phase in progress at most
    /// `phaseHold` late. The events record every change at once.
    struct HeldPhases {
        private var held: [String: (due: ContinuousClock.Instant, hold: UInt64, change: SessionUpdate)] = [:]
        /// The holds in the order they began, which is the order they fall due (each `phaseHold`
        /// after it began), so a writer pass reads only the due ones rather than every held phase.
        /// A hold written or dropped since stays here until it reaches the front.
        private var order: [(id: String, hold: UInt64)] = []
        private var front = 0
        private var holds: UInt64 = 0

        var isEmpty: Bool { held.isEmpty }

        /// The rows to write now: all but the changes of a phase in progress alone, which are held.
        mutating func take(_ rows: [RowWrite], now: ContinuousClock.Instant) -> [RowWrite] {
            rows.filter { row in
                guard case .sessionUpdate(let change) = row, let phase = change.phase else { return true }
                if change.msisdnSuffix == nil && change.lastProblemType == nil && !Retention.endedPhases.contains(phase) {
                    // The first hold's deadline stays, so a session's row is never more than `phaseHold` behind.
                    if let first = held[change.id] {
                        held[change.id] = (first.due, first.hold, change)
                    } else {
                        holds += 1
                        held[change.id] = (now + EventLog.phaseHold, holds, change)
                        order.append((change.id, holds))
                    }
                    return false
                }
                held[change.id] = nil   // a later phase is written now
                return true
            }
        }

        /// The held changes due by `now`, or all of them when the log is closing.
        mutating func due(by now: ContinuousClock.Instant, all: Bool) -> [SessionUpdate] {
            if all { return held.values.map(\.change) }
            func current(_ index: Int) -> (due: ContinuousClock.Instant, hold: UInt64, change: SessionUpdate)? {
                held[order[index].id].flatMap { $0.hold == order[index].hold ? $0 : nil }
            }
            while front < order.count, current(front) == nil { front += 1 }
            if front > 4_096 && front * 2 > order.count {
                order.removeFirst(front)
                front = 0
            }
            var due: [SessionUpdate] = []
            var index = front
            while index < order.count {
                if let entry = current(index) {
                    guard entry.due <= now else { break }
                    due.append(entry.change)
                }
                index += 1
            }
            return due
        }

        /// Forgets changes that were committed.
        mutating func written(_ changes: [SessionUpdate]) {
            for change in changes { held[change.id] = nil }
        }
    }

    /// A `flush` or an `afterCommit` action waiting for the events and rows queued before it.
    struct Waiter {
        var events: UInt64
        var rows: UInt64
        var deadline: ContinuousClock.Instant?
        var done: Completion
    }

    /// What a waiter gets: true once its events and rows are committed, false when the log gave up on them.
    enum Completion {
        case resume(CheckedContinuation<Bool, Never>)
        case run(@Sendable (Bool) -> Void)

        func callAsFunction(_ committed: Bool) {
            switch self {
            case .resume(let c): c.resume(returning: committed)
            case .run(let action): action(committed)
            }
        }
    }

    struct Queue {
        var events: [Pending] = []
        var rows: [RowWrite] = []
        var appended: UInt64 = 0
        var written: UInt64 = 0
        var rowsQueued: UInt64 = 0
        var rowsWritten: UInt64 = 0
        var running = true
        var waiters: [Waiter] = []
        var lastError: String?
        var batches: UInt64 = 0
        /// The time of the last event queued (or, at start, stored): no later event is stamped before it.
        var lastAtMs: Int64 = .min
        /// Set when a close ran out of time: the writer stops at its next failure.
        var givingUp = false
        /// The writer is running completions it took from `waiters`: one given meanwhile waits its
        /// turn behind them, even with nothing left to commit.
        var delivering = false
    }

    private let database: DatabasePool
    private var pool: DatabasePool {
        NonBlockingThread.checkMayBlock("EventLog")
        return database
    }
    private let queue = Mutex<Queue>(Queue())
    private let observers = Mutex<[Observer]>([])

    private struct Observer {
        let isListening: @Sendable () -> Bool
        let observe: @Sendable ([LogEvent]) -> Void
    }
    /// Held by the writer around each commit, and by the checkpointer while it copies the last
    /// frames of the WAL: the writer's next commit then finds the WAL fully copied and starts it over
    /// (see `Checkpointer`).
    let commitGate = CommitGate()
    private let writeObservers = Mutex<[@Sendable (_ events: Int, _ seconds: Double, _ succeeded: Bool) -> Void]>([])
    private let restartObservers = Mutex<[@Sendable (_ seconds: Double) -> Void]>([])
    private let wake = DispatchSemaphore(value: 0)
    /// Set by the first waiter since the writer last took the queue, and by the writer for a
    /// gathering pause: waiters that find it set leave the semaphore alone, so a pass is not
    /// followed by one empty pass per waiter it served, and no waiter ends a pause.
    private let wakeRequested = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)

    init(pool: DatabasePool, commitGather: Duration) {
        self.database = pool
        self.commitGather = commitGather
        let lastStored = try? pool.read { db in try Int64.fetchOne(db, sql: "SELECT at_ms FROM events ORDER BY id DESC LIMIT 1") }
        queue.withLock { $0.lastAtMs = (lastStored ?? nil) ?? .min }
        Thread.named("kassa-eventlog", scheduling: .batch) { [self] in
            FileReader.enter(.eventlog)
            defer { FileReader.leave() }
            writerLoop()
        }.start()
    }

    /// Calls `observer` on the writer thread with each committed batch (ids set) while `isListening`
    /// says someone is there: the batch is built only then. It must return quickly: the admin
    /// page's live timeline uses it.
    public func onCommit(isListening: @escaping @Sendable () -> Bool = { true }, _ observer: @escaping @Sendable ([LogEvent]) -> Void) {
        observers.withLock { $0.append(Observer(isListening: isListening, observe: observer)) }
    }

    /// Calls `observer` on the writer thread after each transaction, committed or failed (for metrics).
    public func onWrite(_ observer: @escaping @Sendable (_ events: Int, _ seconds: Double, _ succeeded: Bool) -> Void) {
        writeObservers.withLock { $0.append(observer) }
    }

    /// Calls `observer` on the checkpointer's thread each time it has held the commits so that the
    /// WAL can start over, with how long it held them (for metrics: every commit waiting meanwhile
    /// waited that long, and every push behind those commits).
    public func onWALRestart(_ observer: @escaping @Sendable (_ seconds: Double) -> Void) {
        restartObservers.withLock { $0.append(observer) }
    }

    func walRestarted(holdingCommitsFor seconds: Double) {
        for observer in restartObservers.withLock({ $0 }) { observer(seconds) }
    }

    /// Queues an event; it is durable once a later `flush()` returns.
    /// Its summary and data pass through `Redaction` here, whoever built it: nothing reaches
    /// the file, or the live timeline, that redaction would have caught.
    public func append(_ event: LogEvent) {
        enqueue(event, data: event.data.map(Redaction.redactedBytes))
    }

    /// Queues an event whose data also holds `body`, a JSON document's bytes as they were sent or
    /// received, under the member "body". The body is redacted as text (`Redaction.redactJSON`): no
    /// tree is built, walked and written again for it. Bytes that are no JSON document it can walk
    /// are logged from their parsed tree, or as an excerpt.
    public func append(_ event: LogEvent, body: [UInt8]) {
        if case .object = event.data ?? [:] {
            var text = Redaction.redactedBytes(event.data ?? [:])
            text.removeLast()   // the object's closing brace
            if text.count > 1 { text.append(UInt8(ascii: ",")) }
            text.append(contentsOf: #""body":"#.utf8)
            if Redaction.appendRedactedJSON(body, to: &text) {
                text.append(UInt8(ascii: "}"))
                return enqueue(event, data: text)
            }
        }
        var event = event
        let tree = (try? JSONValue.parse(body)) ?? .string(String(decoding: body.prefix(256), as: UTF8.self))
        var data = event.data?.objectValue ?? (event.data.map { ["data": $0] } ?? [:])
        data["body"] = tree
        event.data = .object(data)
        append(event)
    }

    private func enqueue(_ event: LogEvent, data: [UInt8]?) {
        var event = event
        event.summary = Redaction.redactText(event.summary)
        event.data = nil
        let full = queue.withLock { q -> Bool in
            // Times never go back along the log, so a window of time is a range of ids
            // (`firstID(atOrAfterMs:)`) and the table keeps no index on time. An event stamped
            // before the one queued ahead of it (a session's creation, stamped before the wait for
            // its row's commit) takes that one's time.
            event.atMs = max(event.atMs, q.lastAtMs)
            q.lastAtMs = event.atMs
            q.events.append(Pending(event: event, data: data))
            q.appended += 1
            return q.events.count == Self.maxBatch
        }
        // Straight to the semaphore: a full queue also ends a gathering pause (`commitGather`).
        if full { wake.signal() }
    }

    /// Queues a session row change; it is written with the next batch.
    public func update(_ change: SessionUpdate) { queue(.sessionUpdate(change)) }

    /// Queues a new session's row; it is written with the next batch (`flush` to wait for it).
    public func insert(session: Store.SessionRecord) { queue(.newSession(session)) }

    /// Queues a payment order's row (replacing one with its payee reference); written with the next batch.
    public func upsert(paymentOrder: Store.PaymentOrderRecord) { queue(.paymentOrder(paymentOrder)) }

    /// Queues an answer kept for its idempotency key; written with the next batch.
    func remember(_ answer: Store.RememberedAnswer) { queue(.answer(answer)) }

    private func queue(_ row: RowWrite) {
        queue.withLock { q in
            q.rows.append(row)
            q.rowsQueued += 1
        }
    }

    /// Returns when every event and row queued before the call is committed: true then, false
    /// when `deadline` passed first (the disk refuses writes) or the log was closed with them unwritten.
    @discardableResult
    public func flush(deadline: ContinuousClock.Instant? = nil) async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            if let done = wait(deadline: deadline, .resume(c)) { c.resume(returning: done) } else { wakeWriter() }
        }
    }

    /// Runs `action` once every event and row queued before the call is committed (true), or the
    /// log stopped or gave up with them unwritten (false): on the writer thread right after its
    /// commit, or at once when nothing is outstanding. Actions run in the order they were given,
    /// each once; they must be quick (pushes hand their frames to the edge here, with no task
    /// and no hop through the Swift pool).
    public func afterCommit(_ action: @escaping @Sendable (Bool) -> Void) {
        if let done = wait(deadline: nil, .run(action)) { action(done) } else { wakeWriter() }
    }

    private func wakeWriter() {
        if !wakeRequested.exchange(true, ordering: .acquiringAndReleasing) { wake.signal() }
    }

    /// Queues `done` behind every event and row queued so far (nil: the caller wakes the writer),
    /// or answers at once: true when all of it is committed, false when the writer has stopped.
    private func wait(deadline: ContinuousClock.Instant?, _ done: Completion) -> Bool? {
        queue.withLock { q -> Bool? in
            // Behind any waiter still queued or still being run by the writer, so that completions
            // keep their order: run here at once, an action could overtake the one before it (a
            // session's later push reaching a connection before its earlier one).
            if q.written >= q.appended && q.rowsWritten >= q.rowsQueued && q.waiters.isEmpty && !q.delivering { return true }
            if !q.running { return false }
            q.waiters.append(Waiter(events: q.appended, rows: q.rowsQueued, deadline: deadline, done: done))
            return nil
        }
    }

    /// Flushes for at most `grace`, then stops the writer. Returns the events it could not
    /// write in that time (the disk is full or read-only): the caller puts them in the process
    /// log, so a stop never loses them silently and never waits for ever on a broken disk.
    @discardableResult
    public func close(grace: Duration = .seconds(5)) async -> [LogEvent] {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.flush(); return true }
            group.addTask { try? await Task.sleep(for: grace); return false }
            if await group.next() == false {
                // Out of time: the flush waiting in the other task is released, and the writer stops at its next failure.
                let waiting = queue.withLock { q -> [Completion] in
                    q.givingUp = true
                    defer { q.waiters = [] }
                    return q.waiters.map(\.done)
                }
                for done in waiting { done(false) }
            }
            group.cancelAll()
        }
        let wasRunning = queue.withLock { q -> Bool in
            defer { q.running = false }
            return q.running
        }
        if wasRunning {
            wake.signal()
            stopped.wait()
        }
        return queue.withLock { q in
            defer { q.events = [] }
            return q.events.map(\.restored)
        }
    }

    /// The last write failure, cleared by the next successful batch.
    public var lastWriteError: String? { queue.withLock { $0.lastError } }

    /// Events committed since the log was opened.
    public var writtenCount: UInt64 { queue.withLock { $0.written } }

    /// A write transaction behind the commit gate. The gate is always taken before the writer
    /// connection, by the log's commits and by other bulk writers alike, so the two never wait
    /// on each other the other way round. Blocks: call it off the Swift pool.
    func writeBehindGate<T: Sendable>(_ work: (Database) throws -> T) throws -> T {
        try commitGate.held { try pool.writeWithoutTransaction { db in try Self.inTransaction(db) { try work(db) } } }
    }

    /// `work` in one immediate transaction, as GRDB's `write` runs it, but with BEGIN and COMMIT
    /// prepared once: GRDB prepares both anew for every transaction (≈ 3 % of the writer thread).
    static func inTransaction<T>(_ db: Database, _ work: () throws -> T) throws -> T {
        try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
        do {
            let result = try work()
            try db.cachedStatement(sql: "COMMIT").execute()
            return result
        } catch {
            if db.isInsideTransaction { try? db.rollback() }
            throw error
        }
    }

    /// Events queued but not yet committed.
    public var pendingCount: Int { queue.withLock { $0.events.count } }

    public var batchCount: UInt64 { queue.withLock { $0.batches } }

    private func writerLoop() {
        // The writer's page cache grows once the database passes 1 GiB (see `Store.writerCacheKiB`);
        // the size is looked at once a second, inside a transaction the writer makes anyway.
        var cacheKiB = Store.smallWriterCacheKiB
        var nextCacheCheck = ContinuousClock.now
        // Committed events not yet in `session_events`, and when they are put there at the latest.
        var unindexed = 0
        var nextSessionIndexing = ContinuousClock.now + Self.sessionIndexingInterval
        // The queue and the writer trade buffers each pass, so appends land in room already
        // there; one a burst made large is let go.
        var taken: [Pending] = [], rows: [RowWrite] = []
        var heldPhases = HeldPhases()
        func emptied<T>(_ buffer: inout [T]) {
            if buffer.capacity > Self.keptQueueCapacity { buffer = [] } else { buffer.removeAll(keepingCapacity: true) }
        }
        var lastCommit = ContinuousClock.now - commitGather
        while true {
            _ = wake.wait(timeout: .now() + Self.maxDelay)
            let queued = queue.withLock { $0.events.count + $0.rows.count }
            if Self.gathers(queued: queued, sinceLastCommit: lastCommit.duration(to: .now), pause: commitGather) {
                // Waiters meanwhile find `wakeRequested` set and leave the semaphore alone; a full
                // queue ends the pause.
                wakeRequested.store(true, ordering: .releasing)
                _ = wake.wait(timeout: .now() + commitGather.inSeconds)
            }
            wakeRequested.store(false, ordering: .releasing)
            // Take everything queued at once (no shifting of a long queue), then commit it
            // in transactions of at most `maxBatch` events.
            emptied(&taken)
            emptied(&rows)
            let running = queue.withLock { q -> Bool in
                swap(&q.events, &taken)
                swap(&q.rows, &rows)
                return q.running
            }
            var pendingRows = rows
            let now = ContinuousClock.now
            var rowsNow = heldPhases.take(rows, now: now)
            var duePhases = heldPhases.due(by: now, all: !running)
            var start = 0
            while start < taken.count || !pendingRows.isEmpty || !duePhases.isEmpty {
                let end = min(start + Self.maxBatch, taken.count)
                let batch = taken[start..<end]
                let began = ContinuousClock.now
                func report(_ ok: Bool) {
                    let seconds = began.duration(to: .now).inSeconds
                    for observer in writeObservers.withLock({ $0 }) { observer(batch.count, seconds, ok) }
                }
                let indexing = unindexed >= Self.sessionIndexingEvents || (unindexed > 0 && began >= nextSessionIndexing)
                do {
                    let ids = try writeBehindGate { db -> [Int64] in
                        if began >= nextCacheCheck {
                            cacheKiB = try Store.sizeWriterCache(db, currentKiB: cacheKiB)
                            nextCacheCheck = began + .seconds(1)
                        }
                        if indexing { try Self.indexSessionEvents(db) }
                        for change in duePhases { try Self.apply(change, db) }
                        for row in rowsNow { try Self.write(row, db) }
                        return try Self.insert(batch, db)
                    }
                    report(true)
                    lastCommit = ContinuousClock.now
                    heldPhases.written(duePhases)
                    if indexing {
                        unindexed = 0
                        nextSessionIndexing = began + Self.sessionIndexingInterval
                    }
                    unindexed += batch.count
                    let listening = observers.withLock { $0 }.filter { $0.isListening() }
                    if !listening.isEmpty {
                        let committed = zip(batch, ids).map { pending, id in
                            var event = pending.restored
                            event.id = id
                            return event
                        }
                        for observer in listening { observer.observe(committed) }
                    }
                    let ready = queue.withLock { q -> [Completion] in
                        q.written += UInt64(batch.count)
                        q.rowsWritten += UInt64(pendingRows.count)
                        q.batches += 1
                        q.lastError = nil
                        return q.takeDueWaiters()
                    }
                    deliver(ready)
                    (pendingRows, rowsNow, duePhases) = ([], [], [])
                    start = end
                } catch {
                    report(false)
                    // Keep what is not written: it goes first on the next try. The error shows in /readyz.
                    let (givingUp, late) = queue.withLock { q -> (Bool, [Completion]) in
                        q.events.insert(contentsOf: taken[start...], at: 0)
                        q.rows.insert(contentsOf: pendingRows, at: 0)
                        q.lastError = Store.reason(error)
                        let now = ContinuousClock.now
                        return (q.givingUp, q.takeWaiters { $0.deadline.map { $0 <= now } ?? false })
                    }
                    // A flush with a deadline (a request waiting for its rows) gets its answer, not a hang.
                    for done in late { done(false) }
                    if givingUp {
                        // `close` takes what is left in the queue.
                        stopped.signal()
                        return
                    }
                    Thread.sleep(forTimeInterval: 0.1)
                    // The rows go back to the queue, the held phases stay held: both are tried again.
                    (pendingRows, rowsNow, duePhases) = ([], [], [])
                    start = taken.count
                }
            }
            if !running && heldPhases.isEmpty {
                let done = queue.withLock { q -> [Completion]? in
                    guard q.events.isEmpty && q.rows.isEmpty else { return nil }
                    defer { q.waiters = [] }
                    return q.waiters.map(\.done)
                }
                if let done {
                    for waiter in done { waiter(true) }
                    stopped.signal()
                    return
                }
            }
        }
    }

    /// Runs the completions a commit made due, then those that came due while they ran, until
    /// none is left; only then may `wait` run a new one on its caller's thread.
    private func deliver(_ ready: [Completion]) {
        var due = ready
        while !due.isEmpty {
            for done in due { done(true) }
            due = queue.withLock { $0.takeDueWaiters() }
        }
    }

    /// When the writer puts the events committed since into `session_events`, inside a
    /// transaction it makes anyway: once this many are waiting, or this long after the last time.
    /// More at a time: fewer leaves rewritten per event, but a longer tail for a reader to scan
    /// (`sessionEventIDs`) and a longer transaction each time.
    static let sessionIndexingEvents = 4_096
    static let sessionIndexingInterval: Duration = .milliseconds(1_000)

    /// Adds the events after `upto` to `session_events`, in key order, and moves `upto` on.
    static func indexSessionEvents(_ db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO session_events(session_id, event_id)
            SELECT session_id, id FROM events WHERE id > (SELECT upto FROM session_events_indexed) AND session_id IS NOT NULL
            ORDER BY session_id, id
            """).execute()
        try db.cachedStatement(sql: "UPDATE session_events_indexed SET upto = (SELECT coalesce(max(id), 0) FROM events)").execute()
    }

    /// The ids of a session's events, for `id IN (…)`: those in `session_events` and those the
    /// writer has not put there yet. Its parameters are `sessionIDArguments`. Event ids never go
    /// back (retention keeps the newest event; see `Store.retentionDeletes`), so every event past
    /// the mark is one not yet filed.
    static let sessionEventIDs = """
        SELECT event_id FROM session_events WHERE session_id IN (?, ?)
        UNION ALL SELECT id FROM events WHERE id > (SELECT upto FROM session_events_indexed) AND session_id IN (?, ?)
        """

    /// `sessionEventIDs`' parameters for the session `id`: the forms a row may hold it in, twice.
    static func sessionIDArguments(_ id: String) -> StatementArguments {
        let forms = StoredID.forms(id)
        return forms + forms
    }

    static func write(_ row: RowWrite, _ db: Database) throws {
        switch row {
        case .newSession(let session): try Store.insert(session, db)
        case .paymentOrder(let order): try Store.upsert(order, db)
        case .sessionUpdate(let change): try apply(change, db)
        case .answer(let remembered): try Store.insert(remembered, db)
        }
    }

    static let changePhaseSQL = "UPDATE sessions SET phase = ?, updated_at_ms = ? WHERE id = ?"
    static let endSessionSQL = "UPDATE sessions SET phase = ?, updated_at_ms = ?, unfinished = NULL WHERE id = ?"

    static func apply(_ change: SessionUpdate, _ db: Database) throws {
        if let phase = change.phase {
            // Bound as the events are. Only the last one clears the mark of a session in progress,
            // so the others leave its index alone (v18).
            let sql = Retention.endedPhases.contains(phase) ? endSessionSQL : changePhaseSQL
            var binding = RawBinding(try db.cachedStatement(sql: sql).sqliteStatement)
            binding.bind(phase)
            binding.bind(change.atMs ?? 0)
            binding.bind(change.id)
            try binding.step(db, sql: sql)
        }
        if let suffix = change.msisdnSuffix {
            try db.cachedStatement(sql: "UPDATE sessions SET msisdn_suffix = ? WHERE id = ?").execute(arguments: [suffix, change.id])
        }
        if let type = change.lastProblemType {
            try db.cachedStatement(sql: "UPDATE sessions SET last_problem_type = ? WHERE id = ?").execute(arguments: [type, change.id])
        }
    }

    /// Events one INSERT writes at most. A statement's run opens a cursor on the table and on each
    /// of its indexes, and allocates them, whatever its rows: a flow's ≈ 20 events, one statement
    /// each, spent more on that than on their rows.
    static let rowsPerInsert = 16
    /// The INSERT for 1, 2, … `rowsPerInsert` rows, made once.
    static let insertSQL: [String] = (1...rowsPerInsert).map { rows in
        "INSERT INTO events(at_ms, session_id, seq, kind, level, summary, duration_ms, status, trace_id, data) VALUES "
            + repeatElement("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
    }

    /// Inserts the events, `rowsPerInsert` to a statement, binding them through SQLite's own calls
    /// (GRDB's arguments box each value and check them: ≈ 12 % of the writer thread). Their ids in
    /// order: one statement's rows take consecutive ids, as nothing else writes between them.
    static func insert(_ batch: ArraySlice<Pending>, _ db: Database) throws -> [Int64] {
        var ids: [Int64] = []
        ids.reserveCapacity(batch.count)
        var start = batch.startIndex
        while start < batch.endIndex {
            let end = min(start + rowsPerInsert, batch.endIndex)
            let sql = insertSQL[end - start - 1]
            var binding = RawBinding(try db.cachedStatement(sql: sql).sqliteStatement)
            for pending in batch[start..<end] {
                let event = pending.event
                binding.bind(event.atMs)
                binding.bind(id: event.sessionID)
                binding.bind(event.seq)
                binding.bind(event.kind)
                binding.bind(event.level.rawValue)
                binding.bind(event.summary)
                binding.bind(event.durationMs)
                binding.bind(event.status.map(Int64.init))
                binding.bind(id: event.traceID)
                binding.bind(eventData: pending.data)
            }
            try binding.step(db, sql: sql)
            let last = db.lastInsertedRowID
            ids.append(contentsOf: (last - Int64(end - start - 1))...last)
            start = end
        }
        return ids
    }

    // MARK: Reading

    /// Events matching the filters, oldest first, at most `limit`.
    public func events(sessionID: String? = nil, fromMs: Int64? = nil, toMs: Int64? = nil,
                       afterID: Int64? = nil, limit: Int = 1_000) throws -> [LogEvent] {
        var query = Store.EventQuery()
        (query.sessionID, query.fromMs, query.toMs, query.afterID, query.limit) = (sessionID, fromMs, toMs, afterID, limit)
        return try pool.read { db in try Store.events(matching: query, db) }
    }

    /// The smallest id from which on every event is at or after `ms` (one past the last id when
    /// none is). Event times never go back as ids grow (see `enqueue`), so this is a binary search
    /// over the ids, each step one seek in the table.
    static func firstID(atOrAfterMs ms: Int64, _ db: Database) throws -> Int64 {
        guard let (first, last) = try idEnds(db) else { return 0 }
        let probe = try db.cachedStatement(sql: "SELECT id, at_ms FROM events WHERE id >= ? ORDER BY id LIMIT 1")
        var low = first, high = last + 1   // the answer lies in low...high
        while low < high {
            let middle = low + (high - low) / 2
            // There is one: the last event's id is at least `middle`.
            guard let row = try Row.fetchOne(probe, arguments: [middle]) else { high = middle; continue }
            if (row[1] as Int64) >= ms { high = middle } else { low = (row[0] as Int64) + 1 }
        }
        return low
    }

    /// The lowest and the highest event id (nil when there is none), each read from an end of the
    /// table. Asked for in one SELECT, `min(id), max(id)` scan the whole table: SQLite reads an end
    /// of an index for a lone min or max only (0.65 s at 1.6 million events, under retention's
    /// write lock).
    static func idEnds(_ db: Database) throws -> (first: Int64, last: Int64)? {
        guard let row = try Row.fetchOne(db, sql: idEndsSQL), let first = row[0] as Int64?, let last = row[1] as Int64? else { return nil }
        return (first, last)
    }

    static let idEndsSQL = "SELECT (SELECT min(id) FROM events), (SELECT max(id) FROM events)"

    /// The conditions for events at or after `fromMs` and before `toMs`: ranges of ids, which the
    /// table walks from the right place, and the times themselves, which only matter for events
    /// stored before times were kept in order (a session's creation could be some ms behind).
    static func timeWindow(fromMs: Int64?, toMs: Int64?, _ db: Database,
                           into clauses: inout [String], _ arguments: inout StatementArguments) throws {
        if let fromMs {
            clauses.append("id >= ? AND at_ms >= ?")
            arguments += [try firstID(atOrAfterMs: fromMs, db), fromMs]
        }
        if let toMs {
            clauses.append("id < ? AND at_ms < ?")
            arguments += [try firstID(atOrAfterMs: toMs, db), toMs]
        }
    }

    /// A session's pushed events after `seq`, in order: what a reconnecting client replays.
    /// Found through `session_events` and the events not filed there yet, as a session's other
    /// events are: read back only after a restart or when the session left memory.
    public func pushedEvents(sessionID: String, afterSeq: Int64) throws -> [LogEvent] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM events WHERE id IN (\(Self.sessionEventIDs)) AND seq > ? ORDER BY seq",
                             arguments: Self.sessionIDArguments(sessionID) + [afterSeq]).map(Self.event(from:))
        }
    }

    static func event(from row: Row) -> LogEvent {
        let dataText = EventData.text(row["data"])
        return LogEvent(id: row["id"], atMs: row["at_ms"], sessionID: StoredID.text(row["session_id"]), seq: row["seq"],
                        kind: row["kind"], level: LogEvent.Level(rawValue: row["level"]) ?? .info,
                        summary: row["summary"], durationMs: row["duration_ms"], status: row["status"],
                        traceID: StoredID.text(row["trace_id"]), data: dataText.flatMap { try? JSONValue.parse($0) })
    }
}

extension EventLog.Queue {
    /// Takes the waiters whose events and rows are all committed, and marks them as being run
    /// (`delivering`) until a later call finds none.
    mutating func takeDueWaiters() -> [EventLog.Completion] {
        let (events, rows) = (written, rowsWritten)
        let due = takeWaiters { $0.events <= events && $0.rows <= rows }
        delivering = !due.isEmpty
        return due
    }

    /// Removes the waiters `isDue` picks and returns what each gets, in the order they came.
    mutating func takeWaiters(_ isDue: (EventLog.Waiter) -> Bool) -> [EventLog.Completion] {
        guard waiters.contains(where: isDue) else { return [] }
        let due = waiters.filter(isDue)
        waiters.removeAll(where: isDue)
        return due.map(\.done)
    }
}
