import Logging
import PushgateStore
import Synchronization

/// How the PostgreSQL backend talks to its database.
public struct PostgresOptions: Sendable {
    /// The longest a statement may run on the server (`statement_timeout`), and, with a second
    /// more, the longest the writer waits for any answer: a stuck or unreachable database fails
    /// the commit (503) instead of holding requests.
    public var statementTimeoutMilliseconds = 5000
    /// Seconds to establish a connection, unless the URL or `PGCONNECT_TIMEOUT` says otherwise.
    public var connectTimeoutSeconds = 5
    /// While no commit comes, the connection is checked this often, so that an outage (or its
    /// end) shows in readiness without traffic.
    public var probeInterval: Duration = .seconds(2)
    /// Answers wait for the WAL flush: a session whose `synchronous_commit` is `off` is raised
    /// to `on` (other values, which wait for as much or more, are kept).
    public var requireSynchronousCommit = true
    /// A node of a cluster (`pushgate serve`): it shares the database with other nodes, reads no
    /// device at start (it takes each over when it must act for it: `PostgresCluster`), and
    /// gives acceptance ids from a block of its own. Off: one user of the database at a time,
    /// which reads everything (`pushgate store copy`, the tests of the store itself).
    public var cluster = false

    public init() {}
}

/// The PostgreSQL backend: one connection, owned by the store's writer, driven in pipeline
/// mode so that a whole group (BEGIN, every batch's statements, COMMIT) is sent at once and
/// answered in one round trip. The schema is `PostgresSchema`'s; the statements are the SQLite
/// backend's (`PostgresCommands`).
///
/// A failing batch: a pipeline stops at its first error, and the transaction with it, so a
/// savepoint per batch would need a round trip per batch (the statements after a failed one
/// are skipped up to the next sync point, so each batch would need its own). Instead the group
/// is sent optimistically; when a batch is refused for its content (a constraint, a value out
/// of range: SQLSTATE classes 23 and 22) the transaction is rolled back, that batch is marked
/// failed, and the group is sent again without it. Batches before it are unchanged, and the
/// ones after it now see the database without it, which is what per-batch atomicity means.
/// One round trip in the common case, one more per failing batch. Values beyond `bigint` are
/// refused before anything is sent.
///
/// Connection failures: the backend reconnects on the next call, at once the first time and
/// then with a growing pause (up to `maxBackoff`), failing calls meanwhile with `.unavailable`
/// so that requests get 503 at once rather than waiting on a dead server. The store's health
/// turns them into readiness; the probe (`probeInterval`) finds an outage, and its end, while
/// nothing is committed.
///
/// A connection lost after COMMIT was sent leaves the outcome unknown. The transaction's id is
/// read first (flushed before the batches run), so a new connection asks the server
/// (`txid_status`), after ending the old session if it still runs, and the group gets its true
/// outcome. When the server cannot be asked within `statementTimeout`, the group fails as
/// `.unavailable`; the answer is logged once the server can be asked (a group that had
/// committed then is in the database, answered 503: its pushes are delivered after a restart,
/// as a provider's retry would be).
public final class PostgresBackend: StoreBackend {
    /// Where the store is, for logs and messages: database, host, port and user, never the
    /// password.
    public let target: String
    /// Connection state and errors, for the metrics.
    public let connectionStatus: DatabaseConnectionStatus
    public let probeInterval: Duration?

    private let session: Mutex<PostgresSession>

    /// Connects to `url`, brings the schema up to date (under an advisory lock) and reads the
    /// highest acceptance id. Fails at once when the database cannot be reached: a gateway
    /// starts only on a database it could read.
    public init(url: String, options: PostgresOptions = PostgresOptions(), logger: Logger) throws(StoreError) {
        let status = DatabaseConnectionStatus()
        let session = PostgresSession(url: url, options: options, status: status, logger: logger)
        let connection: PGConnection
        do {
            connection = try session.connect()
        } catch {
            status.errors.add(.connect)
            throw StoreError(.database, "cannot connect to PostgreSQL: \(error.message)")
        }
        let target = connection.target
        do {
            let deadline = monotonicNanoseconds() + 60_000_000_000
            let (from, to) = try PostgresSchema.migrate(connection, deadline: deadline)
            try session.claim(connection)
            try session.prepare(connection)
            session.committedMaxAcceptanceID = try PostgresSnapshot.maxAcceptanceID(
                connection,
                deadline: session.deadline()
            )
            logger.info(
                "store opened",
                metadata: [
                    "database": "\(target)",
                    "schema": "\(to)",
                    "migrated": "\(from == to ? "no" : "from \(from)")",
                ]
            )
        } catch {
            throw StoreError(.database, "cannot open the Pushgate schema in PostgreSQL \(target): \(error.message)")
        }
        session.adopt(connection)
        self.target = target
        connectionStatus = status
        probeInterval = options.probeInterval
        self.session = Mutex(session)
    }

    // MARK: - StoreBackend

    public func load() throws(StoreError) -> StoreSnapshot {
        try session.withLock { session throws(StoreError) in try session.load() }
    }

    public func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
        try session.withLock { session throws(StoreError) in try session.apply(group) }
    }

    public func close() throws(StoreError) {
        session.withLock { $0.disconnect() }
    }

    public func probe() throws(StoreError) {
        try session.withLock { session throws(StoreError) in try session.probe() }
    }

    /// Writes `snapshot` (a stopped SQLite store's, for `pushgate store copy`) in one
    /// transaction, into a database that holds no Pushgate data yet; refuses otherwise,
    /// changing nothing.
    public func importSnapshot(_ snapshot: StoreSnapshot) throws(StoreError) {
        try session.withLock { session throws(StoreError) in try session.importSnapshot(snapshot) }
    }

    /// Rows per table (`PostgresSchema.dataTables`), for `store copy`'s report.
    public func rowCounts() throws(StoreError) -> [(table: String, rows: Int)] {
        try session.withLock { session throws(StoreError) in try session.rowCounts() }
    }
}
