import Foundation
import GRDB
import KassaCore
import Synchronization

/// Copies the WAL back into the database file on a thread and connection of its own.
/// Left to the writer (SQLite's auto-checkpoint), each copy and its fsync happen inside a
/// commit, and every push waiting for that commit waits with it (0.25–0.5 s stalls every
/// 16 MiB of log under load). A passive checkpoint takes no lock writers need, so appends
/// go on while it runs. The writer keeps a far-off auto-checkpoint as a backstop.
final class Checkpointer: Sendable {
    static let interval = 0.25
    /// Checkpoint after this many events (≈ 4 MiB of WAL with their index pages), or after
    /// `maxQuietSeconds` if fewer were written: each checkpoint costs two fsyncs.
    static let eventsPerCheckpoint: UInt64 = 2_000
    static let maxQuietSeconds = 5.0
    private let running = Atomic<Bool>(true)
    private let stopped = DispatchSemaphore(value: 0)
    private let wake = DispatchSemaphore(value: 0)

    /// nil when the database cannot be opened a second time (then the writer's backstop checkpoints).
    /// `written`: how many events the log has committed so far.
    init?(path: String, written: @escaping @Sendable () -> UInt64) {
        let connection: DatabaseQueue
        do {
            var configuration = Configuration()
            configuration.label = "kassa-checkpoint"
            connection = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            return nil
        }
        let thread = Thread.named("kassa-checkpoint") { [self] in
            var checkpointedAt: UInt64 = 0
            var quietSeconds = 0.0
            while running.load(ordering: .relaxed) {
                _ = wake.wait(timeout: .now() + Self.interval)
                guard running.load(ordering: .relaxed) else { break }
                quietSeconds += Self.interval
                let now = written()
                guard now - checkpointedAt >= Self.eventsPerCheckpoint || (now != checkpointedAt && quietSeconds >= Self.maxQuietSeconds) else {
                    continue
                }
                checkpointedAt = now
                quietSeconds = 0
                // Failures (a full or read-only disk) show in the event log's writes; nothing to add here.
                try? connection.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
            }
            // Closed here, not whenever the thread's closure is released: the last connection
            // to close removes the WAL, and a stopped store leaves a tidy file behind.
            try? connection.close()
            stopped.signal()
        }
        thread.start()
    }

    /// Returns once a checkpoint in progress has finished (no new one starts).
    func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        wake.signal()
        stopped.wait()
    }
}
