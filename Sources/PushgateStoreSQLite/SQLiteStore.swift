import Logging
import PushgateStore

/// The gateway's store on one node: group commit over the SQLite backend.
public typealias SQLiteStore = GroupCommitStore<SQLiteBackend>

extension GroupCommitStore where Backend == SQLiteBackend {
    /// Opens (creating if needed) `<directory>/pushgate.sqlite` and brings its schema up to date.
    public convenience init(
        directory: String,
        maxPendingCommands: Int = 100_000,
        pacing: CommitPacing = .default,
        durability: Durability = .fsync,
        metrics: StoreMetrics = .none,
        logger: Logger
    ) throws(StoreError) {
        self.init(
            backend: try SQLiteBackend(directory: directory, logger: logger),
            maxPendingCommands: maxPendingCommands,
            pacing: pacing,
            durability: durability,
            metrics: metrics,
            logger: logger
        )
    }

    /// Path of the database file.
    public var path: String { backend.path }

    /// Reads a PRAGMA on the store's own connection (per-connection settings included).
    @_spi(Testing)
    public func pragma(_ name: String) throws -> String? {
        try backend.pragma(name)
    }

    /// Returns once a checkpoint the writer asked for has run.
    @_spi(Testing)
    public func waitForCheckpoints() {
        backend.waitForCheckpoints()
    }
}
