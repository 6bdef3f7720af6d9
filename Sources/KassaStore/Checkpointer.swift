import Foundation
import GRDB
import KassaCore
import Synchronization

/// Copies the WAL back into the database file on a thread and connection of its own.
/// Left to the writer (SQLite's auto-checkpoint), each copy and its fsync happen inside a
/// commit, and every push waiting for that commit waits with it (0.25–0.5 s stalls every
/// 16 MiB of log under load). A passive checkpoint takes no lock writers need, so appends
/// go on while it runs. The writer keeps a far-off auto-checkpoint as a backstop.
///
/// SQLite starts the WAL over only when a write begins with every frame copied, which under
/// steady commits never happens by itself: the WAL would grow to the backstop, whose checkpoint
/// runs inside a commit (50–200 ms stalls every few seconds). So once a passive checkpoint has
/// nearly caught up, the checkpointer holds the event log's commit gate while it copies the few
/// frames left (two fsyncs of a few hundred pages: milliseconds), and the next commit restarts
/// the WAL. Other writers may land a commit in between; then the next round tries again.
final class Checkpointer: Sendable {
    static let interval = 0.25
    static let behindInterval = 0.005
    /// Checkpoint after this many events (≈ 4 MiB of WAL with their index pages), or after
    /// `maxQuietSeconds` if fewer were written: each checkpoint costs two fsyncs.
    static let eventsPerCheckpoint: UInt64 = 2_000
    static let maxQuietSeconds = 5.0
    /// Start the WAL over once it holds this many frames (32 MiB of 2 KiB pages, a second or two
    /// under load)…
    static let restartFrames = 16_384
    /// …and a passive checkpoint has left about this many uncopied at most: the commit gate is held
    /// while they are copied. Passive checkpoints repeat, each shorter, until it is so.
    static let catchUpFrames = 256
    private let running = Atomic<Bool>(true)
    private let stopped = DispatchSemaphore(value: 0)
    private let wake = DispatchSemaphore(value: 0)

    /// nil when the database cannot be opened a second time (then the writer's backstop checkpoints).
    /// `written`: how many events the log has committed so far; `heldCommits`: how long the commit
    /// gate was held for a catch-up, in seconds, each time.
    init?(path: String, gate: CommitGate, written: @escaping @Sendable () -> UInt64,
          heldCommits: @escaping @Sendable (Double) -> Void) {
        let connection: DatabaseQueue
        do {
            var configuration = Configuration()
            configuration.label = "kassa-checkpoint"
            connection = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            return nil
        }
        let thread = Thread.named("kassa-checkpoint", scheduling: .batch) { [self] in
            FileReader.enter(.checkpoint)
            defer { FileReader.leave() }
            var checkpointedAt: UInt64 = 0
            var quietSeconds = 0.0
            var lastFrames = 0
            var backlog = 0 // about how many frames the last checkpoint left uncopied
            while running.load(ordering: .relaxed) {
                // Behind (bulk deletes, a reader holding an old snapshot): copy again almost at once.
                let behind = backlog > Self.catchUpFrames
                let pause = behind ? Self.behindInterval : Self.interval
                _ = wake.wait(timeout: .now() + pause)
                guard running.load(ordering: .relaxed) else { break }
                quietSeconds += pause
                let now = written()
                guard behind || now - checkpointedAt >= Self.eventsPerCheckpoint || (now != checkpointedAt && quietSeconds >= Self.maxQuietSeconds) else {
                    continue
                }
                checkpointedAt = now
                quietSeconds = 0
                // Failures (a full or read-only disk) show in the event log's writes; nothing to add here.
                guard let (frames, copied) = Self.checkpoint(connection) else {
                    backlog = 0
                    continue
                }
                // A checkpoint copies up to the WAL's end as it found it. What came since the last
                // one began is about what this one left behind (all of it when the WAL started over).
                let arrived = frames >= lastFrames ? frames - lastFrames : frames
                lastFrames = frames
                backlog = max(arrived, frames - copied)
                // Past twice the restart size the commits come faster than a passive round can catch
                // up with (a slow disk): hold them for whatever is left rather than let the WAL grow
                // to the backstop, whose checkpoint would hold them longer.
                let holdNow = arrived <= Self.catchUpFrames || frames >= 2 * Self.restartFrames
                guard frames >= Self.restartFrames, holdNow, frames == copied else { continue }
                let held = gate.held { () -> Duration in
                    let began = ContinuousClock.now
                    _ = Self.checkpoint(connection)
                    return began.duration(to: .now)
                }
                heldCommits(held.inSeconds)
                backlog = 0
            }
            // Closed here, not whenever the thread's closure is released: the last connection
            // to close removes the WAL, and a stopped store leaves a tidy file behind.
            try? connection.close()
            stopped.signal()
        }
        thread.start()
    }

    /// A passive checkpoint: the WAL's frames and how many of them are now copied back.
    private static func checkpoint(_ connection: DatabaseQueue) -> (frames: Int, copied: Int)? {
        let row = try? connection.writeWithoutTransaction { db in try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)") }
        guard let row, let frames = row[1] as Int?, let copied = row[2] as Int? else { return nil }
        return (frames, copied)
    }

    /// Returns once a checkpoint in progress has finished (no new one starts).
    func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        wake.signal()
        stopped.wait()
    }
}

/// A lock the event log's writer holds around each commit (see `Checkpointer`).
final class CommitGate: Sendable {
    private let mutex = Mutex<Void>(())

    func held<T, E: Error>(_ body: () throws(E) -> sending T) throws(E) -> sending T {
        try mutex.withLock { _ throws(E) -> sending T in try body() }
    }
}
