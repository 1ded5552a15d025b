import CLibPQ
import Logging
import PushgateStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The writer's side of the backend: the connection and what goes with it. Only ever used
/// under the backend's mutex (which the writer alone takes, but for start-up and `store copy`).
final class PostgresSession {
    let url: String
    let options: PostgresOptions
    let status: DatabaseConnectionStatus
    let logger: Logger

    private(set) var connection: PGConnection?
    var params = PGParams()
    /// Where the last connection went (no password), for messages once it is gone.
    var target = "PostgreSQL"
    /// Failed connection attempts in a row, and when the next may be made.
    private var failedAttempts = 0
    private var nextAttemptAt: UInt64 = 0
    private var lastError: String?
    /// The highest acceptance id committed (see the SQLite backend's `applyGroup`).
    var committedMaxAcceptanceID: UInt64 = 0
    /// A transaction whose outcome could not be learned: looked up on the next connection.
    var unresolved: (txid: Int64, batches: Int)?
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
    func lost(_ error: PGError, kind: DatabaseConnectionStatus.ErrorKind) -> StoreError {
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
}

/// The process's environment, read through libc (Foundation is not linked here).
private struct ProcessEnvironment {
    subscript(name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
