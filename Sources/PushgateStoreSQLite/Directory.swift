import PushgateStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `mkdir -p`, with POSIX calls (no Foundation in the store).
enum Directory {
    /// Whether anything exists at `path`.
    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Creates `path` and its missing parents (mode 0700: the store is the gateway's private
    /// state). An existing directory is left as it is.
    static func create(_ path: String) throws(StoreError) {
        guard !path.isEmpty else {
            throw StoreError(.database, "the store directory path is empty")
        }
        try create(path, for: path)
    }

    private static func create(_ path: String, for target: String) throws(StoreError) {
        var info = stat()
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw StoreError(
                    .database,
                    "cannot use \(target) as the store directory: \(path) exists and is not a directory"
                )
            }
            return
        }
        let parent = parentPath(of: path)
        if let parent {
            try create(parent, for: target)
        }
        defer { sync(parent ?? ".") }  // make the new entry durable
        if mkdir(path, 0o700) != 0 {
            let code = errno
            // Lost a race with another creator: fine if it is a directory now.
            if code == EEXIST, stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { return }
            let reason = String(cString: strerror(code))
            let detail = path == target ? "" : " (creating \(path))"
            throw StoreError(
                .database,
                "cannot create the store directory \(target)\(detail): \(reason) (errno \(code))"
            )
        }
    }

    /// Fails, naming the user and the way out, unless this process may create files in
    /// `directory` and read and write those of `files` that exist. Checked up front because
    /// SQLite says only "unable to open database file" (or opens read-only and fails the first
    /// commit), typically when a store made by root is run by the gateway's own user.
    static func checkWritable(_ directory: String, files: [String]) throws(StoreError) {
        let denied =
            access(directory, W_OK | X_OK) != 0
            ? directory
            : files.first { access($0, F_OK) == 0 && access($0, R_OK | W_OK) != 0 }
        guard let denied else { return }
        let user = "uid \(geteuid())"
        throw StoreError(
            .database,
            """
            cannot use the store directory \(directory): \(denied) is not writable by this process (\(user)); \
            give the directory and its files to the user the gateway runs as (chown -R; systemd's \
            StateDirectory= does this), or choose another data directory
            """
        )
    }

    /// Keeps the store's files owner-only (0600), whatever the umask and the directory's mode:
    /// they hold device secrets' hashes and every queued payload. Creates `database` (empty, a
    /// valid SQLite database) with that mode when it does not exist, since SQLite gives its
    /// -wal and -shm files the database's mode; narrows those of the files that exist (a store
    /// made under a umask of 022, or restored by another tool). Returns the files it could not
    /// narrow (another user's, say).
    static func keepPrivate(database: String, companions: [String]) -> [String] {
        let created = open(database, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if created >= 0 { _ = close(created) }
        var exposed: [String] = []
        for file in [database] + companions {
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & 0o077 != 0 else { continue }
            if chmod(file, info.st_mode & 0o700) != 0 { exposed.append(file) }
        }
        return exposed
    }

    /// fsyncs a directory so that entries created in it survive a power loss. Best effort.
    static func sync(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        _ = close(fd)
    }

    /// The path without its last component; nil for "/", "." and single-component relative paths.
    static func parentPath(of path: String) -> String? {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return nil }
        var parent = trimmed[..<slash]
        while parent.count > 1, parent.hasSuffix("/") { parent = parent.dropLast() }
        if parent.isEmpty { return trimmed.count > 1 ? "/" : nil }
        return String(parent)
    }

    /// `directory/name`, without a doubled slash.
    static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
