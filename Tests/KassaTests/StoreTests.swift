import Foundation
import GRDB
import KassaCore
@testable import KassaStore
import Synchronization
import Testing

@Suite("Store (SQLite)")
struct StoreTests {
    @Test("appends are batched into few transactions and read back by session and time")
    func batchedAppends() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        for i in 0..<2_500 {
            store.eventLog.append(LogEvent(atMs: Int64(1_000 + i), sessionID: i % 2 == 0 ? "s-even" : "s-odd",
                                           kind: "test", summary: "event \(i)", data: ["i": .number(Double(i))]))
        }
        await store.eventLog.flush()
        #expect(store.eventLog.batchCount < 100, "2 500 events took \(store.eventLog.batchCount) transactions")
        let count = try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM events") }
        #expect(count == 2_500)
        let even = try store.eventLog.events(sessionID: "s-even", limit: 5_000)
        #expect(even.count == 1_250)
        #expect(even.first?.summary == "event 0")
        #expect(even.first?.data?["i"]?.intValue == 0)
        let window = try store.eventLog.events(fromMs: 1_100, toMs: 1_110)
        #expect(window.map(\.atMs) == Array(1_100..<1_110))
        await store.close()
    }

    @Test("event times never go back along the log, also after a restart; a window of time is a range of ids, found across gaps")
    func timesInIDOrder() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("k.sqlite")
        var store = try Store.open(path: path)
        // 2 000 at 1 000…2 999, every tenth stamped 50 ms early (as a session's creation is, stamped before its row's commit).
        for i in 0..<2_000 {
            store.eventLog.append(LogEvent(atMs: Int64(1_000 + i - (i % 10 == 9 ? 50 : 0)), kind: "test", summary: "e\(i)"))
        }
        await store.eventLog.flush()
        let stored = try await store.pool.read { db in try Int64.fetchAll(db, sql: "SELECT at_ms FROM events ORDER BY id") }
        #expect(stored.count == 2_000)
        #expect(zip(stored, stored.dropFirst()).allSatisfy { $0 <= $1 }, "times went back")
        #expect(stored[9] == 1_008 && stored[10] == 1_010, "a late event takes the time of the one before it: \(stored[8...10])")
        #expect(try await store.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'events_by_time'")
        } == 0)
        // Holes in the ids (the oldest and some in the middle deleted), then windows against a scan.
        try await store.pool.write { db in try db.execute(sql: "DELETE FROM events WHERE id <= 5 OR id BETWEEN 700 AND 1300 OR id % 7 = 0") }
        let all = try store.eventLog.events(limit: 5_000)
        for (from, to) in [(0, 5_000), (1_000, 1_011), (1_008, 1_009), (1_600, 2_400), (1_650, 1_700), (2_998, 3_000), (2_999, 2_999), (5_000, 6_000)] {
            let expected = all.filter { $0.atMs >= from && $0.atMs < to }.map(\.summary)
            #expect(try store.eventLog.events(fromMs: Int64(from), toMs: Int64(to), limit: 5_000).map(\.summary) == expected, "\(from)..<\(to)")
            var query = Store.EventQuery()
            (query.fromMs, query.toMs, query.limit) = (Int64(from), Int64(to), 5_000)
            #expect(try store.searchEvents(query).map(\.summary) == expected, "\(from)..<\(to)")
        }
        await store.close()
        // A restart keeps the floor: an event stamped before the last one stored takes its time.
        store = try Store.open(path: path)
        store.eventLog.append(LogEvent(atMs: 500, kind: "test", summary: "after the restart"))
        await store.eventLog.flush()
        #expect(try store.eventLog.events(afterID: 2_000).map(\.atMs) == [stored.last ?? -1])
        await store.close()
    }

    @Test("a session's events are found once each, before and after the writer files them in session_events; a deleted event leaves it")
    func sessionEventsFiledLater() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        func append(_ range: Range<Int>) async {
            for i in range {
                store.eventLog.append(LogEvent(atMs: Int64(1_000 + i), sessionID: [Optional("s-a"), "s-b", nil][i % 3],
                                               kind: "test", summary: "event \(i)"))
            }
            await store.eventLog.flush()
        }
        /// What `session_events` holds, what it should hold (the events up to `upto` with a session), and `upto`.
        func filed() async throws -> (count: Int, expected: Int, upto: Int64) {
            try await store.pool.read { db in
                let upto = try Int64.fetchOne(db, sql: "SELECT upto FROM session_events_indexed") ?? -1
                return (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM session_events") ?? -1,
                        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM events WHERE id <= ? AND session_id IS NOT NULL", arguments: [upto]) ?? -1,
                        upto)
            }
        }
        func summaries(_ session: String) throws -> [[String]] {
            var search = Store.EventQuery()
            search.sessionID = session
            search.limit = 1_000
            return [try store.timeline(sessionID: session).map(\.summary), try store.searchEvents(search).map(\.summary),
                    try store.eventLog.events(sessionID: session).map(\.summary)]
        }
        let expectedA = { (range: Range<Int>) in range.filter { $0 % 3 == 0 }.map { "event \($0)" } }

        await append(0..<30)
        try store.eventLog.writeBehindGate { try EventLog.indexSessionEvents($0) }
        let first = try await filed()
        #expect(first.count == 20)
        #expect(first.upto == 30)
        await append(30..<60)   // after `upto`: found by the scan of the tail
        for found in try summaries("s-a") { #expect(found == expectedA(0..<60)) }
        #expect(try summaries("s-b").allSatisfy { $0.count == 20 })

        _ = try await store.deleteOldestEvents(15)
        let afterDelete = try await filed()
        #expect(afterDelete.count == afterDelete.expected)
        #expect(afterDelete.count >= 10)
        for found in try summaries("s-a") { #expect(found == expectedA(15..<60)) }

        // The writer files the tail on its own, at the latest a second after the last time.
        let deadline = ContinuousClock.now + .seconds(10)
        var upto = first.upto
        while upto == first.upto && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            await append(60..<61)
            upto = try await filed().upto
        }
        #expect(upto >= 60, "the writer filed the events committed before, on its own")
        let last = try await filed()
        #expect(last.count == last.expected)
        for found in try summaries("s-b") { #expect(found.count == 15) }
        await store.close()
    }

    @Test("a session's phase in progress reaches its row within the hold; its end at once, in place of a held one; closing writes what is held")
    func phasesInProgressHeld() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        for id in ["s1", "s2", "s3"] {
            try await store.insertSession(Store.SessionRecord(id: id, clientTokenSHA256: "d", viewHref: "h", payeeReference: nil, paymentOrderID: nil,
                                                              phase: "starting", createdAtMs: 1, updatedAtMs: 1))
        }
        // Timed from before the changes: a hold begins when the writer takes its change, so a flush
        // that waited for the hold would end at least `phaseHold` after this.
        let flushed = ContinuousClock.now
        store.eventLog.update(.init(id: "s1", phase: "awaitingInstrument", atMs: 2))
        store.eventLog.update(.init(id: "s2", phase: "awaitingInstrument", atMs: 2))
        store.eventLog.update(.init(id: "s2", phase: "attempting", atMs: 3))
        store.eventLog.update(.init(id: "s2", phase: "completed", atMs: 4))
        // A flush waits for the held changes' pass, not for the hold: pushes wait on the same accounting.
        // Bounded by the hold itself, not half of it: with eight tests at once on two cores a flush
        // once took 0.67 s.
        #expect(await store.eventLog.flush())
        #expect(flushed.duration(to: .now) < EventLog.phaseHold)
        #expect(try store.session(id: "s1")?.phase == "starting", "held")
        #expect(try store.session(id: "s2")?.phase == "completed" && store.session(id: "s2")?.updatedAtMs == 4, "the end is written at once")

        let held = ContinuousClock.now
        while try store.session(id: "s1")?.phase == "starting", held.duration(to: .now) < .seconds(5) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(held.duration(to: .now) < EventLog.phaseHold * 2)
        #expect(try store.session(id: "s1")?.phase == "awaitingInstrument" && store.session(id: "s1")?.updatedAtMs == 2)
        #expect(try store.session(id: "s2")?.phase == "completed", "a phase the end replaced is never written after it")

        store.eventLog.update(.init(id: "s3", phase: "paymentMenu", atMs: 5))
        await store.close()
        let reopened = try Store.open(path: dir.file("k.sqlite"))
        #expect(try reopened.session(id: "s3")?.phase == "paymentMenu", "closing writes the held phases")
        await reopened.close()
    }

    @Test("a flow's session, payment-order and idempotent-answer rows ride with the events' batch, no transaction of their own; a full disk refuses them in time and keeps them")
    func rowsRideAlong() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let session = Store.SessionRecord(id: "s1", clientTokenSHA256: "d", viewHref: "h", payeeReference: "p1", paymentOrderID: "/psp/paymentorders/1",
                                          phase: "starting", createdAtMs: 1, updatedAtMs: 1)

        // A full disk (SQLite's page limit gives the same SQLITE_FULL): a request waiting with a deadline is refused at it.
        let pages = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA page_count")! }
        try await store.pool.write { db in try db.execute(sql: "PRAGMA max_page_count = \(pages)") }
        let started = ContinuousClock.now
        var refused: Error?
        do {
            for i in 0..<900 { store.eventLog.append(LogEvent(atMs: 3, kind: "fill", summary: "fill \(i) " + String(repeating: "x", count: 400))) }
            try await store.insertSession(session, within: .milliseconds(300))
        } catch { refused = error }
        #expect(refused is Store.NotStored, "\(String(describing: refused))")
        #expect(started.duration(to: .now) < .seconds(3))

        // Queued while nothing can commit, so what follows is one writer pass: the rows with the events, in queue order.
        store.eventLog.upsert(paymentOrder: .init(payeeReference: "p1", paymentOrderID: "/psp/paymentorders/1", createdAtMs: 1))
        store.eventLog.update(.init(id: "s1", phase: "completed", atMs: 2))
        let first = Store.StoredAnswer(status: 201, contentType: "application/json", body: Array(#"{"id":"s1"}"#.utf8))
        store.eventLog.remember(.init(scope: "create", key: "k1", answer: first, atMs: 2))
        store.eventLog.remember(.init(scope: "create", key: "k1", answer: Store.StoredAnswer(status: 200, contentType: "text/plain", body: []), atMs: 3))
        store.eventLog.append(LogEvent(atMs: 4, sessionID: "s1", kind: "test", summary: "after"))
        let batches = store.eventLog.batchCount
        try await store.pool.write { db in try db.execute(sql: "PRAGMA max_page_count = 1073741823") }
        #expect(await store.eventLog.flush())
        #expect(store.eventLog.batchCount - batches == 1, "the rows and the events committed together")
        #expect(try store.session(id: "s1")?.phase == "completed", "a refused row stays queued, is written once the disk takes it, and the update after it applies to it")
        #expect(try store.paymentOrder(payeeReference: "p1")?.paymentOrderID == "/psp/paymentorders/1")
        #expect(try store.idempotentAnswer(scope: "create", key: "k1") == first, "the first answer for a key is kept")
        await store.close()
    }

    @Test("after-commit actions run once what came before them is committed, in the order given; at once when nothing is outstanding")
    func afterCommitActions() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let log = store.eventLog
        // (action number, events committed when it ran, committed flag)
        let seen = Mutex<[(Int, UInt64, Bool)]>([])
        log.afterCommit { ok in seen.withLock { $0.append((0, log.writtenCount, ok)) } }
        #expect(seen.withLock { $0.map(\.0) } == [0], "nothing outstanding: the action ran before afterCommit returned")
        for i in 1...300 {
            log.append(LogEvent(atMs: Int64(i), sessionID: "s", kind: "test", summary: "event \(i)"))
            if i % 3 == 0 { log.afterCommit { ok in seen.withLock { $0.append((i, log.writtenCount, ok)) } } }
        }
        await log.flush()
        let runs = seen.withLock { $0 }
        #expect(runs.map(\.0) == [0] + Array(stride(from: 3, through: 300, by: 3)), "each once, in order")
        for (i, written, ok) in runs {
            #expect(ok && written >= UInt64(i), "action \(i) ran with \(written) events committed")
        }
        await store.close()
        // A stopped log never leaves an action waiting: run at once, false when what came before it
        // will not be committed.
        let late = Mutex<[Bool]>([])
        log.afterCommit { ok in late.withLock { $0.append(ok) } }
        log.append(LogEvent(atMs: 1, sessionID: "s", kind: "test", summary: "after the close"))
        log.afterCommit { ok in late.withLock { $0.append(ok) } }
        #expect(late.withLock { $0 } == [true, false])
    }

    @Test("a small commit asked for within the gathering pause of the last waits that pause, and what is asked for meanwhile goes with it; a quiet log or a larger commit goes at once")
    func commitsGathered() async throws {
        #expect(EventLog.gathers(queued: 1, sinceLastCommit: .microseconds(500), pause: .milliseconds(1)))
        #expect(EventLog.gathers(queued: EventLog.gatherBelow - 1, sinceLastCommit: .zero, pause: .milliseconds(1)))
        #expect(!EventLog.gathers(queued: EventLog.gatherBelow, sinceLastCommit: .zero, pause: .milliseconds(1)), "enough to commit now")
        #expect(!EventLog.gathers(queued: 0, sinceLastCommit: .zero, pause: .milliseconds(1)), "nothing to wait with")
        #expect(!EventLog.gathers(queued: 1, sinceLastCommit: .milliseconds(1), pause: .milliseconds(1)), "a quiet log")

        let dir = TempDirectory()
        defer { dir.cleanup() }
        // A pause far longer than the writer's 10 ms rounds and than any scheduling delay here.
        let store = try Store.open(path: dir.file("k.sqlite"), commitGather: .seconds(1))
        let log = store.eventLog
        let began = ContinuousClock.now
        log.append(LogEvent(atMs: 1, sessionID: "s", kind: "test", summary: "first"))
        #expect(await log.flush())
        let committed = ContinuousClock.now
        #expect(began.duration(to: committed) < .milliseconds(500), "nothing committed before: no pause")
        let batches = log.batchCount
        let ranAt = Mutex<[Duration]>([])
        log.append(LogEvent(atMs: 2, sessionID: "s", kind: "push", summary: "second"))
        log.afterCommit { _ in ranAt.withLock { $0.append(committed.duration(to: .now)) } }
        try await Task.sleep(for: .milliseconds(50))
        log.append(LogEvent(atMs: 3, sessionID: "s", kind: "push", summary: "third"))
        log.afterCommit { _ in ranAt.withLock { $0.append(committed.duration(to: .now)) } }
        #expect(await log.flush())
        #expect(log.batchCount - batches == 1, "both pushes in one commit")
        let times = ranAt.withLock { $0 }
        #expect(times.count == 2 && times.allSatisfy { $0 >= .milliseconds(700) },
                "the pushes waited out the pause, the second's call did not end it: \(times)")
        await store.close()
    }

    /// The writer runs the actions a commit made due outside its lock. An action given in that
    /// moment, with nothing left to commit, used to run at once on its caller's thread, before the
    /// earlier one had run: a session's next push could reach a connection before the push before it.
    @Test("an action given while the writer runs an earlier one waits for it, even with nothing left to commit")
    func afterCommitWaitsForTheActionBeingRun() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let log = store.eventLog
        let order = Mutex<[String]>([])
        let firstRunning = DispatchSemaphore(value: 0), letFirstFinish = DispatchSemaphore(value: 0)
        // Behind the commit gate, so the writer cannot commit the event before the action is queued behind it.
        log.commitGate.held {
            log.append(LogEvent(atMs: 1, sessionID: "s", kind: "push", summary: "seq 1"))
            log.afterCommit { _ in
                firstRunning.signal()
                _ = letFirstFinish.wait(timeout: .now() + 5)
                order.withLock { $0.append("first") }
            }
        }
        let (started, secondRanAtOnce) = try await onThread { () -> (Bool, Bool) in
            // The writer has committed everything and is inside the first action.
            let started = firstRunning.wait(timeout: .now() + 5) == .success
            log.afterCommit { _ in order.withLock { $0.append("second") } }
            let ranAtOnce = order.withLock { $0.contains("second") }
            letFirstFinish.signal()
            return (started, ranAtOnce)
        }
        #expect(started, "the first action ran on the writer thread after its commit")
        #expect(!secondRanAtOnce, "the second action did not overtake the first")
        #expect(await log.flush())
        let deadline = ContinuousClock.now + .seconds(5)
        while order.withLock({ $0.count }) < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(order.withLock { $0 } == ["first", "second"])
        // Once the writer is done delivering, an action with nothing outstanding runs at once again.
        var ranAtOnce = false
        for _ in 0..<200 where !ranAtOnce {
            let ran = Mutex(false)
            log.afterCommit { _ in ran.withLock { $0 = true } }
            ranAtOnce = ran.withLock { $0 }
            if !ranAtOnce { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(ranAtOnce)
        await store.close()
    }

    @Test("under steady commits the WAL starts over long before the writer's backstop checkpoint")
    func walStartsOverUnderSteadyCommits() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("k.sqlite")
        let store = try Store.open(path: path)
        let log = store.eventLog
        let holds = Mutex<[Double]>([])
        log.onWALRestart { seconds in holds.withLock { $0.append(seconds) } }
        // The WAL's last committed frame, from the header SQLite keeps in the -shm file (offset 16,
        // host byte order): read beside SQLite, without a checkpoint of our own.
        func walFrames() -> UInt32 {
            guard let header = FileManager.default.contents(atPath: path + "-shm"), header.count >= 20 else { return 0 }
            return header.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16, as: UInt32.self) }
        }
        let limit = UInt32(3 * Checkpointer.restartFrames)
        var (restarts, most, last) = (0, UInt32(0), UInt32(0))
        let summary = String(repeating: "x", count: 300)
        var round = 0
        // Back-to-back commits, each a few frames, as under load: without help the WAL is never fully
        // copied when a commit begins, so it grows until the backstop (65 536 frames).
        // Until the WAL has started over twice, once at least after a hold of the commits (a restart
        // can also come by itself, when a passive checkpoint copies everything between two commits).
        while (restarts < 2 || holds.withLock({ $0.isEmpty })) && most <= limit && round < 40_000 {
            round += 1
            for i in 0..<5 { log.append(LogEvent(atMs: Int64(round), sessionID: "s\(round % 97)-\(i)", kind: "test", summary: summary)) }
            await log.flush()
            let frames = walFrames()
            if frames < last { restarts += 1 }
            (most, last) = (max(most, frames), frames)
        }
        #expect(restarts >= 2, "the WAL started over \(restarts) times in \(round) commits")
        #expect(most <= limit, "the WAL reached \(most) frames")
        // Each catch-up that held the commits is reported, with its time: the commit after it starts
        // the WAL over.
        let held = holds.withLock { $0 }
        #expect(!held.isEmpty && held.count <= restarts + 1, "\(held.count) holds for \(restarts) restarts")
        #expect(held.allSatisfy { $0 > 0 && $0 < 5 })
        await store.close()
    }

    @Test("each read of the database's files reaches the store's observer with its time and the thread that made it: the event log's writer, the checkpointer or another; not after the store closes")
    func fileReadsObserved() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("k.sqlite")
        let store = try Store.open(path: path)
        let reads = Mutex<[FileReader: [Double]]>([:])
        store.onFileRead { reader, seconds in reads.withLock { $0[reader, default: []].append(seconds) } }
        func count(_ reader: FileReader) -> Int { reads.withLock { $0[reader]?.count ?? 0 } }
        let summary = String(repeating: "x", count: 300)
        for i in 0..<3_000 { store.eventLog.append(LogEvent(atMs: Int64(i), sessionID: "s\(i % 7)", kind: "test", summary: summary)) }
        await store.eventLog.flush()
        // A reader's connection starts with an empty cache: its pages come from the WAL's file.
        _ = try store.eventLog.events(sessionID: "s3", limit: 1_000)
        #expect(count(.other) > 0)
        // Past the checkpointer's threshold of events it copies the WAL back, reading its frames.
        for _ in 0..<100 where count(.checkpoint) == 0 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(count(.checkpoint) > 0)
        // With its cache emptied, the writer reads the pages its next commit changes.
        try await store.pool.write { db in try db.execute(sql: "PRAGMA shrink_memory") }
        let writerReads = count(.eventlog)
        store.eventLog.append(LogEvent(atMs: 5_000, sessionID: "s1", kind: "test", summary: summary))
        await store.eventLog.flush()
        #expect(count(.eventlog) > writerReads)
        #expect(reads.withLock { $0.values.joined().allSatisfy { $0 >= 0 && $0 < 5 } })
        await store.close()
        // A store opened later on the file has no observer until it is given one.
        let seen = reads.withLock { $0.values.map(\.count).reduce(0, +) }
        let reopened = try Store.open(path: path)
        _ = try reopened.eventLog.events(sessionID: "s1", limit: 1_000)
        #expect(reads.withLock { $0.values.map(\.count).reduce(0, +) } == seen)
        await reopened.close()
    }

    @Test("journal is WAL; a new database gets the store's page size, one that exists keeps its own")
    func walMode() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let (mode, pageSize) = try await store.pool.read { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA page_size"))
        }
        #expect(mode == "wal")
        #expect(pageSize == Store.pageSize)
        await store.close()
        // A database made with SQLite's default pages (as before this setting) keeps them.
        let older = dir.file("older.sqlite")
        try await DatabaseQueue(path: older).write { db in try db.execute(sql: "CREATE TABLE t(x)") }
        let reopened = try Store.open(path: older)
        #expect(try await reopened.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 4_096)
        await reopened.close()
    }

    @Test("the writer's page cache is small below 1 GiB and large from there (SQLite walks it on commits below)")
    func writerCacheFollowsDatabaseSize() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        store.eventLog.append(LogEvent(atMs: 1, sessionID: "s1", kind: "test", summary: "one"))
        await store.eventLog.flush()
        let writer = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") }
        let reader = try await store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") }
        #expect(writer == -Store.smallWriterCacheKiB)
        #expect(reader == -8192)
        // The lock byte sits at 1 GiB whatever the page size.
        #expect(Store.writerCacheKiB(pages: 262_143, pageSize: 4096) == Store.smallWriterCacheKiB)
        #expect(Store.writerCacheKiB(pages: 262_145, pageSize: 4096) == Store.largeWriterCacheKiB)
        #expect(Store.writerCacheKiB(pages: 65_537, pageSize: 16_384) == Store.largeWriterCacheKiB)
        #expect(Store.writerCacheKiB(pages: 65_535, pageSize: 16_384) == Store.smallWriterCacheKiB)
        #expect(Store.largeWriterCacheKiB > Store.smallWriterCacheKiB)
        await store.close()
    }

    @Test("every column of an event is stored as given: empty text stays text, absent values stay NULL, numbers at their limits")
    func eventColumnsRoundTrip() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let full = LogEvent(atMs: Int64.max, sessionID: "s-å", seq: Int64.min, kind: "test.full", level: .error, summary: "",
                            durationMs: 0.125, status: Int.max, traceID: "", data: ["text": "Grüße, 東京"])
        let bare = LogEvent(atMs: Int64.min, kind: "", summary: "bare")
        // The earliest time first: a time before the one logged ahead of it would take that one's.
        store.eventLog.append(bare)
        store.eventLog.append(full)
        await store.eventLog.flush()
        let rows = try await store.pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT at_ms, session_id, seq, kind, level, summary, duration_ms, status, trace_id, data,
                       typeof(summary), typeof(trace_id), typeof(session_id), typeof(data) FROM events ORDER BY id
                """)
        }
        #expect(rows.count == 2)
        let (b, f) = (Array(rows[0].databaseValues), Array(rows[1].databaseValues))
        let expectedFull: [DatabaseValueConvertible?] = [Int64.max, "s-å", Int64.min, "test.full", "error", "", 0.125, Int64(Int.max), "",
                                                         #"{"text":"Grüße, 東京"}"#, "text", "text", "text", "text"]
        let expectedBare: [DatabaseValueConvertible?] = [Int64.min, nil, nil, "", "info", "bare", nil, nil, nil, nil, "text", "null", "null", "null"]
        #expect(f == expectedFull.map { $0?.databaseValue ?? .null })
        #expect(b == expectedBare.map { $0?.databaseValue ?? .null })
        await store.close()
    }

    @Test("hex session and trace ids are kept as 16 bytes and read back as text; other ids stay text; rows written as text before are found with them, filed or not")
    func idsKeptAsBytes() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let session = "0193a1b2c3d4e5f60718293a4b5c6d7e", trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        // As the release before wrote every row: both ids as text.
        try await store.pool.write { db in
            try db.execute(sql: "INSERT INTO events(at_ms, session_id, kind, level, summary, trace_id) VALUES (1, ?, 'test', 'info', 'as text', ?)",
                           arguments: [session, trace])
        }
        store.eventLog.append(LogEvent(atMs: 2, sessionID: session, kind: "test", summary: "as bytes", traceID: trace))
        // Not 32 lower-case hex digits: kept as given.
        let upper = session.uppercased(), short = String(session.dropLast())
        store.eventLog.append(LogEvent(atMs: 3, sessionID: upper, kind: "test", summary: "upper", traceID: short))
        await store.eventLog.flush()
        let stored = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT typeof(session_id), length(session_id), typeof(trace_id), length(trace_id) FROM events ORDER BY id")
                .map { "\($0[0] as String) \($0[1] as Int) \($0[2] as String) \($0[3] as Int)" }
        }
        #expect(stored == ["text 32 text 32", "blob 16 blob 16", "text 32 text 31"])
        func found() throws -> [[String]] {
            var bySession = Store.EventQuery(), byTrace = Store.EventQuery()
            bySession.sessionID = session
            byTrace.traceID = trace
            return [try store.timeline(sessionID: session).map(\.summary), try store.searchEvents(bySession).map(\.summary),
                    try store.searchEvents(byTrace).map(\.summary), try store.timeline(sessionID: upper).map(\.summary)]
        }
        let expected = [["as text", "as bytes"], ["as text", "as bytes"], ["as text", "as bytes"], ["upper"]]
        #expect(try found() == expected)
        try store.eventLog.writeBehindGate { try EventLog.indexSessionEvents($0) }
        #expect(try found() == expected)
        let filed = try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT typeof(session_id) FROM session_events ORDER BY event_id") }
        #expect(filed == ["text", "blob", "text"])
        let read = try store.eventLog.events()
        #expect(read.map(\.sessionID) == [session, session, upper])
        #expect(read.map(\.traceID) == [trace, trace, short])
        await store.close()

        // Any id reads back as given: ids near the hex shape (other lengths, capitals, a digit past
        // `f`), kept as bytes only when exactly 32 lower-case hex digits.
        var random = SeededRandom(seed: 22)
        let alphabet = Array("0123456789abcdefABCDEFgz-")
        for _ in 0..<2_000 {
            let length = [31, 32, 32, 32, 33][Int(random.next() % 5)]
            var characters = (0..<length).map { _ in alphabet[Int(random.next() % 16)] }
            if random.next() % 2 == 0 { characters[Int(random.next() % UInt64(length))] = alphabet[Int(random.next() % UInt64(alphabet.count))] }
            let id = String(characters)
            var buffer = [UInt8](repeating: 0, count: StoredID.byteCount)
            let written = buffer.withUnsafeMutableBufferPointer { StoredID.bytes(of: id, into: $0) }
            let canonical = id.utf8.count == 32 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
            #expect((written != nil) == canonical, "\(id)")
            let stored = written == nil ? id.databaseValue : Data(buffer).databaseValue
            #expect(StoredID.text(stored) == id, "\(id)")
        }
    }

    @Test("a session's and a payment order's rows are stored as given, absent values as NULL; a second order with the same payee reference updates the first")
    func sessionAndOrderRowsRoundTrip() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let full = Store.SessionRecord(id: "s-full", clientTokenSHA256: "ab", viewHref: "sealed:1", payeeReference: "p-1",
                                       paymentOrderID: "/psp/paymentorders/1", phase: "starting", createdAtMs: Int64.min,
                                       updatedAtMs: Int64.max, traceID: "t", msisdnSuffix: "1234", lastProblemType: "",
                                       clientDeviceSealed: "sealed:2", publicBaseURL: "https://kassa.example", rootSpanID: "r")
        let bare = Store.SessionRecord(id: "s-bare", clientTokenSHA256: "", viewHref: "v", payeeReference: nil, paymentOrderID: nil,
                                       phase: "starting", createdAtMs: 0, updatedAtMs: 0)
        try await store.insertSession(full)
        try await store.insertSession(bare)
        #expect(try store.session(id: "s-full") == full)
        #expect(try store.session(id: "s-bare") == bare)
        #expect(try await store.pool.read { db in try String.fetchOne(db, sql: "SELECT typeof(last_problem_type) || typeof(trace_id) FROM sessions WHERE id = 's-bare'") } == "nullnull")
        try await store.recordPaymentOrder(payeeReference: "p-1", paymentOrderID: nil, atMs: 5)
        try await store.recordPaymentOrder(payeeReference: "p-1", paymentOrderID: "/psp/paymentorders/1", setInstrumentHref: "h",
                                           apiVersion: "3.1", atMs: 9)
        #expect(try store.paymentOrder(payeeReference: "p-1")
                == Store.PaymentOrderRecord(payeeReference: "p-1", paymentOrderID: "/psp/paymentorders/1", setInstrumentHref: "h",
                                            apiVersion: "3.1", createdAtMs: 5))
        await store.close()
    }

    @Test("held phases fall due in the order their holds began, each hold once, a later phase keeping the first deadline; a phase written or ended since is not due")
    func heldPhasesFallDueInOrder() {
        var held = EventLog.HeldPhases()
        let start = ContinuousClock.now
        func at(_ ms: Int) -> ContinuousClock.Instant { start + .milliseconds(ms) }
        func update(_ id: String, _ phase: String) -> EventLog.RowWrite { .sessionUpdate(.init(id: id, phase: phase)) }
        func ids(_ changes: [EventLog.SessionUpdate]) -> [String] { changes.map { "\($0.id):\($0.phase ?? "")" } }
        #expect(held.take([update("a", "attempting"), update("b", "attempting"), update("c", "attempting")], now: at(0)).isEmpty)
        #expect(held.take([update("d", "attempting")], now: at(300)).isEmpty)
        // A later phase of a: held in place of the first, due at the first's deadline.
        #expect(held.take([update("a", "waitingForRedirect")], now: at(500)).isEmpty)
        // b ends: written now, its hold dropped.
        #expect(held.take([update("b", "completed")], now: at(600)).count == 1)
        #expect(ids(held.due(by: at(999), all: false)) == [])
        #expect(ids(held.due(by: at(1_000), all: false)) == ["a:waitingForRedirect", "c:attempting"])
        // Not written (the pass failed): due again.
        #expect(ids(held.due(by: at(1_100), all: false)) == ["a:waitingForRedirect", "c:attempting"])
        held.written([.init(id: "a"), .init(id: "c")])
        // b held again after its end was dropped: a new hold, due after d's.
        #expect(held.take([update("b", "attempting")], now: at(1_200)).isEmpty)
        #expect(ids(held.due(by: at(1_299), all: false)) == [])
        #expect(ids(held.due(by: at(2_200), all: false)) == ["d:attempting", "b:attempting"])
        #expect(Set(ids(held.due(by: at(0), all: true))) == ["d:attempting", "b:attempting"])
        held.written([.init(id: "d"), .init(id: "b")])
        #expect(held.isEmpty && held.due(by: at(10_000), all: false).isEmpty)
        // Many holds: only the due ones come back, in order, however long the queue grew.
        for i in 0..<10_000 { _ = held.take([update("s\(i)", "attempting")], now: at(20_000 + i)) }
        let due = held.due(by: at(21_004), all: false)
        #expect(ids(due) == (0...4).map { "s\($0):attempting" })
        held.written(due)
        for i in 5..<9_000 { _ = held.take([update("s\(i)", "completed")], now: at(30_000)) }
        #expect(ids(held.due(by: at(40_000), all: false)) == (9_000..<10_000).map { "s\($0):attempting" })
    }

    @Test("sessions in progress are found through their own small index, at a restart and by a search for their phase; ended phases are the machine's terminal ones; the MSISDN index holds only sessions with one")
    func unfinishedSessionsIndex() async throws {
        #expect(Retention.endedPhases == PaymentSessionMachine.Phase.allCases.filter(\.isTerminal).map(\.rawValue))
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let phases = PaymentSessionMachine.Phase.allCases.map(\.rawValue)
        for i in 0..<90 {
            try await store.insertSession(Store.SessionRecord(id: "s\(1_000 + i)", clientTokenSHA256: "", viewHref: "v", payeeReference: nil,
                                                              paymentOrderID: nil, phase: "starting", createdAtMs: Int64(i), updatedAtMs: Int64(i)))
            store.eventLog.update(.init(id: "s\(1_000 + i)", phase: phases[i % phases.count], atMs: Int64(i)))
        }
        await store.eventLog.flush()
        let unfinished = try store.unfinishedSessions()
        #expect(unfinished.map(\.createdAtMs) == (0..<90).filter { !Retention.endedPhases.contains(phases[$0 % phases.count]) }.map(Int64.init))
        func found(_ phase: String) throws -> [Int64] {
            var query = Store.SessionQuery()
            (query.phase, query.limit) = (phase, 100)
            return try store.searchSessions(query).map(\.createdAtMs)
        }
        func expected(_ phase: String) -> [Int64] { (0..<90).reversed().filter { phases[$0 % phases.count] == phase }.map(Int64.init) }
        // Phases in progress reach the rows within the hold (`EventLog.HeldPhases`).
        let waiting = ContinuousClock.now
        while try found("failed") != expected("failed") || found("attempting") != expected("attempting"), waiting.duration(to: .now) < .seconds(5) {
            try await Task.sleep(for: .milliseconds(20))
        }
        for phase in ["failed", "completed", "attempting"] {
            #expect(try found(phase) == expected(phase), "\(phase)")
        }
        // The plans: the restart's query and a search for a phase in progress walk the small index;
        // a search by MSISDN suffix uses its index, which holds only the sessions that have one.
        let newestFirst = "ORDER BY created_at_ms DESC, id DESC LIMIT ?"
        for (sql, count, index) in [("SELECT * FROM sessions WHERE \(Store.unfinished) ORDER BY created_at_ms", 0, "sessions_unfinished"),
                                    ("SELECT * FROM sessions WHERE phase = ? AND \(Store.unfinished) \(newestFirst)", 2, "sessions_unfinished"),
                                    ("SELECT * FROM sessions WHERE msisdn_suffix = ? \(newestFirst)", 2, "sessions_by_msisdn_suffix")] {
            let plan = try await store.pool.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(Array(repeating: "1234", count: count)))
                    .map { $0["detail"] as String }
            }
            #expect(plan.contains { $0.contains(index) }, "\(sql): \(plan)")
        }
        #expect(try await store.pool.read { db in
            try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE name = 'sessions_by_msisdn_suffix'")
        }?.hasSuffix("WHERE msisdn_suffix IS NOT NULL") == true)
        // A change of phase before the end leaves the index alone; the end takes the session out.
        for (sql, touches) in [(EventLog.changePhaseSQL, false), (EventLog.endSessionSQL, true)] {
            let program = try await store.pool.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN " + sql, arguments: ["completed", 1, "s1000"]).map { ($0["opcode"] as String, $0["p2"] as Int) }
            }
            let root = try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT rootpage FROM sqlite_schema WHERE name = 'sessions_unfinished'") }
            #expect(program.contains { $0.0 == "OpenWrite" && $0.1 == root } == touches, "\(sql)")
        }
        await store.close()
    }

    @Test("a database from before the mark of sessions in progress (v18) keeps the same sessions in progress")
    func unfinishedMarkMigration() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("v17.sqlite")
        let old = try Store.open(path: path, upTo: "v17-once-done")
        let phases = PaymentSessionMachine.Phase.allCases.map(\.rawValue)
        try await old.pool.write { db in
            for (i, phase) in phases.enumerated() {
                try db.execute(sql: """
                    INSERT INTO sessions(id, client_token_sha256, view_href, phase, created_at_ms, updated_at_ms)
                    VALUES (?, '', 'v', ?, ?, ?)
                    """, arguments: ["s\(i)", phase, i, i])
            }
        }
        await old.close()
        let store = try Store.open(path: path)
        #expect(try store.unfinishedSessions().map(\.phase) == phases.filter { !Retention.endedPhases.contains($0) })
        // Ended from here on through the writer: out of the index.
        store.eventLog.update(.init(id: "s0", phase: "canceled", atMs: 99))
        await store.eventLog.flush()
        #expect(try store.unfinishedSessions().map(\.id) == phases.indices.filter { $0 > 0 && !Retention.endedPhases.contains(phases[$0]) }.map { "s\($0)" })
        await store.close()
    }

    @Test("a database from before payment orders named their sessions (v19) finds the same sessions by payee reference and payment order")
    func paymentOrdersLeadToSessionsMigration() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("v18.sqlite")
        let old = try Store.open(path: path, upTo: "v18-sessions-unfinished-mark")
        try await old.pool.write { db in
            // s1's order has its row; s2's order has none (found all the same after the step); K3 was made
            // through the merchant API alone.
            for (id, reference) in [("s1", "K1"), ("s2", "K2")] {
                try db.execute(sql: """
                    INSERT INTO sessions(id, client_token_sha256, view_href, payee_reference, payment_order_id, phase, created_at_ms, updated_at_ms)
                    VALUES (?, '', 'v', ?, ?, 'completed', 1, 1)
                    """, arguments: [id, reference, "/psp/paymentorders/\(reference)"])
            }
            for reference in ["K1", "K3"] {
                try db.execute(sql: """
                    INSERT INTO payment_orders(payee_reference, payment_order_id, setinstrument_href, api_version, created_at_ms)
                    VALUES (?, ?, 'h', '3.1', 5)
                    """, arguments: [reference, "/psp/paymentorders/\(reference)"])
            }
        }
        await old.close()
        let store = try Store.open(path: path)
        func found(reference: String? = nil, order: String? = nil) throws -> [String] {
            var q = Store.SessionQuery()
            q.payeeReference = reference
            q.paymentOrderID = order
            return try store.searchSessions(q).map(\.id)
        }
        #expect(try found(reference: "K1") == ["s1"])
        #expect(try found(order: "/psp/paymentorders/K1") == ["s1"])
        #expect(try found(reference: "K2") == ["s2"])
        #expect(try found(order: "/psp/paymentorders/K2") == ["s2"])
        #expect(try found(reference: "K3").isEmpty)
        #expect(try store.paymentOrder(payeeReference: "K1")
                == Store.PaymentOrderRecord(payeeReference: "K1", paymentOrderID: "/psp/paymentorders/K1", setInstrumentHref: "h",
                                            apiVersion: "3.1", createdAtMs: 5, sessionID: "s1"))
        #expect(try store.paymentOrder(id: "/psp/paymentorders/K3")?.sessionID == nil)
        // A new session's order, written by the writer, leads to it too.
        try await store.recordPaymentOrder(payeeReference: "K4", paymentOrderID: "/psp/paymentorders/K4", sessionID: "s4", atMs: 7, waiting: false)
        try await store.insertSession(Store.SessionRecord(id: "s4", clientTokenSHA256: "", viewHref: "v", payeeReference: "K4",
                                                          paymentOrderID: "/psp/paymentorders/K4", phase: "starting", createdAtMs: 7, updatedAtMs: 7))
        #expect(try found(reference: "K4") == ["s4"])
        #expect(try found(order: "/psp/paymentorders/K4") == ["s4"])
        // Both searches go through indexes: the order's key, then the session's.
        for clause in ["payee_reference = 'K1'", "payment_order_id = 'x'"] {
            let plan = try await store.pool.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT * FROM sessions WHERE id IN (SELECT session_id FROM payment_orders WHERE \(clause))")
                    .map { $0["detail"] as String }
            }
            #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(plan)")
        }
        #expect(try await store.pool.read { db in
            try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE name = 'payment_orders'")
        }?.contains("WITHOUT ROWID") == true)
        await store.close()
    }

    @Test("payment orders last as long as their sessions, or by their own age when made through the merchant API alone (v21)")
    func paymentOrderRetention() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("v20.sqlite")
        // Before the step: the order of a session that retention has already deleted.
        let old = try Store.open(path: path, upTo: "v20-events-without-sequence")
        try await old.recordPaymentOrder(payeeReference: "K-gone", paymentOrderID: "/psp/paymentorders/gone", sessionID: "gone", atMs: 1)
        await old.close()
        let store = try Store.open(path: path)
        #expect(try store.paymentOrder(payeeReference: "K-gone") == nil)

        let now: Int64 = 10 * 86_400_000
        for (id, phase) in [("s1", "completed"), ("s2", "awaitingInstrument")] {
            try await store.recordPaymentOrder(payeeReference: "K-\(id)", paymentOrderID: "/psp/paymentorders/\(id)", sessionID: id, atMs: 1_000,
                                               waiting: false)
            try await store.insertSession(Store.SessionRecord(id: id, clientTokenSHA256: "", viewHref: "v", payeeReference: "K-\(id)",
                                                              paymentOrderID: "/psp/paymentorders/\(id)", phase: phase,
                                                              createdAtMs: 1_000, updatedAtMs: 1_000))
        }
        try await store.recordPaymentOrder(payeeReference: "K-old", paymentOrderID: "/psp/paymentorders/old", atMs: 1_000)
        try await store.recordPaymentOrder(payeeReference: "K-new", paymentOrderID: "/psp/paymentorders/new", atMs: now - 1_000)
        _ = try await Retention(maxAgeDays: 1, maxBytes: 1 << 40).run(store, nowMs: now)
        // The ended session went, and its order with it; the one in progress keeps its order.
        #expect(try store.session(id: "s1") == nil)
        #expect(try store.paymentOrder(payeeReference: "K-s1") == nil)
        #expect(try store.paymentOrder(payeeReference: "K-s2")?.sessionID == "s2")
        #expect(try store.paymentOrder(payeeReference: "K-old") == nil)
        #expect(try store.paymentOrder(payeeReference: "K-new") != nil)
        await store.close()
    }

    @Test("events without a sequence (v20): ids still never go back, and retention keeps the newest event")
    func eventsWithoutSequence() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("v19.sqlite")
        // Before the step: events filed up to id 3, then every event deleted (as retention could).
        let old = try Store.open(path: path, upTo: "v19-payment-orders-lead-to-sessions")
        for i in 1...3 { old.eventLog.append(LogEvent(atMs: Int64(i), sessionID: "s1", kind: "session.created", summary: "old \(i)")) }
        await old.eventLog.flush()
        try old.eventLog.writeBehindGate { db in
            try EventLog.indexSessionEvents(db)
            try db.execute(sql: "DELETE FROM events")
        }
        await old.close()

        let store = try Store.open(path: path)
        func one<T: DatabaseValueConvertible & Sendable>(_ sql: String) async throws -> T? {
            try await store.pool.read { db in try T.fetchOne(db, sql: sql) }
        }
        #expect(try await one("PRAGMA integrity_check") == "ok")
        let declared: String? = try await one("SELECT sql FROM sqlite_schema WHERE name = 'events'")
        #expect(declared?.contains("id INTEGER PRIMARY KEY,") == true && declared?.contains("AUTOINCREMENT") == false)
        // The mark came down with the emptied table: the next events are found as not yet filed.
        #expect(try await one("SELECT upto FROM session_events_indexed") == 0)
        for i in 1...3 { store.eventLog.append(LogEvent(atMs: 10 + Int64(i), sessionID: "s2", kind: "session.created", summary: "new \(i)")) }
        await store.eventLog.flush()
        #expect(try store.timeline(sessionID: "s2").map(\.summary) == ["new 1", "new 2", "new 3"])
        #expect(try await one("SELECT count(*) FROM sqlite_sequence WHERE name = 'events'") == 0)

        // Retention by age or by count leaves the newest event, so the next id is one above it.
        #expect(try await store.deleteEvents(olderThanMs: 1_000, endedPhases: Retention.endedPhases) == 2)
        #expect(try await store.deleteOldestEvents(10) == 0)
        let newest: Int64? = try await one("SELECT max(id) FROM events")
        #expect(try await one("SELECT count(*) FROM events") == 1)
        store.eventLog.append(LogEvent(atMs: 20, sessionID: "s3", kind: "session.created", summary: "after"))
        await store.eventLog.flush()
        #expect(try await one("SELECT max(id) FROM events") == newest.map { $0 + 1 })
        #expect(try store.timeline(sessionID: "s3").map(\.summary) == ["after"])
        await store.close()
    }

    @Test("the start-up pass that seals plain upstream URLs runs once per database")
    func sealingPassRunsOnce() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("k.sqlite")
        func plainRow(_ id: String) -> Store.SessionRecord {
            Store.SessionRecord(id: id, clientTokenSHA256: "", viewHref: "https://api.example/psp/paymentsessions/\(id)", payeeReference: nil,
                                paymentOrderID: nil, phase: "starting", createdAtMs: 1, updatedAtMs: 1)
        }
        var store = try Store.open(path: path)
        // Rows as an older version left them.
        try store.insertSessionNow(plainRow("s1"))
        try store.insertSessionNow(plainRow("s2"))
        #expect(try store.sealPlainViewHrefs { href, id in "sealed:\(id)" } == 2)
        #expect(try store.session(id: "s1")?.viewHref == "sealed:s1")
        await store.close()
        // Reopened, the pass is not made again (a plain row now could only be written by hand).
        store = try Store.open(path: path)
        try store.insertSessionNow(plainRow("s3"))
        #expect(try store.sealPlainViewHrefs { _, _ in "sealed" } == 0)
        #expect(try store.session(id: "s3")?.viewHref.hasPrefix("https:") == true)
        await store.close()
    }

    @Test("pushed events replay in seq order after a given seq")
    func replayBySeq() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("k.sqlite")
        var store = try Store.open(path: path)
        for seq in 1...5 {
            store.eventLog.append(LogEvent(atMs: 1, sessionID: "s1", seq: Int64(seq), kind: "push.sent", summary: "#\(seq)"))
            store.eventLog.append(LogEvent(atMs: 1, sessionID: "s1", kind: "upstream.request", summary: "unsequenced"))
            store.eventLog.append(LogEvent(atMs: 1, sessionID: "s2", seq: Int64(seq), kind: "push.sent", summary: "other #\(seq)"))
        }
        await store.eventLog.flush()
        // Not filed in `session_events` yet: found among the newest events.
        #expect(try store.eventLog.pushedEvents(sessionID: "s1", afterSeq: 2).map(\.summary) == ["#3", "#4", "#5"])
        await store.close()
        // Reopened: the events left unfiled are filed before anything reads them, and found there.
        store = try Store.open(path: path)
        let filed = try await store.pool.read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM session_events"), try Int64.fetchOne(db, sql: "SELECT upto FROM session_events_indexed"))
        }
        #expect(filed.0 == 15 && filed.1 == 15)
        #expect(try store.eventLog.pushedEvents(sessionID: "s1", afterSeq: 2).map(\.summary) == ["#3", "#4", "#5"])
        #expect(try store.eventLog.pushedEvents(sessionID: "s2", afterSeq: 0).count == 5)
        await store.close()
    }

    @Test("the database, its WAL and its shared memory are owner-only (0600), also when the file existed world-readable")
    func ownerOnlyFiles() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("kassa.sqlite")
        FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644])
        let store = try Store.open(path: path)
        store.eventLog.append(LogEvent(atMs: 1, kind: "test", summary: "written"))
        await store.eventLog.flush()
        for file in [path, path + "-wal", path + "-shm"] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int, "\(file)")
            #expect(mode == 0o600, "\(file): \(String(mode, radix: 8))")
        }
        await store.close()
    }

    @Test("a database made by an older schema is migrated and keeps its rows")
    func migratesOlderSchema() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("old.sqlite")
        let old = try Store.open(path: path, upTo: "v1-events")
        #expect(try old.appliedMigrations() == ["v1-events"])
        old.eventLog.append(LogEvent(atMs: 42, kind: "old", summary: "from v1"))
        old.eventLog.append(LogEvent(atMs: 43, sessionID: "s-1", kind: "old", summary: "v1, s-1"))
        await old.close()

        let current = try Store.open(path: path)
        #expect(try current.appliedMigrations() == Migrations.names)
        #expect(try current.eventLog.events().map(\.summary) == ["from v1", "v1, s-1"])
        #expect(try current.timeline(sessionID: "s-1").map(\.summary) == ["v1, s-1"])
        let filed = try await current.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM session_events WHERE session_id = 's-1'") }
        #expect(filed == 1)
        try await current.recordPaymentOrder(payeeReference: "ref1", paymentOrderID: "/psp/paymentorders/1", atMs: 1)
        #expect(try current.paymentOrder(payeeReference: "ref1")?.paymentOrderID == "/psp/paymentorders/1")
        await current.close()
    }

    @Test("stored idempotent answers from before v9 lose their client tokens, and their keys become digests")
    func idempotencyRedactedOnMigration() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("v8.sqlite")
        let old = try Store.open(path: path, upTo: "v8-idempotency-request")
        let body = JSONValue.object(["id": "s1", "clientToken": "v1.abc.123.sealed-token-in-clear", "payer": ["email": "anna@example.se"]]).bytes
        try await old.rememberAnswer(scope: "create:x", key: "order-42", .init(status: 201, contentType: "application/json", body: body), atMs: 1)
        await old.close()

        let current = try Store.open(path: path)
        #expect(try current.idempotentAnswer(scope: "create:x", key: "order-42") == nil, "the plain key is gone")
        let answer = try #require(try current.idempotentAnswer(scope: "create:x", key: Hashing.sha256Hex("order-42")))
        let stored = try JSONValue.parse(answer.body)
        #expect(stored["id"] == "s1" && stored["clientToken"]?.stringValue == Redaction.placeholder)
        #expect(stored["payer"]?["email"]?.stringValue == Redaction.placeholder)
        await current.close()
    }

    @Test("a database a later release migrated is refused with a clear message and left as it was")
    func laterReleaseRefused() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("later.sqlite")
        let store = try Store.open(path: path)
        await store.close()
        let later = try DatabaseQueue(path: path)
        try await later.write { db in try db.execute(sql: "INSERT INTO grdb_migrations(identifier) VALUES ('v99-from-a-later-release')") }
        #expect {
            _ = try Store.open(path: path)
        } throws: { error in
            "\(error)".contains(path) && "\(error)".contains("a later release of Kassa has changed it (v99-from-a-later-release)")
        }
        let identifiers = try await later.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid") }
        #expect(identifiers == Migrations.names + ["v99-from-a-later-release"])
        try later.close()
    }

    @Test("a corrupt file fails to open with a clear message")
    func corruptFile() throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.file("corrupt.sqlite")
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try Store.open(path: path)
        } throws: { error in
            "\(error)".contains(path) && "\(error)".contains("not a Kassa database or is corrupt")
        }
    }

    @Test("an unwritable path fails to open with a clear message")
    func unwritablePath() throws {
        let path = "/nonexistent-kassa-dir/sub/k.sqlite"
        #expect {
            _ = try Store.open(path: path)
        } throws: { error in
            "\(error)".contains(path) && "\(error)".contains("cannot be opened")
        }
    }
}
