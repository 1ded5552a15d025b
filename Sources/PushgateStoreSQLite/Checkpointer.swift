import Dispatch
import GRDB
import GRDBSQLite
import Logging
import PushgateStore
import Synchronization

/// Copies the WAL back into the database file on a thread of its own, so that the store's writer
/// never does it. SQLite's automatic checkpoint runs inside the commit that crosses its
/// threshold: that one commit writes a thousand pages and fsyncs the database file before its
/// batches are answered, the p999 of every push behind it. Here the writer's commit only
/// notices the WAL's size (SQLite's WAL hook, which replaces the automatic checkpoint) and asks
/// for a checkpoint; a second connection runs it (PASSIVE: it takes no lock the writer waits for,
/// and copies what no reader still needs), while commits go on appending to the WAL.
///
/// Only a transaction that starts once everything in the WAL has been copied restarts the WAL
/// from its beginning. Commits back to back never leave the background checkpoint such a moment
/// (each lands while it copies the one before): the WAL then grew without bound (41 MB after
/// 30,000 pushes in StoreBenchmark), and every commit past the threshold asked for another
/// checkpoint, an fsync of the database file each, doubling the fsyncs. So past the threshold a
/// checkpoint is asked for once per `stepFrames` new frames, and whenever the writer pauses
/// (`writerIdle`: the gateway's writer does, between commits, so its WAL starts over near the
/// threshold as before); past `writerFrames` the writer's commit copies what is left itself
/// (little: the background checkpoints have copied the rest), so that its next transaction
/// restarts the WAL.
final class Checkpointer: Sendable {
    /// SQLite's own default for the automatic checkpoint: about 4 MB of WAL.
    static let thresholdFrames: Int32 = 1000
    /// The WAL's bound, about 16 MB: one commit in a few thousand pays a checkpoint of the
    /// frames the background one has not copied yet, and only under load that never pauses.
    static let writerFrames: Int32 = 4 * thresholdFrames
    /// New frames between two checkpoint requests past the threshold: with commits back to
    /// back, one fsync of the database file per 125 frames instead of one per commit.
    static let stepFrames: Int32 = thresholdFrames / 8

    private let connection: DatabaseQueue
    private let queue = DispatchQueue(label: "pushgate.store.checkpoint")
    private let scheduled = Atomic<Bool>(false)
    /// The WAL's size in frames when a checkpoint was last asked for (0: none since it
    /// restarted), and after the last commit. Only the writer uses them (its WAL hook and
    /// `writerIdle`).
    private let requestedAt = Atomic<Int32>(0)
    private let walFrames = Atomic<Int32>(0)
    /// Whether the last checkpoint failed: logged when this changes, not per checkpoint (a full
    /// disk fails every one).
    private let failing = Atomic<Bool>(false)
    private let logger: Logger
    private let path: String

    init(path: String, logger: Logger) throws {
        var configuration = Configuration()
        configuration.label = "pushgate.store.checkpoint"
        configuration.allowsUnsafeTransactions = true
        // Opening reads the WAL index, which the writer may hold for an instant.
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // A checkpoint fsyncs the database file before the WAL may be reused: needs FULL
            // (or NORMAL), never OFF.
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        connection = try DatabaseQueue(path: path, configuration: configuration)
        self.logger = logger
        self.path = path
    }

    /// Installs the WAL hook on the writer's connection: from now on its commits ask for
    /// checkpoints instead of running them. `self` must outlive the hook (`uninstall`).
    func install(on db: Database) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_wal_hook(
            db.sqliteConnection,
            { context, connection, _, frames in
                guard let context else { return SQLITE_OK }
                Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().walGrew(to: frames, connection)
                return SQLITE_OK
            },
            context
        )
    }

    /// After each of the writer's commits, with the frames now in the WAL.
    private func walGrew(to frames: Int32, _ writer: OpaquePointer?) {
        walFrames.store(frames, ordering: .relaxed)
        var last = requestedAt.load(ordering: .relaxed)
        if frames < last { last = 0 }  // the WAL started over
        if frames >= Self.writerFrames {
            // SQLite's own automatic checkpoint runs here too (a WAL hook may checkpoint).
            // While the background one holds the checkpoint lock this one copies nothing: it
            // waits for that one and copies what is left, or the WAL would grow by a commit for
            // as long as a slow copy lasts, past the bound on a loaded machine.
            // A passive checkpoint never waits for the writer, so this wait ends.
            if sqlite3_wal_checkpoint_v2(writer, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil) == SQLITE_BUSY {
                waitForCheckpoints()
                sqlite3_wal_checkpoint_v2(writer, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            }
            last = 0
        } else if frames >= Self.thresholdFrames, frames >= last + Self.stepFrames {
            last = frames
            request()
        }
        requestedAt.store(last, ordering: .relaxed)
    }

    /// The writer has nothing to commit: what its last commits added past the threshold is
    /// copied now, while no commit lands during the copy.
    func writerIdle() {
        let frames = walFrames.load(ordering: .relaxed)
        guard frames >= Self.thresholdFrames, frames > requestedAt.load(ordering: .relaxed) else { return }
        requestedAt.store(frames, ordering: .relaxed)
        request()
    }

    var framesAfterLastCommit: Int32 { walFrames.load(ordering: .relaxed) }

    func uninstall(from db: Database) {
        sqlite3_wal_hook(db.sqliteConnection, nil, nil)
    }

    /// At most one checkpoint waits or runs at a time; a request meanwhile is covered by it.
    func request() {
        guard !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [self] in
            scheduled.store(false, ordering: .releasing)
            checkpoint()
        }
    }

    /// Waits for a requested checkpoint to finish.
    func waitForCheckpoints() {
        queue.sync {}
    }

    /// Waits for a running checkpoint, then closes the connection. Closed first, it is not the
    /// last connection, so it leaves the final checkpoint to the writer's close.
    func close() {
        queue.sync {
            try? connection.close()
        }
    }

    private func checkpoint() {
        do {
            try connection.writeWithoutTransaction { db in
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
            }
            if failing.exchange(false, ordering: .relaxed) {
                logger.notice("WAL checkpoints succeed again", metadata: ["path": "\(path)"])
            }
        } catch {
            // The next request tries again; meanwhile the WAL grows (commits still succeed
            // while there is room for it).
            if !failing.exchange(true, ordering: .relaxed) {
                logger.warning(
                    "WAL checkpoint failed; the WAL grows until one succeeds",
                    metadata: [
                        "path": "\(path)", "error": "\(SQLiteBackend.describe(error))",
                    ]
                )
            }
        }
    }
}
