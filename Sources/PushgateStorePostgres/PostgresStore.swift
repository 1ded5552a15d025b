import Logging
import PushgateStore

/// The gateway's store on a PostgreSQL database: group commit over the PostgreSQL backend.
public typealias PostgresStore = GroupCommitStore<PostgresBackend>

extension GroupCommitStore where Backend == PostgresBackend {
    /// Connects to `url` (libpq's forms) and brings the schema up to date.
    public convenience init(
        url: String,
        options: PostgresOptions = PostgresOptions(),
        maxPendingCommands: Int = 100_000,
        pacing: CommitPacing = .default,
        durability: Durability = .fsync,
        metrics: StoreMetrics = .none,
        logger: Logger
    ) throws(StoreError) {
        self.init(
            backend: try PostgresBackend(url: url, options: options, logger: logger),
            maxPendingCommands: maxPendingCommands,
            pacing: pacing,
            durability: durability,
            metrics: metrics,
            logger: logger
        )
    }
}
