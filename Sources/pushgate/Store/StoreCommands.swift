import ArgumentParser
import Foundation
import Logging
import PushgateGateway
import PushgateStore
import PushgateStorePostgres
import PushgateStoreSQLite

/// `pushgate backup`: a consistent copy of a store, taken while its gateway runs.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy a gateway's store to a file, while the gateway runs.",
        discussion: """
            The copy holds everything committed when the backup began (every push answered 200 by \
            then), as one self-contained SQLite file checked with SQLite's integrity check. The \
            gateway keeps serving during the copy. Run it as the gateway's user (or root): the \
            data directory is private to that user.
            """
    )

    @OptionGroup var store: StoreDirectoryOption

    @Argument(
        help:
            "The backup file to write (replaced if it exists): any file this user may write but the store's own (pushgate.sqlite and its -wal, -shm, pushgate.lock); inside the data directory is fine, but copy it off the machine."
    )
    var output: String

    func run() throws {
        let started = ContinuousClock.now
        let dataDir = try store.dataDir(for: "backup")
        let summary = try reportingStoreErrors { () throws(StoreError) in
            try SQLiteBackup.backup(directory: dataDir, to: output)
        }
        print(
            "backed up \(dataDir) to \(describe(summary)) in \((ContinuousClock.now - started).formatted(.units(allowed: [.seconds, .milliseconds], width: .narrow)))"
        )
    }
}

/// `pushgate restore`: checks a backup and installs it as the store of a stopped gateway.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Check a backup file and install it as a gateway's store.",
        discussion: """
            The file must pass SQLite's integrity check and hold a Pushgate store this version can \
            open. No gateway may be using the data directory. A store already there is kept \
            beside it as pushgate.sqlite.replaced-<time> when --replace is given; without it the \
            restore is refused. Run as root, the installed file goes to the directory's owner; a \
            directory it has to create is root's, and the restore says how to give it to the \
            gateway's user.
            """
    )

    @OptionGroup var store: StoreDirectoryOption

    @Flag(help: "Set aside a store already in the data directory (renamed, not deleted) and install the backup.")
    var replace = false

    @Argument(help: "The backup file, as `pushgate backup` wrote it.")
    var file: String

    func run() throws {
        let dataDir = try store.dataDir(for: "restore")
        let createdByRoot = geteuid() == 0 && !FileManager.default.fileExists(atPath: dataDir)
        let (installed, replaced) = try reportingStoreErrors { () throws(StoreError) in
            try SQLiteBackup.restore(file: file, into: dataDir, replacing: replace, now: Self.timestamp)
        }
        print("restored \(file) as \(describe(installed))")
        if let replaced { print("the store it replaced is kept as \(replaced)") }
        if createdByRoot {
            // Which user the gateway runs as, only the operator knows; a gateway that is not root
            // cannot open a store in root's directory.
            print(
                "created \(dataDir) owned by root: for a gateway that runs as its own user, chown -R pushgate:pushgate \(dataDir)"
            )
        }
    }

    /// UTC, compact and sortable: 20261126T161747Z.
    private static func timestamp() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.string(from: Date())
    }
}

/// The data directory `serve` would use, from the same sources: `--data-dir`, then
/// `PUSHGATE_DATA_DIR`, then the configuration file's `dataDir` (`--config` or
/// `PUSHGATE_CONFIG`), then `./pushgate-data`.
struct StoreDirectoryOption: ParsableArguments {
    @Option(
        name: .customLong("data-dir"),
        help:
            "The gateway's data directory (serve's --data-dir; default: $PUSHGATE_DATA_DIR, else the configuration file's dataDir, else ./pushgate-data). Given, $PUSHGATE_CONFIG is not read."
    )
    var dataDirOption: String?

    @Option(
        name: .customLong("config"),
        help: "serve's configuration file, for its dataDir (default: $PUSHGATE_CONFIG)."
    )
    var config: String?

    @Option(
        name: .customLong("database-url"),
        help:
            "serve's --database-url: a store in PostgreSQL is backed up and restored with PostgreSQL's own tools, which this says how to use."
    )
    var databaseURL: String?

    /// The data directory, or the advice to use PostgreSQL's tools when the settings `serve`
    /// would read put the store in PostgreSQL (`--database-url` here, or its variable or key).
    func dataDir(for action: String) throws -> String {
        if databaseURL != nil || (try? resolved())?.databaseURL != nil {
            FileHandle.standardError.write(
                Data(
                    """
                    error: the store is in PostgreSQL (--database-url): \(action) it with PostgreSQL's own tools, which \
                    copy it consistently while the gateway runs: pg_dump --format=custom --file=pushgate.dump "$URL", \
                    then pg_restore --dbname="$URL2" --no-owner pushgate.dump into an empty database (or \
                    pg_basebackup and WAL archiving for point-in-time recovery); `pushgate backup` and `restore` \
                    handle the SQLite store only

                    """.utf8
                )
            )
            throw ExitCode.failure
        }
        return try dataDir()
    }

    private func resolved() throws -> GatewayConfiguration {
        var arguments: [String] = []
        if let config { arguments += ["--config", config] }
        var environment = ProcessInfo.processInfo.environment
        if dataDirOption != nil, config == nil { environment["PUSHGATE_CONFIG"] = nil }
        return try ResolvedSettings(arguments: arguments, environment: environment).checked()
    }

    /// Settings that cannot be read stop here, as they would stop `serve`: a directory guessed
    /// past a broken file could be the wrong store. A directory named with `--data-dir` needs no
    /// file, so `PUSHGATE_CONFIG` is then left unread: the image sets it for serve's file, which
    /// a pod mounts elsewhere and a `restore` container does not mount at all, so reading it
    /// would stop `kubectl exec ... backup --data-dir ...` at a missing file.
    func dataDir() throws -> String {
        var arguments: [String] = []
        if let config { arguments += ["--config", config] }
        if let dataDirOption { arguments += ["--data-dir", dataDirOption] }
        var environment = ProcessInfo.processInfo.environment
        if dataDirOption != nil, config == nil { environment["PUSHGATE_CONFIG"] = nil }
        do {
            return try ResolvedSettings(arguments: arguments, environment: environment).checked().dataDirectory
        } catch {
            throw ValidationError("\(error)")
        }
    }
}

/// `pushgate store`: moving a store between databases.
struct StoreToolCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Move a gateway's store between SQLite and PostgreSQL.",
        subcommands: [StoreCopyCommand.self]
    )
}

/// `pushgate store copy`: a stopped gateway's SQLite store into an empty PostgreSQL database.
struct StoreCopyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy a stopped gateway's SQLite store into an empty PostgreSQL database.",
        discussion: """
            Everything carries over: devices with their secrets and sequence numbers, registrations \
            and tombstones (unregistered tokens still answer 410), stored, held and unacknowledged \
            pushes, silent budgets, background-fetch state and the durable totals. The copy is one \
            transaction, read back and compared with the SQLite store before the counts are printed. \
            The database must hold no Pushgate data (an empty database gets the schema first); \
            otherwise nothing is changed and the exit status is 1. The gateway must be stopped (its \
            data directory is locked while it runs); start it again with --database-url.
            """
    )

    @Option(name: .customLong("from"), help: "The stopped gateway's data directory (serve's --data-dir).")
    var from: String

    @Option(
        name: .customLong("to"),
        help:
            "The PostgreSQL URL (libpq's forms, as serve's --database-url). Prefer --to-file: a URL with a password is visible in the process list."
    )
    var to: String?

    @Option(name: .customLong("to-file"), help: "A file holding the URL (its final newline is not part of it).")
    var toFile: String?

    func run() throws {
        let started = ContinuousClock.now
        let url = try targetURL()
        let logger = Logger(label: "pushgate.store.copy") { _ in SwiftLogNoOpLogHandler() }
        let snapshot = try reportingStoreErrors { () throws(StoreError) -> StoreSnapshot in
            if !SQLiteBackend.holdsStore(directory: from) {
                throw StoreError(.database, "\(from) holds no SQLite store (no pushgate.sqlite): nothing to copy")
            }
            let source = try SQLiteBackend(directory: from, logger: logger)
            defer { try? source.close() }
            return try source.load()
        }
        let (target, counts) = try reportingStoreErrors {
            () throws(StoreError) -> (String, [(table: String, rows: Int)]) in
            let backend = try PostgresBackend(url: url, logger: logger)
            defer { try? backend.close() }
            try backend.importSnapshot(snapshot)
            let copied = try backend.load()
            if copied != snapshot {
                throw StoreError(
                    .database,
                    "the copy in \(backend.target) reads back differently from the SQLite store (committed; drop and recreate the database before trying again)"
                )
            }
            return (backend.target, try backend.rowCounts())
        }
        let elapsed = (ContinuousClock.now - started).formatted(
            .units(allowed: [.seconds, .milliseconds], width: .narrow)
        )
        print("copied \(from) to PostgreSQL \(target) in \(elapsed), checked: it reads back as the SQLite store")
        let held = snapshot.notifications.filter { $0.seq == nil }.count
        for (table, rows) in counts {
            let detail =
                table == "notifications"
                ? " (\(held) held, \(rows - held) stored or unacknowledged)"
                : table == "registrations"
                    ? " (\(snapshot.registrations.filter { $0.unregisteredAt != nil }.count) unregistered)" : ""
            print("  \(table): \(rows)\(detail)")
        }
        print("  highest acceptance id: \(snapshot.maxAcceptanceID)")
    }

    private func targetURL() throws -> String {
        switch (to, toFile) {
        case (let url?, nil):
            return url
        case (nil, let file?):
            let url = (try? String(contentsOfFile: file, encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines
            )
            guard let url, !url.isEmpty else { throw ValidationError("--to-file: \(file) cannot be read or is empty") }
            return url
        default:
            throw ValidationError("give the PostgreSQL URL with --to or --to-file, once")
        }
    }
}

/// The store's message on stderr and exit status 1, without ArgumentParser's usage text.
private func reportingStoreErrors<T>(_ body: () throws(StoreError) -> T) throws -> T {
    do {
        return try body()
    } catch {
        FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
        throw ExitCode.failure
    }
}

private func describe(_ summary: StoreFileSummary) -> String {
    let megabytes = Double(summary.bytes) / 1_048_576
    return "\(summary.path) (\(String(format: "%.1f", megabytes)) MiB, schema \(summary.schema)): "
        + [
            counted(summary.devices, "device"), counted(summary.registrations, "registration"),
            counted(summary.notifications, "notification"),
        ].joined(separator: ", ")
}
