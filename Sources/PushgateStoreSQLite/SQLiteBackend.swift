import GRDB
import GRDBSQLite
import Logging
import PushgateStore
import Synchronization

/// The SQLite backend: one database file in WAL mode, every commit fsync'd
/// (`synchronous=FULL`), a group of batches per transaction with a savepoint per batch.
///
/// A failing command fails its batch only: each batch runs in its own savepoint inside the
/// group transaction (a lone single-statement command needs none: SQLite undoes a failing
/// statement by itself).
public final class SQLiteBackend: StoreBackend {
    /// Path of the database file.
    public let path: String

    private let database: DatabaseQueue
    private let checkpointer: Checkpointer
    private let lock: DirectoryLock
    private let logger: Logger
    /// The highest acceptance id committed so far (in a row, or in `meta` once its row is
    /// gone). Written by the writer after each commit; see `applyGroup` for why it is kept.
    private let committedMaxAcceptanceID = Atomic<UInt64>(0)

    // MARK: - Opening

    /// Opens (creating if needed) `<directory>/pushgate.sqlite` and brings its schema up to date.
    public init(directory: String, logger: Logger) throws(StoreError) {
        try Directory.create(directory)
        let path = Directory.join(directory, SQLiteSchema.databaseFileName)
        try Directory.checkWritable(
            directory,
            files: [path, path + "-wal", path + "-shm", Directory.join(directory, DirectoryLock.fileName)]
        )
        let lock = try DirectoryLock(directory: directory, purpose: "open the store")
        var opened = false
        defer { if !opened { lock.release() } }
        let exposed = Directory.keepPrivate(database: path, companions: [path + "-wal", path + "-shm"])
        if !exposed.isEmpty {
            logger.warning(
                "store files readable by other users could not be made owner-only (chmod 600 them, as their owner)",
                metadata: ["files": "\(exposed.joined(separator: ", "))"]
            )
        }
        self.path = path
        self.lock = lock
        self.logger = logger

        var configuration = Configuration()
        configuration.label = "pushgate.store"
        configuration.foreignKeysEnabled = true
        // Transactions are managed by hand (BEGIN/COMMIT around each group), and a failed
        // ROLLBACK after an I/O error must not crash the process: the next group retries it.
        configuration.allowsUnsafeTransactions = true
        configuration.prepareDatabase { db in
            // Not `configuration.journalMode = .wal`: GRDB would then set synchronous=NORMAL.
            let journalMode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            guard journalMode?.lowercased() == "wal" else {
                throw SQLiteCommands.Failure(
                    message: "could not switch to WAL journal mode (got \(journalMode ?? "nothing"))"
                )
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
            throw StoreError(
                .database,
                "cannot open the SQLite database \(path): \(Self.describe(error))\(Self.damageAdvice(error))"
            )
        }
        do {
            if let foreign = try database.read({ db in try SQLiteSchema.foreignTables(db) }) {
                try? database.close()
                throw StoreError(
                    .database,
                    """
                    \(path) is not a Pushgate store: it holds \(foreign) and no Pushgate schema; \
                    point --data-dir at a directory of its own
                    """
                )
            }
            let superseded = try database.read { db in try migrator.hasBeenSuperseded(db) }
            if superseded {
                let applied = (try? database.read { db in try migrator.appliedMigrations(db) }) ?? []
                try? database.close()
                throw StoreError(
                    .database,
                    """
                    the SQLite database \(path) was migrated by a newer Pushgate (schema \
                    \(applied.joined(separator: ", "))); this version knows \
                    \(migrator.migrations.joined(separator: ", ")) only
                    """
                )
            }
            try migrator.migrate(database)
        } catch let error as StoreError {
            throw error
        } catch {
            try? database.close()
            throw StoreError(
                .database,
                "cannot migrate the SQLite database \(path): \(Self.describe(error))\(Self.damageAdvice(error))"
            )
        }
        let highest: UInt64
        do {
            highest = try database.read { db in try SQLiteSnapshot.maxAcceptanceID(db) }
        } catch {
            try? database.close()
            throw StoreError(
                .database,
                "cannot read the SQLite database \(path): \(Self.describe(error))\(Self.damageAdvice(error))"
            )
        }
        do {
            checkpointer = try Checkpointer(path: path, logger: logger)
        } catch {
            try? database.close()
            throw StoreError(
                .database,
                "cannot open a second connection to \(path) for WAL checkpoints: \(Self.describe(error))"
            )
        }
        database.writeWithoutTransaction { db in checkpointer.install(on: db) }
        committedMaxAcceptanceID.store(highest, ordering: .relaxed)
        opened = true
        // SQLite fsyncs the directory when it creates the WAL, not the database file itself.
        Directory.sync(directory)
        logger.info(
            "store opened",
            metadata: [
                "path": "\(path)", "schema": "\(migrator.migrations.last ?? "")",
            ]
        )
    }

    /// Whether `directory` holds a SQLite store (its database file), without opening it.
    public static func holdsStore(directory: String) -> Bool {
        Directory.exists(Directory.join(directory, SQLiteSchema.databaseFileName))
    }

    // MARK: - StoreBackend

    public func load() throws(StoreError) -> StoreSnapshot {
        do {
            return try database.read { db in try SQLiteSnapshot.read(db) }
        } catch {
            throw StoreError(
                .database,
                "cannot read the SQLite database \(path): \(Self.describe(error))\(Self.damageAdvice(error))"
            )
        }
    }

    /// One transaction for the whole group, one savepoint per batch, one fsync.
    public func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
        // Runs on the caller's thread, the store's writer: GRDB's queue only serializes it with
        // the test hooks here, no hop to another thread per group.
        let outcome = database.writeWithoutTransaction { db in
            Result { () throws(StoreError) in try applyGroup(group, db) }
        }
        return try outcome.get()
    }

    public func close() throws(StoreError) {
        defer { lock.release() }
        database.writeWithoutTransaction { db in checkpointer.uninstall(from: db) }
        checkpointer.close()
        do {
            try database.close()
        } catch {
            throw StoreError(.database, "cannot close the SQLite database \(path): \(Self.describe(error))")
        }
    }

    /// Reads a PRAGMA on the store's own connection (per-connection settings included).
    @_spi(Testing)
    public func pragma(_ name: String) throws -> String? {
        try database.read { db in try String.fetchOne(db, sql: "PRAGMA \(name)") }
    }

    /// A commit that found the WAL past its threshold asked for a checkpoint only every so many
    /// frames; once the writer pauses, everything in it is copied, so that the next commit
    /// starts it over.
    public func writerIdle() {
        checkpointer.writerIdle()
    }

    /// The WAL's bound in frames, past which the writer's commit checkpoints itself.
    @_spi(Testing)
    public static var walBoundFrames: Int32 { Checkpointer.writerFrames }

    /// Frames in the WAL after the last commit.
    @_spi(Testing)
    public var walFrames: Int32 { checkpointer.framesAfterLastCommit }

    /// Returns once a checkpoint the writer asked for has run.
    @_spi(Testing)
    public func waitForCheckpoints() {
        checkpointer.waitForCheckpoints()
    }

    // MARK: - Writing

    private func applyGroup(_ group: [[StoreCommand]], _ db: Database) throws(StoreError) -> [Result<Void, StoreError>]
    {
        do {
            if db.isInsideTransaction {
                // Left over by a failed ROLLBACK after an I/O error.
                try db.rollback()
            }
            // A cached statement: GRDB's `beginTransaction` and `commit` build and prepare
            // their SQL again on every call.
            try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
        } catch {
            throw StoreError(Self.kind(of: error), "cannot begin a transaction in \(path): \(Self.describe(error))")
        }

        var results: [Result<Void, StoreError>] = []
        results.reserveCapacity(group.count)
        for commands in group {
            let result = applyBatch(commands, db)
            results.append(result)
            if !db.isInsideTransaction {
                // SQLite rolled the whole transaction back (disk full, I/O error, ...): the
                // batches applied so far are gone too.
                var error = StoreError(.unavailable, "the transaction was rolled back")
                if case .failure(let failure) = result { error = failure }
                throw StoreError(error.kind, "the transaction in \(path) was rolled back by SQLite: \(error.message)")
            }
        }

        // Acceptance ids are never reused, so a restart must learn the highest one committed
        // even when its row is gone. While that row exists the table says it; `meta` has to
        // record it only in a transaction that deletes it. Written on every commit, its page
        // would add a WAL frame to every commit, a large share of a small commit's frames, while
        // acks delete rows only a few hundred behind the newest.
        let highest = StoreCommand.highestAcceptanceID(
            committing: group.indices.lazy.filter { if case .success = results[$0] { true } else { false } }.map {
                group[$0]
            },
            above: committedMaxAcceptanceID.load(ordering: .relaxed)
        )
        do {
            if highest.deleted {
                try SQLiteCommands.raiseMaxAcceptanceID(to: highest.id, db)
            }
            try db.cachedStatement(sql: "COMMIT").execute()
        } catch {
            try? db.rollback()
            throw StoreError(Self.kind(of: error), "cannot commit to \(path): \(Self.describe(error))")
        }
        committedMaxAcceptanceID.store(highest.id, ordering: .relaxed)
        return results
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
            let kind: StoreError.Kind = error.code.map(Self.isStorageFault) == true ? .unavailable : .database
            return .failure(StoreError(kind, "batch of \(commands.count) command(s) refused: \(error.message)"))
        }
    }

    private func savepoint(_ sql: String, _ db: Database) throws(SQLiteCommands.Failure) {
        do {
            try db.cachedStatement(sql: sql).execute()
        } catch {
            throw SQLiteCommands.Failure(
                message: "\(sql): \(Self.describe(error))",
                code: (error as? DatabaseError)?.extendedResultCode.rawValue
            )
        }
    }

    // MARK: - Helpers

    /// Whether SQLite's result code (primary or extended) says the storage failed, whatever
    /// the statements were: a full disk (SQLITE_FULL, also what SQLite makes of ENOSPC), an
    /// I/O error, a file it can no longer open or write, memory, a lock it should own, a
    /// damaged file. Every other refusal is about the commands themselves (a constraint).
    static func isStorageFault(_ code: Int32) -> Bool {
        switch code & 0xFF {
        case SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_NOMEM, SQLITE_BUSY, SQLITE_LOCKED,
            SQLITE_PROTOCOL, SQLITE_CORRUPT, SQLITE_NOTADB:
            true
        default:
            false
        }
    }

    /// `.unavailable` for a storage fault, `.database` for the rest.
    static func kind(of error: any Error) -> StoreError.Kind {
        let code: Int32? =
            (error as? DatabaseError)?.extendedResultCode.rawValue ?? (error as? SQLiteCommands.Failure)?.code
        return code.map(isStorageFault) == true ? .unavailable : .database
    }

    /// What to do about a file SQLite finds damaged or not a database at all; empty otherwise.
    static func damageAdvice(_ error: any Error) -> String {
        guard let code = (error as? DatabaseError)?.resultCode, code == .SQLITE_CORRUPT || code == .SQLITE_NOTADB else {
            return ""
        }
        return """
            ; the file is damaged or not a Pushgate store: move it away (with its -wal file) and \
            install a backup with `pushgate restore`, or start from an empty data directory
            """
    }

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
}
