import Foundation
import NIOConcurrencyHelpers

/// A throwaway PostgreSQL server, started as a plain process for tests: `initdb` into a fresh
/// temporary directory (owned by `postgres` when the tests run as root, since initdb refuses
/// root; by the current user otherwise), `fsync` and `synchronous_commit` on, a free port on
/// 127.0.0.1 and a socket directory of its own, started with `pg_ctl -w`. `shared` is one per
/// test process, stopped when it exits; tests each take a fresh database (`createDatabase`).
/// Tests about the server's faults start one of their own and stop and start it.
///
/// Missing server binaries fail the test, with what to install: a store that runs on
/// PostgreSQL is not tested without one.
public final class PostgresServer: Sendable {
    /// Where the server binaries are: `PUSHGATE_POSTGRES_BIN`, else Debian's postgresql-15.
    public static let binaries =
        ProcessInfo.processInfo.environment["PUSHGATE_POSTGRES_BIN"] ?? "/usr/lib/postgresql/15/bin"

    public let port: Int
    public let socketDirectory: String
    /// The superuser, who owns every test database.
    public let user = "postgres"
    public let password: String
    private let directory: String
    private var dataDirectory: String { directory + "/data" }
    /// The OS user the server runs as (nil: the current one).
    private let osUser: String?
    private let databases = NIOLockedValueBox(0)

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private static let sharedServer = NIOLockedValueBox<Result<PostgresServer, Failure>?>(nil)

    /// The test process's server, started by the first test that asks.
    public static func shared() throws -> PostgresServer {
        try sharedServer.withLockedValue { server in
            if let server { return try server.get() }
            let started = Result { () throws(Failure) in try PostgresServer() }
            server = started
            if case .success = started {
                atexit {
                    if case .success(let server) = PostgresServer.sharedServer.withLockedValue({ $0 }) {
                        server.stop(mode: "immediate")
                        server.removeFiles()
                    }
                }
            }
            return try started.get()
        }
    }

    /// Makes and starts a server of its own (`stop` and `start` it; `destroy` at the end).
    public init() throws(Failure) {
        let tools = ["initdb", "pg_ctl", "postgres", "psql"]
        if let missing = tools.first(where: { !FileManager.default.isExecutableFile(atPath: Self.binaries + "/" + $0) })
        {
            throw Failure(
                description: """
                    PostgreSQL's server binaries are not installed (no \(Self.binaries)/\(missing)): install postgresql-15 \
                    (apt-get install postgresql-15 libpq-dev, as .ci/run does), or set PUSHGATE_POSTGRES_BIN to their directory
                    """
            )
        }
        let root = geteuid() == 0
        osUser = root ? "postgres" : nil
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-pg-\(UUID().uuidString)").path
        socketDirectory = directory + "/socket"
        password = "pw-" + UUID().uuidString.prefix(8).lowercased()
        port = Self.freePort()
        do {
            try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
            let passwordFile = directory + "/pwfile"
            try Data((password + "\n").utf8).write(to: URL(fileURLWithPath: passwordFile))
            if root {
                guard let account = getpwnam("postgres") else {
                    throw Failure(
                        description: "there is no postgres user (postgresql-15 creates it): initdb refuses root"
                    )
                }
                for path in [directory, socketDirectory, passwordFile] {
                    chown(path, account.pointee.pw_uid, account.pointee.pw_gid)
                }
            }
            try runTool(
                "initdb",
                [
                    "-D", dataDirectory, "-U", user, "--pwfile", passwordFile, "-E", "UTF8", "--auth-local=trust",
                    "--auth-host=scram-sha-256", "--no-sync",
                ]
            )
            // Both on, as production should have them (they are the defaults; said here so that a
            // changed default cannot make the tests' 200s mean less).
            let settings = """
                fsync = on
                synchronous_commit = on
                listen_addresses = '127.0.0.1'
                port = \(port)
                unix_socket_directories = '\(socketDirectory)'
                max_connections = 200
                shared_buffers = 32MB
                """
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: dataDirectory + "/postgresql.conf"))
            handle.seekToEndOfFile()
            handle.write(Data(("\n" + settings + "\n").utf8))
            try handle.close()
            try start()
        } catch let failure as Failure {
            removeFiles()
            throw failure
        } catch {
            removeFiles()
            throw Failure(description: "cannot set up a PostgreSQL server in \(directory): \(error)")
        }
    }

    /// `postgresql://postgres:PASSWORD@127.0.0.1:PORT/DATABASE`.
    public func url(database: String) -> String {
        "postgresql://\(user):\(password)@127.0.0.1:\(port)/\(database)"
    }

    /// A new, empty database owned by the superuser; its name.
    public func createDatabase() throws -> String {
        let name = databases.withLockedValue { count in
            count += 1
            return "test_\(getpid())_\(count)"
        }
        try psql("CREATE DATABASE \(name)")
        return name
    }

    /// Runs `sql` as the superuser over the socket; returns psql's unaligned output.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        try runTool(
            "psql",
            [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory, "-p", "\(port)", "-U", user,
                "-d", database, "-c", sql,
            ],
            asServerUser: false
        )
    }

    /// The command line that runs `pg_ctl` with `arguments` on this server, as the server's
    /// user (for a test's own process to run at a moment it chooses).
    public func controlCommand(_ arguments: [String]) -> [String] {
        let tool = [Self.binaries + "/pg_ctl", "-D", dataDirectory, "-l", directory + "/server.log"] + arguments
        return (osUser.map { ["/usr/sbin/runuser", "-u", $0, "--"] } ?? []) + tool
    }

    public func start() throws {
        try runTool(
            "pg_ctl",
            ["-D", dataDirectory, "-l", directory + "/server.log", "-w", "-t", "60", "start"]
        )
    }

    /// `pg_ctl stop -m MODE`: `fast` (sessions ended, a clean shutdown) or `immediate` (a crash).
    public func stop(mode: String = "fast") {
        _ = try? runTool("pg_ctl", ["-D", dataDirectory, "-m", mode, "-w", "-t", "60", "stop"])
    }

    /// Stops the server and removes its files.
    public func destroy() {
        stop(mode: "immediate")
        removeFiles()
    }

    private func removeFiles() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The server's log so far, for a failing test's message.
    public var log: String {
        (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
    }

    /// Runs a tool to its exit, its output in a file: posix_spawn and waitpid rather than
    /// Foundation's Process, whose exit monitoring missed pg_ctl's exit (the server it starts
    /// outlives it and holds what pg_ctl inherited).
    @discardableResult
    private func runTool(_ tool: String, _ arguments: [String], asServerUser: Bool = true) throws(Failure) -> String {
        let path = Self.binaries + "/" + tool
        // Through bash, which closes every descriptor but the standard three first: the test
        // process's other descriptors (pipes to gateways under test) would otherwise live on in
        // the server that pg_ctl starts, and a test reading a gateway's output to its end would
        // wait for the server to exit. In /tmp: the server user may not enter the tests'
        // working directory.
        let script = """
            for fd in /proc/$$/fd/*; do n=${fd##*/}; if [ "$n" -gt 2 ]; then eval "exec $n>&-"; fi; done 2>/dev/null
            cd /tmp && exec "$@"
            """
        let tool = ["/bin/bash", "-c", script, "bash", path] + arguments
        let argv: [String] =
            if let osUser, asServerUser { ["/usr/sbin/runuser", "-u", osUser, "--"] + tool } else { tool }
        var environment = ProcessInfo.processInfo.environment
        for variable in environment.keys where variable.hasPrefix("PG") { environment[variable] = nil }
        environment["PGPASSWORD"] = password
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-pg-tool-\(UUID().uuidString)"
        ).path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let cArguments = argv.map { strdup($0) } + [nil]
        let cEnvironment = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in cArguments { free(pointer) }
            for pointer in cEnvironment { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, cEnvironment)
        guard spawned == 0 else { throw Failure(description: "cannot run \(argv[0]): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        guard exited, code == 0 else {
            throw Failure(
                description: "\(tool) \(arguments.joined(separator: " ")) failed (status \(status)): \(output)"
            )
        }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A port nothing listens on now (bound to 0 and read back, then closed).
    private static func freePort() -> Int {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socketDescriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketDescriptor, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketDescriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
