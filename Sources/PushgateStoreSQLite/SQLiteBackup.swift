import GRDB
import PushgateStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a store file holds, as `pushgate backup` and `pushgate restore` report it.
public struct StoreFileSummary: Sendable, Equatable {
    public var path: String
    public var bytes: Int64
    /// The last schema migration applied ("v7").
    public var schema: String
    public var devices: Int
    /// Active registrations (not unregistered).
    public var registrations: Int
    /// Queued and held notifications.
    public var notifications: Int
}

/// Backup and restore of the SQLite store, with SQLite's online backup API.
///
/// A backup reads the database from another process while the gateway writes it: WAL mode lets a
/// reader see one committed state while commits go on, so the copy holds exactly what was
/// committed when it began (every push answered 200 by then) and never blocks the gateway's
/// writer. The copy is a single self-contained file (rollback journal, no `-wal`), checked with
/// `PRAGMA integrity_check`, fsync'd, and renamed into place, so a crash leaves either no backup
/// or a whole one.
public enum SQLiteBackup {
    /// Copies the store in `directory` to `destination` (replacing a file there).
    public static func backup(directory: String, to destination: String) throws(StoreError) -> StoreFileSummary {
        let source = Directory.join(directory, SQLiteSchema.databaseFileName)
        guard access(source, F_OK) == 0 else {
            let code = errno
            guard code == ENOENT else {
                throw StoreError(
                    .database,
                    "cannot back up \(source): \(String(cString: strerror(code))) (run the backup as the gateway's user, or as root)"
                )
            }
            throw StoreError(.database, "no store to back up in \(directory): \(source) does not exist")
        }
        try checkDestination(destination, storeDirectory: directory)
        let partial = destination + ".partial"
        defer { unlink(partial) }
        try copy(source, to: partial) { "cannot back up \(source) to \(destination): \($0)" }
        try durablyRename(partial, to: destination)
        return try inspect(file: destination)
    }

    /// Checks that `file` is a whole Pushgate store this version can open: a SQLite database
    /// that passes `PRAGMA integrity_check`, with Pushgate's schema, not from a newer Pushgate.
    public static func inspect(file: String) throws(StoreError) -> StoreFileSummary {
        var info = stat()
        guard stat(file, &info) == 0 else {
            let code = errno
            throw StoreError(.database, "cannot read \(file): \(String(cString: strerror(code))) (errno \(code))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw StoreError(.database, "\(file) is not a regular file")
        }
        do {
            let database = try DatabaseQueue(path: file, configuration: readOnly)
            defer { try? database.close() }
            // Its own refusals pass through; SQLite's errors are worded by the catch below.
            return try database.read { db in
                let problems = try String.fetchAll(db, sql: "PRAGMA integrity_check(10)")
                guard problems == ["ok"] else {
                    throw StoreError(
                        .database,
                        "\(file) is damaged (SQLite's integrity check: \(problems.joined(separator: "; ")))"
                    )
                }
                if let foreign = try SQLiteSchema.foreignTables(db) {
                    throw StoreError(
                        .database,
                        "\(file) is not a Pushgate store: it holds \(foreign) and no Pushgate schema"
                    )
                }
                let migrator = SQLiteSchema.migrator
                let applied = try migrator.appliedIdentifiers(db)
                guard applied.contains("v1") else {
                    throw StoreError(.database, "\(file) is not a Pushgate store: it is an empty database")
                }
                if try migrator.hasBeenSuperseded(db) {
                    throw StoreError(
                        .database,
                        """
                        \(file) comes from a newer Pushgate (schema \(applied.sorted().joined(separator: ", "))); \
                        this version knows \(migrator.migrations.joined(separator: ", ")) only
                        """
                    )
                }
                return StoreFileSummary(
                    path: file,
                    bytes: Int64(info.st_size),
                    schema: migrator.migrations.last { applied.contains($0) } ?? "",
                    devices: try Int.fetchOne(db, sql: "SELECT count(*) FROM devices") ?? 0,
                    registrations: try Int.fetchOne(
                        db,
                        sql: "SELECT count(*) FROM registrations WHERE unregistered_at IS NULL"
                    ) ?? 0,
                    notifications: try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications") ?? 0
                )
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw unreadable(file, error)
        }
    }

    private static func unreadable(_ file: String, _ error: any Error) -> StoreError {
        let damaged =
            (error as? DatabaseError).map { $0.resultCode == .SQLITE_CORRUPT || $0.resultCode == .SQLITE_NOTADB }
            ?? false
        return StoreError(
            .database,
            damaged
                ? "\(file) is damaged or is not a SQLite database (\(SQLiteBackend.describe(error)))"
                : "cannot read \(file): \(SQLiteBackend.describe(error))"
        )
    }

    /// Checks `file` (`inspect`) and installs it as the store of `directory`, which no gateway
    /// may be using. A store already there is kept, renamed `pushgate.sqlite.replaced-<time>`
    /// (with its `-wal`), when `replacing`; otherwise the restore is refused. Returns what was
    /// installed and the name the replaced store was given.
    public static func restore(
        file: String,
        into directory: String,
        replacing: Bool,
        now: () -> String
    ) throws(StoreError) -> (installed: StoreFileSummary, replaced: String?) {
        let checked = try inspect(file: file)
        try Directory.create(directory)
        let lock = try DirectoryLock(directory: directory, purpose: "restore into \(directory)")
        defer { lock.release() }

        let target = Directory.join(directory, SQLiteSchema.databaseFileName)
        var replaced: String?
        if access(target, F_OK) == 0 {
            guard replacing else {
                throw StoreError(
                    .database,
                    """
                    \(directory) already holds a store (\(target)); pass --replace to keep it as \
                    \(SQLiteSchema.databaseFileName).replaced-<time> and install the backup in its place
                    """
                )
            }
            let aside = target + ".replaced-" + now()
            // The -wal goes with its database: together they are the replaced store, whole.
            try move(target, to: aside)
            if access(target + "-wal", F_OK) == 0 { try move(target + "-wal", to: aside + "-wal") }
            unlink(target + "-shm")
            replaced = aside
        }

        let partial = target + ".restoring"
        defer { unlink(partial) }
        try copy(file, to: partial) { "cannot copy \(file) into \(directory): \($0)" }
        giveToDirectoryOwner(partial, directory: directory)
        try durablyRename(partial, to: target)
        var installed = checked
        installed.path = target
        return (installed, replaced)
    }

    // MARK: - Helpers

    /// The store's own files, by name in its directory: a backup renamed over one of them
    /// replaced the running gateway's database (or its WAL) under it, and pushes it had
    /// answered 200 were gone after its restart.
    private static let storeFileNames: Set<String> = {
        let database = SQLiteSchema.databaseFileName
        return [database, database + "-wal", database + "-shm", database + "-journal", DirectoryLock.fileName]
    }()

    private static func checkDestination(_ destination: String, storeDirectory: String) throws(StoreError) {
        var info = stat()
        if stat(destination, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw StoreError(
                .database,
                "\(destination) is a directory; name the backup file to write, e.g. \(Directory.join(destination, "pushgate-backup.sqlite"))"
            )
        }
        let name =
            destination.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? destination
        guard storeFileNames.contains(name) else { return }
        let parent = destination.contains("/") ? String(destination[..<destination.lastIndex(of: "/")!]) : "."
        var parentInfo = stat()
        var directoryInfo = stat()
        // The same directory by identity (device and inode), whatever path names it.
        guard stat(parent.isEmpty ? "/" : parent, &parentInfo) == 0, stat(storeDirectory, &directoryInfo) == 0,
            parentInfo.st_dev == directoryInfo.st_dev, parentInfo.st_ino == directoryInfo.st_ino
        else { return }
        throw StoreError(
            .database,
            "\(destination) is the gateway's own \(name) in \(storeDirectory): name another file, such as \(Directory.join(storeDirectory, "pushgate-backup.sqlite")), and copy it off this machine (a backup on the store's disk is lost with it)"
        )
    }

    private static var readOnly: Configuration {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "pushgate.backup"
        // A reader waits out the instants in which the gateway's writer holds the WAL index.
        configuration.busyMode = .timeout(10)
        return configuration
    }

    /// Copies the database at `source` (its WAL included) into a new file at `partial`, readable
    /// by its owner only, self-contained (no `-wal`) and checked. `failure` words an error.
    private static func copy(_ source: String, to partial: String, failure: (String) -> String) throws(StoreError) {
        try createPrivate(partial)
        do {
            let reader = try DatabaseQueue(path: source, configuration: readOnly)
            let copy = try DatabaseQueue(path: partial)
            try reader.backup(to: copy)
            try reader.close()
            try seal(copy)
            try copy.close()
        } catch {
            throw StoreError(.database, failure(SQLiteBackend.describe(error) + SQLiteBackend.damageAdvice(error)))
        }
    }

    /// Makes a fresh copy self-contained and checks it.
    private static func seal(_ copy: DatabaseQueue) throws {
        try copy.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE")
            let problems = try String.fetchAll(db, sql: "PRAGMA integrity_check(10)")
            guard problems == ["ok"] else {
                throw DatabaseError(
                    resultCode: .SQLITE_CORRUPT,
                    message: "the copy fails SQLite's integrity check: \(problems.joined(separator: "; "))"
                )
            }
        }
    }

    /// Creates `path` empty, readable by its owner only, for SQLite to write into: a store holds
    /// device secrets' hashes and every queued payload.
    private static func createPrivate(_ path: String) throws(StoreError) {
        unlink(path)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let code = errno
            throw StoreError(.database, "cannot create \(path): \(String(cString: strerror(code))) (errno \(code))")
        }
        _ = close(descriptor)
    }

    /// fsyncs `path`, renames it to `destination` and fsyncs the directory holding it.
    private static func durablyRename(_ path: String, to destination: String) throws(StoreError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0, fsync(descriptor) == 0 else {
            let code = errno
            if descriptor >= 0 { _ = close(descriptor) }
            throw StoreError(.unavailable, "cannot sync \(path): \(String(cString: strerror(code))) (errno \(code))")
        }
        _ = close(descriptor)
        try move(path, to: destination)
        Directory.sync(Directory.parentPath(of: destination) ?? ".")
    }

    private static func move(_ path: String, to destination: String) throws(StoreError) {
        guard rename(path, destination) == 0 else {
            let code = errno
            throw StoreError(
                .database,
                "cannot rename \(path) to \(destination): \(String(cString: strerror(code))) (errno \(code))"
            )
        }
    }

    /// Run as root (an operator restoring into the gateway user's directory), the installed file
    /// would be root's and the gateway could not open it: it goes to the directory's owner.
    private static func giveToDirectoryOwner(_ path: String, directory: String) {
        var owner = stat()
        guard geteuid() == 0, stat(directory, &owner) == 0 else { return }
        _ = chown(path, owner.st_uid, owner.st_gid)
    }
}
