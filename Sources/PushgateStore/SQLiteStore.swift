import PushgateModel
import Dispatch
import struct Foundation.Data
import GRDB
import Logging
import Synchronization

/// The SQLite implementation of `NotificationStore`: one database file in WAL mode, every
/// commit fsync'd (`synchronous=FULL`), concurrent commits grouped into one transaction.
///
/// Threads:
/// - callers of `commit` only take a short lock to append their batch to the pending queue;
/// - the writer is GRDB's serial database queue: a drain loop that takes what is pending (up to
///   `maxGroupCommands` commands),
///   applies it in one transaction (a savepoint per batch), commits (one fsync), and repeats
///   while more is pending;
/// - completions of committed batches run on the writer, in commit order, right after their
///   fsync. They must be quick (resume a continuation, hop to an event loop) and must not
///   wait for the store; refusals (`.overloaded`, `.closed`) arrive on a separate queue, never
///   on the caller's stack.
///
/// A failing command fails its batch only: each batch runs in its own savepoint inside the
/// group transaction (a lone single-statement command needs none: SQLite undoes a failing
/// statement by itself). Commands that find nothing to change (unregister of an unknown token,
/// assignSeq or remove of an unknown acceptance id, ack of an unknown device) succeed as no-ops.
public final class SQLiteStore: NotificationStore {
    /// Path of the database file.
    public let path: String
    /// Batches are refused with `.overloaded` once this many commands wait for the writer.
    public let maxPendingCommands: Int

    private let database: DatabaseQueue
    private let logger: Logger
    private let completionQueue = DispatchQueue(label: "pushgate.store.completions")
    private let state = Locked(WriterState())

    private let transactionsCounter = Atomic<UInt64>(0)
    private let commandsCounter = Atomic<UInt64>(0)
    private let batchesCounter = Atomic<UInt64>(0)
    private let failedBatchesCounter = Atomic<UInt64>(0)
    private let overloadedBatchesCounter = Atomic<UInt64>(0)
    private let lastTransactionNanos = Atomic<UInt64>(0)
    private let maxTransactionNanos = Atomic<UInt64>(0)
    private let totalTransactionNanos = Atomic<UInt64>(0)

    // MARK: - Opening

    /// Opens (creating if needed) `<directory>/pushgate.sqlite` and brings its schema up to date.
    public init(directory: String, maxPendingCommands: Int = 100_000, logger: Logger) throws(StoreError) {
        precondition(maxPendingCommands > 0, "maxPendingCommands must be positive")
        try Directory.create(directory)
        let path = Directory.join(directory, SQLiteSchema.databaseFileName)
        try Directory.checkWritable(directory, files: [path, path + "-wal"])
        self.path = path
        self.maxPendingCommands = maxPendingCommands
        self.logger = logger

        var configuration = Configuration()
        configuration.label = "pushgate.store"
        configuration.foreignKeysEnabled = true
        // Transactions are managed by hand (BEGIN/COMMIT around each group), and a failed
        // ROLLBACK after an I/O error must not crash the process: the next group retries it.
        configuration.allowsUnsafeTransactions = true
        configuration.prepareDatabase { db in
            // One process owns the database: a second gateway on the same directory fails at
            // start ("database is locked") instead of failing every commit with SQLITE_BUSY. In
            // WAL mode this also keeps the WAL index in heap memory (no -shm file).
            try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
            // Not `configuration.journalMode = .wal`: GRDB would then set synchronous=NORMAL.
            let journalMode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            guard journalMode?.lowercased() == "wal" else {
                throw SQLiteCommands.Failure(message: "could not switch to WAL journal mode (got \(journalMode ?? "nothing"))")
            }
            // Every commit is fsync'd: a 200 must survive a crash or power loss.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Savepoint journals stay in memory.
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
        }

        let migrator = SQLiteSchema.migrator
        do {
            database = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            var message = "cannot open the SQLite database \(path): \(Self.describe(error))"
            if let error = error as? DatabaseError, error.resultCode == .SQLITE_BUSY {
                message += " (is another Pushgate using this directory?)"
            }
            throw StoreError(.database, message)
        }
        do {
            let superseded = try database.read { db in try migrator.hasBeenSuperseded(db) }
            if superseded {
                let applied = (try? database.read { db in try migrator.appliedMigrations(db) }) ?? []
                try? database.close()
                throw StoreError(.database, """
                    the SQLite database \(path) was migrated by a newer Pushgate (schema \
                    \(applied.joined(separator: ", "))); this version knows \
                    \(migrator.migrations.joined(separator: ", ")) only
                    """)
            }
            try migrator.migrate(database)
        } catch let error as StoreError {
            throw error
        } catch {
            try? database.close()
            throw StoreError(.database, "cannot migrate the SQLite database \(path): \(Self.describe(error))")
        }
        // SQLite fsyncs the directory when it creates the WAL, not the database file itself.
        Directory.sync(directory)
        logger.info("store opened", metadata: [
            "path": "\(path)", "schema": "\(migrator.migrations.last ?? "")",
        ])
    }

    // MARK: - NotificationStore

    public func commit(_ commands: [StoreCommand], completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let max = maxPendingCommands
        let outcome: SubmitOutcome = state.withLock { s in
            if s.closing { return .closed }
            if commands.count > max - s.pendingCommands { return .overloaded }
            s.pending.append(Batch(commands: commands, completion: completion))
            s.pendingCommands += commands.count
            if s.writerScheduled || s.paused { return .queued }
            s.writerScheduled = true
            return .startWriter
        }
        switch outcome {
        case .queued:
            break
        case .startWriter:
            startWriter()
        case .overloaded:
            overloadedBatchesCounter.wrappingAdd(1, ordering: .relaxed)
            let error = StoreError(.overloaded, "the store is overloaded: \(commands.count) more command(s) would exceed the limit of \(max) waiting commands")
            completionQueue.async { completion(.failure(error)) }
        case .closed:
            completionQueue.async { completion(.failure(StoreError(.closed, "the store is closed"))) }
        }
    }

    /// Reads everything. Meant for start-up: it waits for the writer to be idle.
    /// Devices are ordered by id, registrations by token, notifications by acceptance id.
    public func load() throws(StoreError) -> StoreSnapshot {
        if state.withLock({ $0.closing }) {
            throw StoreError(.closed, "the store is closed")
        }
        do {
            return try database.read { db in try Self.readSnapshot(db) }
        } catch {
            let message = "cannot read the SQLite database \(path): \(Self.describe(error))"
            logger.error("store load failed", metadata: ["error": "\(message)"])
            throw StoreError(.database, message)
        }
    }

    public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let action: CloseAction = state.withLock { s in
                if s.drained { return .resumeNow }
                s.closing = true
                s.paused = false
                s.closeWaiters.append(continuation)  // resumed by the writer once drained
                if s.writerScheduled { return .wait }
                s.writerScheduled = true
                return .startWriter
            }
            switch action {
            case .resumeNow: continuation.resume()
            case .wait: break
            case .startWriter: startWriter()
            }
        }
        // Everything submitted is committed and completed-to-be; the writer is idle for good.
        do {
            try database.close()
        } catch {
            logger.error("store close failed", metadata: ["path": "\(path)", "error": "\(Self.describe(error))"])
        }
        // Refusals already handed to the completion queue run before close returns.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            completionQueue.async { continuation.resume() }
        }
    }

    // MARK: - Counters (for the operator metrics)

    /// Transactions committed (one fsync each).
    public var transactionsCommitted: UInt64 { transactionsCounter.load(ordering: .relaxed) }
    /// Commands in committed batches.
    public var commandsCommitted: UInt64 { commandsCounter.load(ordering: .relaxed) }
    /// Batches committed successfully.
    public var batchesCommitted: UInt64 { batchesCounter.load(ordering: .relaxed) }
    /// Batches that failed (a command was refused, or their transaction failed).
    public var batchesFailed: UInt64 { failedBatchesCounter.load(ordering: .relaxed) }
    /// Batches refused with `.overloaded`.
    public var batchesRejectedOverloaded: UInt64 { overloadedBatchesCounter.load(ordering: .relaxed) }
    /// Duration of the last committed transaction (BEGIN to fsync'd COMMIT), in nanoseconds.
    public var lastTransactionNanoseconds: UInt64 { lastTransactionNanos.load(ordering: .relaxed) }
    /// Longest committed transaction so far, in nanoseconds.
    public var maxTransactionNanoseconds: UInt64 { maxTransactionNanos.load(ordering: .relaxed) }
    /// Sum of the durations of all committed transactions, in nanoseconds (for a mean or a rate).
    public var totalTransactionNanoseconds: UInt64 { totalTransactionNanos.load(ordering: .relaxed) }
    /// Commands waiting for the writer (not yet in a transaction).
    public var pendingCommands: Int { state.withLock { $0.pendingCommands } }

    // MARK: - Test hooks

    /// Stops the writer from starting a new transaction, and waits until the one in progress
    /// (if any) has committed. Commits keep being accepted (and grouped) until `resumeWriter`.
    @_spi(Testing)
    public func pauseWriter() {
        state.withLock { $0.paused = true }
        // Barrier: the database queue is serial, so this runs after the current drain loop.
        database.writeWithoutTransaction { _ in }
    }

    /// Lets the writer run again; what accumulated goes into one transaction.
    @_spi(Testing)
    public func resumeWriter() {
        let start: Bool = state.withLock { s in
            s.paused = false
            if s.pending.isEmpty || s.writerScheduled { return false }
            s.writerScheduled = true
            return true
        }
        if start { startWriter() }
    }

    /// Reads a PRAGMA on the store's own connection (per-connection settings included).
    @_spi(Testing)
    public func pragma(_ name: String) throws -> String? {
        try database.read { db in try String.fetchOne(db, sql: "PRAGMA \(name)") }
    }

    // MARK: - Writer

    private struct Batch: Sendable {
        var commands: [StoreCommand]
        var completion: @Sendable (Result<Void, StoreError>) -> Void
    }

    /// Commands in one transaction at most (a single larger batch still goes in whole).
    static let maxGroupCommands = 4096

    private struct WriterState {
        var pending: [Batch] = []
        var pendingCommands = 0
        /// A drain loop is queued or running on the database queue.
        var writerScheduled = false
        var paused = false
        /// close() was called: new commits fail with `.closed`.
        var closing = false
        /// The writer has drained everything after close(): the database is idle for good.
        var drained = false
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private enum SubmitOutcome {
        case queued, startWriter, overloaded, closed
    }

    private enum CloseAction {
        case resumeNow, wait, startWriter
    }

    private enum WriterStep {
        case write, idle, finish([CheckedContinuation<Void, Never>])
    }

    private func startWriter() {
        database.asyncWriteWithoutTransaction { [self] db in
            drain(db)
        }
    }

    /// The writer's loop: one group per iteration, until nothing is pending.
    private func drain(_ db: Database) {
        var group: [Batch] = []
        while true {
            let step: WriterStep = state.withLock { s in
                if !s.pending.isEmpty, !s.paused {
                    // A backlog is cut into groups of about maxGroupCommands, so that the first
                    // batch of a burst waits for one bounded transaction, not for the whole burst.
                    var taken = 0
                    var count = 0
                    while count < s.pending.count, taken < Self.maxGroupCommands {
                        taken += s.pending[count].commands.count
                        count += 1
                    }
                    if count == s.pending.count {
                        swap(&group, &s.pending)
                    } else {
                        group = Array(s.pending[..<count])
                        s.pending.removeFirst(count)
                    }
                    s.pendingCommands -= taken
                    return .write
                }
                s.writerScheduled = false
                if s.closing, s.pending.isEmpty {
                    s.drained = true
                    let waiters = s.closeWaiters
                    s.closeWaiters = []
                    return .finish(waiters)
                }
                return .idle
            }
            switch step {
            case .write:
                writeGroup(group, db)
                group = []
            case .idle:
                return
            case .finish(let waiters):
                for waiter in waiters { waiter.resume() }
                return
            }
        }
    }

    /// One transaction for the whole group, one savepoint per batch, one fsync; then hands the
    /// completions to the completion queue.
    private func writeGroup(_ group: [Batch], _ db: Database) {
        let start = ContinuousClock.now
        var results: [Result<Void, StoreError>] = []
        results.reserveCapacity(group.count)

        do {
            if db.isInsideTransaction {
                // Left over by a failed ROLLBACK after an I/O error.
                try db.rollback()
            }
            try db.beginTransaction(.immediate)
        } catch {
            failGroup(group, "cannot begin a transaction in \(path): \(Self.describe(error))")
            return
        }

        var maxAcceptanceID: UInt64 = 0
        var commands = 0
        for batch in group {
            let result = applyBatch(batch.commands, db)
            if case .success = result {
                commands += batch.commands.count
                for command in batch.commands {
                    if let id = SQLiteCommands.acceptanceID(of: command), id > maxAcceptanceID {
                        maxAcceptanceID = id
                    }
                }
            }
            results.append(result)
            if !db.isInsideTransaction {
                // SQLite rolled the whole transaction back (disk full, I/O error, ...): the
                // batches applied so far are gone too.
                let reason: String
                if case .failure(let error) = result { reason = error.message } else { reason = "the transaction was rolled back" }
                failGroup(group, "the transaction in \(path) was rolled back by SQLite: \(reason)")
                return
            }
        }

        do {
            if maxAcceptanceID > 0 {
                try SQLiteCommands.raiseMaxAcceptanceID(to: maxAcceptanceID, db)
            }
            try db.commit()
        } catch {
            try? db.rollback()
            failGroup(group, "cannot commit to \(path): \(Self.describe(error))")
            return
        }

        let elapsed = Self.nanoseconds(ContinuousClock.now - start)
        let failed = results.count(where: { if case .failure = $0 { true } else { false } })
        transactionsCounter.wrappingAdd(1, ordering: .relaxed)
        commandsCounter.wrappingAdd(UInt64(commands), ordering: .relaxed)
        batchesCounter.wrappingAdd(UInt64(group.count - failed), ordering: .relaxed)
        if failed > 0 { failedBatchesCounter.wrappingAdd(UInt64(failed), ordering: .relaxed) }
        lastTransactionNanos.store(elapsed, ordering: .relaxed)
        totalTransactionNanos.wrappingAdd(elapsed, ordering: .relaxed)
        if elapsed > maxTransactionNanos.load(ordering: .relaxed) {
            maxTransactionNanos.store(elapsed, ordering: .relaxed)  // only the writer stores it
        }
        logger.trace("store transaction committed", metadata: [
            "batches": "\(group.count)", "failed": "\(failed)", "commands": "\(commands)",
            "microseconds": "\(elapsed / 1000)",
        ])

        // Completions run right here, on the writer, before it takes the next group: they are
        // quick (a hop to an event loop), and a handoff to another thread would add a wake-up
        // to every commit's latency on a busy machine.
        for (batch, result) in zip(group, results) {
            batch.completion(result)
        }
    }

    /// Applies one batch atomically: either all its commands or none.
    private func applyBatch(_ commands: [StoreCommand], _ db: Database) -> Result<Void, StoreError> {
        if commands.isEmpty { return .success(()) }
        do throws(SQLiteCommands.Failure) {
            if commands.count == 1, SQLiteCommands.isSingleStatement(commands[0]) {
                try SQLiteCommands.apply(commands[0], db)
                return .success(())
            }
            try savepoint("SAVEPOINT batch", db)
            do throws(SQLiteCommands.Failure) {
                for command in commands {
                    try SQLiteCommands.apply(command, db)
                }
                try savepoint("RELEASE batch", db)
                return .success(())
            } catch {
                if db.isInsideTransaction {
                    try? savepoint("ROLLBACK TO batch", db)
                    try? savepoint("RELEASE batch", db)
                }
                throw error
            }
        } catch {
            let message = "batch of \(commands.count) command(s) refused: \(error.message)"
            logger.error("store batch failed", metadata: ["error": "\(message)"])
            return .failure(StoreError(.database, message))
        }
    }

    private func savepoint(_ sql: String, _ db: Database) throws(SQLiteCommands.Failure) {
        do {
            try db.cachedStatement(sql: sql).execute()
        } catch {
            throw SQLiteCommands.Failure(message: "\(sql): \(Self.describe(error))")
        }
    }

    private func failGroup(_ group: [Batch], _ message: String) {
        logger.error("store transaction failed", metadata: ["batches": "\(group.count)", "error": "\(message)"])
        failedBatchesCounter.wrappingAdd(UInt64(group.count), ordering: .relaxed)
        let error = StoreError(.database, message)
        for batch in group { batch.completion(.failure(error)) }
    }

    // MARK: - Reading

    private static func readSnapshot(_ db: Database) throws -> StoreSnapshot {
        var registrations: [RegistrationRecord] = []
        let registrationRows = try Row.fetchCursor(db, sql: """
            SELECT token, device_id, topic, created_at, unregistered_at, app_state FROM registrations ORDER BY token
            """)
        while let row = try registrationRows.next() {
            registrations.append(RegistrationRecord(
                token: row[0], deviceID: row[1], topic: row[2], createdAt: row[3], unregisteredAt: row[4], appState: row[5]
            ))
        }

        var buckets: [BucketRecord] = []
        let bucketRows = try Row.fetchCursor(db, sql: "SELECT key, level, at FROM buckets ORDER BY key")
        while let row = try bucketRows.next() {
            buckets.append(BucketRecord(key: row[0], level: UInt32(clamping: row[1] as Int64), at: row[2]))
        }

        var notifications: [AcceptedPush] = []
        var maxSeqByDevice: [String: UInt64] = [:]
        var maxAcceptanceID: UInt64 = 0
        let notificationRows = try Row.fetchCursor(db, sql: """
            SELECT acceptance_id, device_id, token, topic, apns_id, push_type, priority, collapse_id,
                   payload, accepted_at, expires_at, seq
            FROM notifications ORDER BY acceptance_id
            """)
        while let row = try notificationRows.next() {
            let payload: Data = row[8]
            let seq: Int64? = row[11]
            let acceptanceID = UInt64(row[0] as Int64)
            let typeName: String = row[5]
            let priorityValue: Int64 = row[6]
            // Only the gateway writes these columns, from validated pushes.
            guard let pushType = PushType(rawValue: typeName),
                  let priority = UInt8(exactly: priorityValue).flatMap(PushPriority.init(rawValue:))
            else {
                throw SQLiteCommands.Failure(
                    message: "notification \(acceptanceID) has push type \"\(typeName)\" and priority \(priorityValue); the database was not written by Pushgate or is damaged"
                )
            }
            let push = Push(
                deviceToken: row[2], apnsID: row[4], topic: row[3], pushType: pushType, priority: priority,
                collapseID: row[7], payload: [UInt8](payload)
            )
            let record = AcceptedPush(
                acceptanceID: acceptanceID, deviceID: row[1], push: push,
                acceptedAt: row[9], expiresAt: row[10], seq: seq.map { UInt64($0) }
            )
            maxAcceptanceID = max(maxAcceptanceID, record.acceptanceID)
            if let seq = record.seq, seq > maxSeqByDevice[record.deviceID, default: 0] {
                maxSeqByDevice[record.deviceID] = seq
            }
            notifications.append(record)
        }

        // A device's last seq also covers the seqs still stored, taken from the rows read above
        // (the table has no index by device to ask per device): rows older than reservations,
        // and a row committed without a reservation of its own because the batch that carried
        // one failed (the next seq or ack reserves again, but a restart may come first).
        var devices: [DeviceRecord] = []
        let deviceRows = try Row.fetchCursor(db, sql: """
            SELECT id, secret_hash, created_at, max(last_seq, acked_seq) FROM devices ORDER BY id
            """)
        while let row = try deviceRows.next() {
            let secret: Data = row[1]
            let id: String = row[0]
            devices.append(DeviceRecord(
                id: id, secretHash: [UInt8](secret), createdAt: row[2],
                lastSeq: max(UInt64(row[3] as Int64), maxSeqByDevice[id] ?? 0)
            ))
        }

        let recorded = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?",
                                          arguments: [SQLiteSchema.maxAcceptanceIDKey]) ?? 0
        maxAcceptanceID = max(maxAcceptanceID, UInt64(max(recorded, 0)))
        return StoreSnapshot(devices: devices, registrations: registrations, notifications: notifications,
                             maxAcceptanceID: maxAcceptanceID, buckets: buckets)
    }

    // MARK: - Helpers

    /// SQLite's own words, without the SQL text (which may be long).
    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "SQLite error \(error.extendedResultCode.rawValue): \(error.message ?? "no message")"
        }
        if let failure = error as? SQLiteCommands.Failure {
            return failure.message
        }
        return "\(error)"
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
    }
}
