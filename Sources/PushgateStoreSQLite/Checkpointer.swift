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
final class Checkpointer: Sendable {
    /// SQLite's own default for the automatic checkpoint: about 4 MB of WAL.
    static let thresholdFrames: Int32 = 1000

    private let connection: DatabaseQueue
    private let queue = DispatchQueue(label: "pushgate.store.checkpoint")
    private let scheduled = Atomic<Bool>(false)
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
        sqlite3_wal_hook(db.sqliteConnection, { context, _, _, frames in
            guard let context else { return SQLITE_OK }
            let checkpointer = Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue()
            if frames >= Checkpointer.thresholdFrames { checkpointer.request() }
            return SQLITE_OK
        }, context)
    }

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
                logger.warning("WAL checkpoint failed; the WAL grows until one succeeds", metadata: [
                    "path": "\(path)", "error": "\(SQLiteBackend.describe(error))",
                ])
            }
        }
    }
}
