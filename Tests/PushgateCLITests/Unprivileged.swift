import Foundation
import PushgateTestFixtures

/// Every `pushgate` process these tests start (serve, agent, send, bench) runs as an
/// unprivileged user, as production runs it (systemd `User=`, a container's `USER`): when the
/// tests run as root, through `setpriv` as `nobody`. A gateway that works only as root (a socket
/// option that needs CAP_NET_ADMIN, a file only root can read) then fails here, not in production.
enum Unprivileged {
    static let user = "nobody"
    static let group = "nogroup"

    /// True when the tests run as root, so that pushgate processes must drop to `user`.
    static let dropsPrivileges = geteuid() == 0

    /// The executable and arguments that run `pushgate arguments` unprivileged.
    static func command(_ arguments: [String]) -> (executable: URL, arguments: [String]) {
        guard dropsPrivileges else { return (GatewayProcess.executable, arguments) }
        return command(executable: staged.binary, arguments)
    }

    /// The executable and arguments that run `executable arguments` unprivileged (a script that
    /// runs pushgate itself, say).
    static func command(executable: URL, _ arguments: [String]) -> (executable: URL, arguments: [String]) {
        guard dropsPrivileges else { return (executable, arguments) }
        return (
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid=\(user)", "--regid=\(group)", "--clear-groups", executable.path] + arguments
        )
    }

    /// A process set up to run `pushgate arguments` unprivileged.
    static func process(_ arguments: [String]) -> Process {
        let process = Process()
        let command = command(arguments)
        process.executableURL = command.executable
        process.arguments = command.arguments
        return process
    }

    /// Gives `path` to the unprivileged user, so that a pushgate process may write into a
    /// directory or read a private key (mode 0600) that the test made.
    static func handOver(_ path: String) throws {
        guard dropsPrivileges else { return }
        try FileManager.default.setAttributes(
            [.ownerAccountName: user, .groupOwnerAccountName: group],
            ofItemAtPath: path
        )
    }

    /// Where the unprivileged user finds the binary and the TLS fixtures: where they are when it
    /// can read them there, else copies in a temporary directory (a clone under root's home,
    /// mode 0700, is out of its reach).
    static let staged: (binary: URL, tlsDirectory: URL) = {
        let binary = GatewayProcess.executable
        let fixtures = TestFixtures.tlsDirectory
        let reachable = passes(["-x", binary.path, "-a", "-r", fixtures.appendingPathComponent("server-key.pem").path])
        guard dropsPrivileges, !reachable else { return (binary, fixtures) }
        let directory = URL(fileURLWithPath: stagingDirectory)
        do {
            try? FileManager.default.removeItem(at: directory)
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o755]
            )
            let stagedBinary = directory.appendingPathComponent("pushgate")
            let stagedFixtures = directory.appendingPathComponent("tls")
            try FileManager.default.copyItem(at: binary, to: stagedBinary)
            try FileManager.default.copyItem(at: fixtures, to: stagedFixtures)
            atexit { try? FileManager.default.removeItem(atPath: stagingDirectory) }
            return (stagedBinary, stagedFixtures)
        } catch {
            fatalError("cannot stage the pushgate binary for the unprivileged user in \(directory.path): \(error)")
        }
    }()

    private static let stagingDirectory = FileManager.default.temporaryDirectory
        .appendingPathComponent("pushgate-unprivileged-\(getpid())").path

    /// Whether `test expression` holds for the unprivileged user.
    private static func passes(_ expression: [String]) -> Bool {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        probe.arguments = ["--reuid=\(user)", "--regid=\(group)", "--clear-groups", "/usr/bin/test"] + expression
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }

    /// The real user id of a running process, from /proc.
    static func userID(of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }),
            let uid = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap({ Int($0) })
        else { throw GatewayProcess.GatewayFailed(message: "no Uid line in /proc/\(pid)/status") }
        return uid
    }
}
