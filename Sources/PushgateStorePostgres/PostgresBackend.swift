import CLibPQ
import Logging
import PushgateStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    private let session: Mutex<Session>

    /// Connects to `url`, brings the schema up to date (under an advisory lock) and reads the
    /// highest acceptance id. Fails at once when the database cannot be reached: a gateway
    /// starts only on a database it could read.
    public init(url: String, options: PostgresOptions = PostgresOptions(), logger: Logger) throws(StoreError) {
        let status = DatabaseConnectionStatus()
        let session = Session(url: url, options: options, status: status, logger: logger)
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

/// The writer's side of the backend: the connection and what goes with it. Only ever used
/// under the backend's mutex (which the writer alone takes, but for start-up and `store copy`).
private final class Session {
    let url: String
    let options: PostgresOptions
    let status: DatabaseConnectionStatus
    let logger: Logger

    private(set) var connection: PGConnection?
    private var params = PGParams()
    /// Where the last connection went (no password), for messages once it is gone.
    private var target = "PostgreSQL"
    /// Failed connection attempts in a row, and when the next may be made.
    private var failedAttempts = 0
    private var nextAttemptAt: UInt64 = 0
    private var lastError: String?
    /// The highest acceptance id committed (see the SQLite backend's `applyGroup`).
    var committedMaxAcceptanceID: UInt64 = 0
    /// A transaction whose outcome could not be learned: looked up on the next connection.
    private var unresolved: (txid: Int64, batches: Int)?
    private var raisedSynchronousCommit = false
    /// Another gateway took the database while the connection was lost.
    private var superseded = false
    /// The server process of a connection the gateway gave up on (no answer in time, a broken
    /// socket): it may still run, holding the single-gateway lock, until it notices.
    private var abandonedBackend: Int32?

    static let maxBackoffNanoseconds: UInt64 = 4_000_000_000

    init(url: String, options: PostgresOptions, status: DatabaseConnectionStatus, logger: Logger) {
        self.url = url
        self.options = options
        self.status = status
        self.logger = logger
    }

    /// When an answer must have come: the statement timeout and a second for the round trip.
    func deadline() -> UInt64 {
        monotonicNanoseconds() + UInt64(options.statementTimeoutMilliseconds + 1000) * 1_000_000
    }

    // MARK: Connecting

    /// A new connection, set up (timeouts, synchronous_commit) but with nothing prepared.
    func connect() throws(PGError) -> PGConnection {
        var defaults: [(String, String)] = [("client_encoding", "UTF8")]
        // The environment's own values win over these defaults, as they would for psql.
        let environment = ProcessEnvironment()
        if environment["PGCONNECT_TIMEOUT"] == nil {
            defaults.append(("connect_timeout", "\(options.connectTimeoutSeconds)"))
        }
        if environment["PGAPPNAME"] == nil { defaults.append(("application_name", "pushgate")) }
        let connection = try PGConnection(url: url, defaults: defaults)
        status.connectionOpened()
        do throws(PGError) {
            try setUp(connection)
        } catch {
            status.connectionClosed()
            throw error
        }
        return connection
    }

    /// The session's settings: the statement timeout, sequential scans only where nothing else
    /// can answer, and synchronous_commit raised from off.
    ///
    /// Every statement the store runs finds its rows by a key it has an index for, and runs as a
    /// prepared statement whose generic plan PostgreSQL keeps after five executions. Planned
    /// while a table was nearly empty (a new database, a table an ack has just emptied), that
    /// plan may be a sequential scan, kept as the table grows until an autoanalyze happens to
    /// replace it: a delete of acked pushes then read the whole notifications table each time,
    /// and a flat-out run went from 12,000 pushes/s to 2,500 at six times the server's CPU.
    private func setUp(_ connection: PGConnection) throws(PGError) {
        let deadline = self.deadline()
        try connection.execute(
            "SET statement_timeout = \(options.statementTimeoutMilliseconds)",
            deadline: deadline
        )
        try connection.execute("SET enable_seqscan = off", deadline: deadline)
        if options.requireSynchronousCommit {
            let current = try connection.execute("SHOW synchronous_commit", deadline: deadline)?.value() ?? ""
            if current == "off" {
                try connection.execute("SET synchronous_commit = on", deadline: deadline)
                if !raisedSynchronousCommit {
                    raisedSynchronousCommit = true
                    logger.notice(
                        "synchronous_commit is off for the gateway's role or database; the gateway sets it to on for its own connection, as a 200 must mean the WAL is flushed"
                    )
                }
            }
        }
    }

    /// Takes the database lock (`PostgresSchema.singleGatewayLockKey`) for the session: shared
    /// by the nodes of a cluster, alone by anything else (a copy into the database); fails when
    /// it cannot be had.
    func claim(_ connection: PGConnection) throws(PGError) {
        var params = PGParams()
        params.int64(PostgresSchema.singleGatewayLockKey)
        let function = options.cluster ? "pg_try_advisory_lock_shared" : "pg_try_advisory_lock"
        let taken = try connection.execute("SELECT \(function)($1::bigint)", params, deadline: deadline())?.value()
        if taken != "t" {
            throw PGError(message: options.cluster ? Self.copyRunning : Self.anotherGateway, connectionBroken: true)
        }
    }

    /// Ends the session of the connection given up on, if the server still runs it, and waits
    /// until it is gone: its lock is this gateway's own, not another gateway's.
    private func endAbandonedBackend(_ connection: PGConnection) throws(PGError) {
        guard let pid = abandonedBackend else { return }
        let deadline = self.deadline()
        var params = PGParams()
        params.int32(pid)
        try connection.execute("SELECT pg_terminate_backend($1::integer)", params, deadline: deadline)
        while try connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::integer",
            params,
            deadline: deadline
        )?
        .value() != "0" {
            if monotonicNanoseconds() >= deadline {
                throw PGError(message: "the previous session (process \(pid)) does not end", connectionBroken: true)
            }
            usleep(20_000)
        }
        abandonedBackend = nil
    }

    static let anotherGateway = """
        a gateway (or another pushgate store copy) is using this database: stop it first \
        (pg_stat_activity shows its connections, application_name pushgate)
        """

    static let copyRunning = """
        pushgate store copy is writing into this database: start the gateway once it has finished
        """

    /// Prepares every statement of `PostgresCommands`, in one round trip.
    func prepare(_ connection: PGConnection) throws(PGError) {
        let deadline = self.deadline()
        try connection.enterPipeline()
        for statement in PostgresCommands.statements {
            try connection.sendPrepare(statement.name, statement.sql)
        }
        try connection.sync()
        try connection.flush(deadline: deadline)
        let failure = try connection.readThroughSync(deadline: deadline)
        try connection.exitPipeline()
        if let failure { throw failure }
    }

    func adopt(_ connection: PGConnection) {
        self.connection = connection
        target = connection.target
        status.setConnected(true)
    }

    func disconnect() {
        if connection != nil {
            connection = nil
            status.connectionClosed()
        }
        status.setConnected(false)
    }

    /// The connection, made again if it was lost (at once the first time, then after a pause
    /// that doubles up to `maxBackoffNanoseconds`); throws `.unavailable` meanwhile.
    func connected() throws(StoreError) -> PGConnection {
        if let connection { return connection }
        if superseded {
            // Unavailable, so that readiness takes this gateway out of rotation for good.
            throw StoreError(
                .unavailable,
                "another gateway took this database over while the connection was lost: this gateway's state is stale; stop it"
            )
        }
        let now = monotonicNanoseconds()
        if now < nextAttemptAt {
            throw StoreError(
                .unavailable,
                "PostgreSQL (\(target)) is unreachable: \(lastError ?? "connection lost"); next attempt in \((nextAttemptAt - now) / 1_000_000) ms"
            )
        }
        do throws(PGError) {
            let connection = try connect()
            do throws(PGError) {
                try endAbandonedBackend(connection)
                try claim(connection)
                try prepare(connection)
            } catch {
                status.connectionClosed()
                throw error
            }
            adopt(connection)
            logger.info(
                "store connected again",
                metadata: ["database": "\(target)", "attempts": "\(failedAttempts + 1)"]
            )
            failedAttempts = 0
            nextAttemptAt = 0
            lastError = nil
            lookUpUnresolved(connection)
            return connection
        } catch {
            status.errors.add(.connect)
            if error.message == Self.anotherGateway {
                // Its devices and queues are now another gateway's: committing from this one's
                // memory would undo that one's work.
                superseded = true
                logger.critical("\(Self.anotherGateway); this gateway commits nothing more until it is restarted")
                throw StoreError(.unavailable, "PostgreSQL (\(target)): \(error.message)")
            }
            failedAttempts += 1
            let pause = min(Self.maxBackoffNanoseconds, 250_000_000 << UInt64(min(failedAttempts - 1, 10)))
            nextAttemptAt = monotonicNanoseconds() + pause
            lastError = error.message
            logger.debug("store connection attempt failed", metadata: ["error": "\(error.message)"])
            throw StoreError(.unavailable, "cannot connect to PostgreSQL (\(target)): \(error.message)")
        }
    }

    /// Drops a connection that failed, and says what the failure means for the store.
    private func lost(_ error: PGError, kind: DatabaseConnectionStatus.ErrorKind) -> StoreError {
        status.errors.add(kind)
        if let connection { abandonedBackend = connection.backendPID }
        disconnect()
        lastError = error.message
        return StoreError(
            .unavailable,
            error.timedOut
                ? "PostgreSQL (\(target)) did not answer within \(options.statementTimeoutMilliseconds + 1000) ms; the connection was dropped"
                : "PostgreSQL (\(target)): \(error.message)"
        )
    }

    // MARK: Reading

    func load() throws(StoreError) -> StoreSnapshot {
        let connection = try connected()
        do {
            if options.cluster { return try PostgresSnapshot.nodeStart(connection, deadline: deadline) }
            return try PostgresSnapshot.read(connection, deadline: deadline)
        } catch {
            if error.connectionBroken { throw lost(error, kind: error.timedOut ? .timeout : .connectionLost) }
            throw StoreError(.database, "cannot read the store from PostgreSQL (\(target)): \(error.message)")
        }
    }

    func probe() throws(StoreError) {
        let connection = try connected()
        do {
            if !connection.isIdleOutsideTransaction { try connection.execute("ROLLBACK", deadline: deadline()) }
            try connection.execute("SELECT 1", deadline: deadline())
        } catch {
            throw lost(error, kind: error.timedOut ? .timeout : .connectionLost)
        }
    }

    // MARK: Writing

    /// What a query of the pipeline was, to read its result.
    private enum Sent {
        case control
        case transactionID
        case commit
        case command(batch: Int, command: Int)
        /// One lease's fences (`Fences.byLease`).
        case fences(Int)
    }

    private enum Attempt {
        case committed
        /// The batch was refused for its content; the transaction was rolled back.
        case refused(batch: Int, StoreError)
    }

    func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
        var results = [Result<Void, StoreError>?](repeating: nil, count: group.count)
        for (index, commands) in group.enumerated() {
            if let refusal = commands.lazy.compactMap(PostgresCommands.refusal).first {
                results[index] = .failure(
                    StoreError(.database, "batch of \(commands.count) command(s) refused: \(refusal)")
                )
            }
        }
        while true {
            let sending = results.indices.filter { results[$0] == nil && !group[$0].isEmpty }
            switch try attempt(group, sending) {
            case .committed:
                for index in results.indices where results[index] == nil { results[index] = .success(()) }
                committedMaxAcceptanceID =
                    Self.highestAcceptanceID(in: group, sending, above: committedMaxAcceptanceID)
                    .id
                return results.map { $0! }
            case .refused(let batch, let error):
                status.errors.add(.batch)
                results[batch] = .failure(error)
            }
        }
    }

    /// The fences of a transaction's batches, one statement per lease (one, but for batches
    /// queued just before the node joined again), each device once: once its fence passed, the
    /// same fence again in a later batch of the group can only pass too.
    private struct Fences {
        struct OfLease {
            var lease: UInt64
            var devices: [String] = []
            var epochs: [UInt64] = []
            /// The batch of each entry, to refuse when the entry fails.
            var batches: [Int] = []
            var seen: Set<FenceKey> = []
        }

        struct FenceKey: Hashable {
            var device: String
            var epoch: UInt64
        }

        var byLease: [OfLease] = []

        init(_ group: [[StoreCommand]], _ sending: [Int]) {
            for batch in sending {
                for case .fence(let device, let lease, let epoch) in group[batch] {
                    let index =
                        byLease.firstIndex { $0.lease == lease }
                        ?? {
                            byLease.append(OfLease(lease: lease))
                            return byLease.count - 1
                        }()
                    guard byLease[index].seen.insert(FenceKey(device: device, epoch: epoch)).inserted else { continue }
                    byLease[index].devices.append(device)
                    byLease[index].epochs.append(epoch)
                    byLease[index].batches.append(batch)
                }
            }
        }
    }

    /// One transaction with the batches `sending`, in one pipeline.
    private func attempt(_ group: [[StoreCommand]], _ sending: [Int]) throws(StoreError) -> Attempt {
        let connection = try connected()
        let fences = Fences(group, sending)
        let deadline = self.deadline()
        var sent: [Sent] = []
        var transactionID: Int64?
        var commitSent = false
        var committed = false
        var firstError: (Sent, PGError)?
        do throws(PGError) {
            try connection.enterPipeline()
            params.removeAll()
            if !connection.isIdleOutsideTransaction {
                // A refused batch left the transaction aborted.
                try connection.sendQuery("ROLLBACK", params)
                sent.append(.control)
            }
            try connection.sendQuery("BEGIN", params)
            sent.append(.control)
            if !sending.isEmpty {
                try connection.sendQuery("SELECT txid_current()", params, binaryResults: true)
                sent.append(.transactionID)
                try connection.flushRequest()
            }
            // Every fence first: the rows are held before anything changes.
            for (index, fences) in fences.byLease.enumerated() {
                try PostgresCommands.sendFences(lease: fences.lease, fences.devices, fences.epochs, connection, &params)
                sent.append(.fences(index))
            }
            for batch in sending {
                for (index, command) in group[batch].enumerated() {
                    let count = try PostgresCommands.send(command, connection, &params)
                    for _ in 0..<count { sent.append(.command(batch: batch, command: index)) }
                }
            }
            let highest = Self.highestAcceptanceID(in: group, sending, above: committedMaxAcceptanceID)
            if highest.deleted {
                try PostgresCommands.sendRaiseMaxAcceptanceID(highest.id, connection, &params)
                sent.append(.control)
            }
            params.removeAll()
            // A commit that waits for a synchronous standby, cancelled by the statement timeout,
            // would commit locally and answer COMMIT (with a warning): the 200 would not wait
            // for the standby. Without the timeout the writer's own deadline ends the wait, and
            // `resolve` gives the group its answer.
            try connection.sendQuery("SET LOCAL statement_timeout = 0", params)
            sent.append(.control)
            try connection.sendQuery("COMMIT", params)
            sent.append(.commit)
            try connection.sync()
            commitSent = true
            try connection.flush(deadline: deadline)
            for query in sent {
                var first: PGResult?
                while let result = try connection.nextResult(deadline: deadline) {
                    if first == nil { first = result }
                }
                guard let result = first else { continue }
                if let error = result.error {
                    if firstError == nil { firstError = (query, error) }
                    continue
                }
                switch query {
                case .transactionID where result.status == PGRES_TUPLES_OK && result.rows == 1:
                    transactionID = result.integer(0, 0)
                case .commit where result.status == PGRES_COMMAND_OK:
                    // COMMIT of an aborted transaction answers ROLLBACK without an error.
                    committed = firstError == nil
                default:
                    break
                }
            }
            // The sync point.
            while let result = try connection.nextResult(deadline: deadline) {
                if result.status == PGRES_PIPELINE_SYNC { break }
            }
            try connection.exitPipeline()
        } catch {
            // No answer, or the connection broke: the commit may or may not have happened.
            let failure = lost(error, kind: error.timedOut ? .timeout : .connectionLost)
            guard commitSent, firstError == nil else { throw failure }
            status.errors.add(.commitUnknown)
            guard let transactionID else {
                logger.error(
                    "the connection to PostgreSQL broke while a commit was on its way, before its transaction id was known: whether its batches committed cannot be learned; they were refused (503), and any that did commit take effect when their devices are read again (a restart, or a node taking them over)",
                    metadata: ["batches": "\(sending.count)", "error": "\(error.message)"]
                )
                throw failure
            }
            logger.warning(
                "the connection to PostgreSQL broke while a commit was on its way; asking the server whether it committed",
                metadata: [
                    "transaction": "\(transactionID)", "batches": "\(sending.count)", "error": "\(error.message)",
                ]
            )
            switch resolve(transactionID, pid: connection.backendPID, batches: sending.count, until: self.deadline()) {
            case .some(true):
                logger.notice("it had committed", metadata: ["transaction": "\(transactionID)"])
                return .committed
            case .some(false):
                logger.notice("it had not committed", metadata: ["transaction": "\(transactionID)"])
                throw failure
            case .none:
                unresolved = (transactionID, sending.count)
                throw StoreError(
                    failure.kind,
                    "\(failure.message) (while committing: the outcome is looked up when PostgreSQL answers again)"
                )
            }
        }
        if committed { return .committed }
        guard let (query, error) = firstError else {
            throw StoreError(.unavailable, "PostgreSQL (\(target)) did not commit the transaction and gave no reason")
        }
        if case .fences(let index) = query, error.sqlState == PostgresSchema.fencedState,
            let entry = error.detail.flatMap(Int.init), fences.byLease[index].batches.indices.contains(entry - 1)
        {
            let batch = fences.byLease[index].batches[entry - 1]
            return .refused(
                batch: batch,
                StoreError(
                    .fenced,
                    "batch of \(group[batch].count) command(s) refused: PostgreSQL error \(error.sqlState ?? "?"): \(error.message)"
                )
            )
        }
        if case .command(let batch, let command) = query, error.sqlClass == "23" || error.sqlClass == "22" {
            let commands = group[batch]
            return .refused(
                batch: batch,
                StoreError(
                    .database,
                    "batch of \(commands.count) command(s) refused: \(commands[command].summary): PostgreSQL error \(error.sqlState ?? "?"): \(error.message)"
                )
            )
        }
        status.errors.add(.transaction)
        if error.connectionBroken { disconnect() }
        throw StoreError(
            Self.isRetryable(error) ? .unavailable : .database,
            "PostgreSQL (\(target)) refused the transaction: \(error.sqlState ?? "?"): \(error.message)"
        )
    }

    /// Whether the same transaction may succeed later: the server ran out of something, is
    /// shutting down or recovering, is a read-only standby, or lost a race (SQLSTATE classes 08,
    /// 25, 40, 53, 55, 57, 58, XX). Anything else (a permission, a missing table) needs a person.
    static func isRetryable(_ error: PGError) -> Bool {
        guard let sqlClass = error.sqlClass else { return true }
        return ["08", "25", "40", "53", "55", "57", "58", "XX"].contains(sqlClass)
    }

    /// Whether transaction `txid`, whose connection (server process `pid`) broke while it
    /// committed, committed: asked on a new connection. Nil when the server cannot be asked
    /// before `until`.
    ///
    /// Committed means its commit ended on its own, the answer alone lost. A transaction still
    /// in progress (its session still runs: a commit waiting for a synchronous standby, a slow
    /// flush) has its session ended and counts as not committed: ending it while it waits for a
    /// standby commits it locally without the standby, and a 200 must not stand for less than
    /// the server's synchronous_commit promises. That it committed locally is logged; it is in
    /// the database, answered 503, as described in `PostgresBackend`.
    private func resolve(_ txid: Int64, pid: Int32, batches: Int, until: UInt64) -> Bool? {
        var ended = false
        while monotonicNanoseconds() < until {
            do throws(PGError) {
                let probe = try connect()
                defer { status.connectionClosed() }
                while monotonicNanoseconds() < until {
                    var params = PGParams()
                    params.int64(txid)
                    let answer = try probe.execute("SELECT txid_status($1::bigint)", params, deadline: until)?.value()
                    switch answer {
                    case "in progress":
                        var pidParam = PGParams()
                        pidParam.int32(pid)
                        try probe.execute("SELECT pg_terminate_backend($1::integer)", pidParam, deadline: until)
                        ended = true
                        usleep(50_000)
                    case "committed" where !ended:
                        return true
                    case "committed":
                        logger.error(
                            "a commit still waiting when its connection broke was ended by the gateway and committed locally (without the synchronous standby, if one is configured): its \(batches) batch(es) were refused (503) but are in the database, and take effect at the next restart"
                        )
                        return false
                    default:
                        // Aborted, or unknown to the server (never begun there).
                        return false
                    }
                }
            } catch {
                usleep(200_000)
            }
        }
        return nil
    }

    /// Logs the outcome of a transaction whose commit's answer was lost.
    private func lookUpUnresolved(_ connection: PGConnection) {
        guard let (txid, batches) = unresolved else { return }
        var params = PGParams()
        params.int64(txid)
        guard
            let answer = try? connection.execute("SELECT txid_status($1::bigint)", params, deadline: deadline())?
                .value()
        else { return }
        unresolved = nil
        if answer == "committed" {
            logger.error(
                "a transaction whose commit's answer was lost with the connection had committed: its \(batches) batch(es) were refused (503) but are in the database, and take effect when their devices are read again (a restart, or a node taking them over: pushes among them are delivered then, possibly beside a provider's retry)"
            )
        } else {
            logger.notice(
                "a transaction whose commit's answer was lost with the connection did not commit, as answered"
            )
        }
    }

    /// See the SQLite backend's `highestAcceptanceID`.
    static func highestAcceptanceID(
        in group: [[StoreCommand]],
        _ applied: [Int],
        above committed: UInt64
    ) -> (id: UInt64, deleted: Bool) {
        var highest = committed
        for batch in applied {
            for case .enqueue(let notification) in group[batch] where notification.acceptanceID > highest {
                highest = notification.acceptanceID
            }
        }
        for batch in applied {
            for command in group[batch] {
                switch command {
                case .ack(_, let ids), .remove(let ids), .deleteDevice(_, _, let ids):
                    if ids.contains(highest) { return (highest, true) }
                default:
                    continue
                }
            }
        }
        return (highest, false)
    }

    // MARK: store copy

    func rowCounts() throws(StoreError) -> [(table: String, rows: Int)] {
        let connection = try connected()
        do {
            var counts: [(String, Int)] = []
            for table in PostgresSchema.dataTables {
                let value = try connection.execute("SELECT count(*) FROM \(table)", deadline: deadline())?.value()
                counts.append((table, Int(value ?? "0") ?? 0))
            }
            return counts
        } catch {
            if error.connectionBroken { throw lost(error, kind: .connectionLost) }
            throw StoreError(.database, "cannot count the rows in PostgreSQL (\(target)): \(error.message)")
        }
    }

    func importSnapshot(_ snapshot: StoreSnapshot) throws(StoreError) {
        let connection = try connected()
        do throws(PGError) {
            try connection.execute("BEGIN", deadline: deadline())
            // Nobody writes meanwhile (a gateway starting on the database waits).
            try connection.execute(
                "LOCK TABLE \((PostgresSchema.dataTables + ["pushgate_meta"]).joined(separator: ", ")) IN EXCLUSIVE MODE",
                deadline: deadline()
            )
            var held: [String] = []
            for table in PostgresSchema.dataTables {
                let value = try connection.execute("SELECT count(*) FROM \(table)", deadline: deadline())?.value()
                if let rows = Int(value ?? "0"), rows > 0 { held.append("\(rows) \(table)") }
            }
            let highest = try PostgresSnapshot.maxAcceptanceID(connection, deadline: deadline())
            if highest > 0 { held.append("acceptance ids up to \(highest)") }
            if !held.isEmpty {
                throw PGError(
                    message:
                        "the database is not empty: it holds \(held.joined(separator: ", ")); store copy writes into an empty database only, and changed nothing",
                    connectionBroken: false
                )
            }
            let commands = snapshot.recreatingCommands
            var offset = 0
            // Pipelined in chunks, each with a sync point, so that neither side buffers it all.
            while offset < commands.count {
                let chunk = commands[offset..<min(offset + 1000, commands.count)]
                offset += chunk.count
                try connection.enterPipeline()
                var sentCommands: [StoreCommand] = []
                for command in chunk {
                    if let refusal = PostgresCommands.refusal(command) {
                        throw PGError(message: refusal, connectionBroken: false)
                    }
                    let count = try PostgresCommands.send(command, connection, &params)
                    sentCommands += repeatElement(command, count: count)
                }
                try connection.sync()
                let deadline = self.deadline()
                try connection.flush(deadline: deadline)
                for command in sentCommands {
                    while let result = try connection.nextResult(deadline: deadline) {
                        if var error = result.error {
                            error.message = "\(command.summary): \(error.message)"
                            throw error
                        }
                    }
                }
                while let result = try connection.nextResult(deadline: deadline) {
                    if result.status == PGRES_PIPELINE_SYNC { break }
                }
                try connection.exitPipeline()
            }
            params.removeAll()
            params.int64(Int64(clamping: snapshot.maxAcceptanceID))
            try connection.execute(
                "UPDATE pushgate_meta SET value = greatest(value, $1::bigint) WHERE key = '\(PostgresSchema.maxAcceptanceIDKey)'",
                params,
                deadline: deadline()
            )
            try connection.execute("COMMIT", deadline: deadline())
            committedMaxAcceptanceID = snapshot.maxAcceptanceID
        } catch {
            // Closing the connection rolls the transaction back, wherever the pipeline stood.
            disconnect()
            throw StoreError(.database, "store copy into PostgreSQL (\(target)) failed: \(error.message)")
        }
    }
}

/// The process's environment, read through libc (Foundation is not linked here).
private struct ProcessEnvironment {
    subscript(name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
