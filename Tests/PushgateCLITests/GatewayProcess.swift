import Foundation
import NIOConcurrencyHelpers
import PushgateStoreTestKit

enum Fixtures {
    /// A TLS fixture where the unprivileged gateway can read it.
    static func tls(_ name: String) -> String { Unprivileged.staged.tlsDirectory.appendingPathComponent(name).path }
}

struct ToolMissing: Error, CustomStringConvertible {
    var tool: String
    var description: String {
        "\(tool) is not installed; .ci/run installs it (apt-get install curl nghttp2-client python3-httpx python3-h2)"
    }
}

/// The result of running an external program to completion.
struct ToolRun {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs `tool` with `arguments`, waiting for it to exit. Fails if the tool is not installed:
/// these tests exist to run code nobody here wrote against the gateway.
func run(_ tool: String, _ arguments: [String]) throws -> ToolRun {
    guard
        let path = ["/usr/bin/\(tool)", "/usr/sbin/\(tool)", "/usr/local/bin/\(tool)"]
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
    else { throw ToolMissing(tool: tool) }
    return try run(executable: URL(fileURLWithPath: path), arguments)
}

/// Runs the `pushgate` binary under test to completion, unprivileged; `environment` is added to
/// this process's own.
func runPushgate(
    _ arguments: [String],
    environment: [String: String] = [:],
    timeout: DispatchTimeInterval = .seconds(120)
) throws -> ToolRun {
    let command = Unprivileged.command(arguments)
    return try run(executable: command.executable, command.arguments, environment: environment, timeout: timeout)
}

/// A tool still running after `timeout` is killed (SIGKILL) and its run returned as it is:
/// a blocking read cannot be interrupted by a test's time limit, so a stuck tool would hang CI.
func run(
    executable: URL,
    _ arguments: [String],
    environment: [String: String] = [:],
    timeout: DispatchTimeInterval = .seconds(120)
) throws -> ToolRun {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let watchdog = killAfter(timeout, process)
    defer { watchdog.cancel() }
    // Read both pipes to the end before waiting, so a chatty tool cannot block on a full pipe.
    let errData = NIOLockedValueBox(Data())
    let errDone = DispatchSemaphore(value: 0)
    Thread {
        errData.withLockedValue { $0 = err.fileHandleForReading.readDataToEndOfFile() }
        errDone.signal()
    }.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    errDone.wait()
    return ToolRun(
        status: process.terminationStatus,
        stdout: String(decoding: outData, as: UTF8.self),
        stderr: String(decoding: errData.withLockedValue { $0 }, as: UTF8.self)
    )
}

/// Kills `process` after `timeout` unless the returned item is cancelled first.
func killAfter(_ timeout: DispatchTimeInterval, _ process: Process) -> DispatchWorkItem {
    let pid = process.processIdentifier
    let item = DispatchWorkItem { if process.isRunning { kill(pid, SIGKILL) } }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: item)
    return item
}

/// A `pushgate serve` process on ephemeral ports, run unprivileged (`Unprivileged`).
final class GatewayProcess: @unchecked Sendable {
    let process: Process
    /// Base URLs in listener order, as the process printed them.
    private(set) var urls: [String] = []
    /// The admin listeners' base URLs.
    private(set) var adminURLs: [String] = []
    private let stdout = Pipe()
    private let stderr = Pipe()

    static var executable: URL {
        // The test bundle sits beside the package's products in the build directory.
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("pushgate")
    }

    /// The store directory when the caller gave none: a fresh one, removed at the end.
    private var ownDataDirectory: String?

    /// With `PUSHGATE_TEST_POSTGRES` set (CI's second run of some suites), every gateway keeps
    /// its store in PostgreSQL (`PostgresServer.shared`) instead: one database per data
    /// directory, so that a test that restarts a gateway on its directory finds its data again.
    static let storeInPostgres = ProcessInfo.processInfo.environment["PUSHGATE_TEST_POSTGRES"] != nil
    private static let databases = NIOLockedValueBox<[String: String]>([:])

    /// The database standing for `dataDirectory` (made at its first use).
    static func databaseURL(for dataDirectory: String) throws -> String {
        let server = try PostgresServer.shared()
        let name = try databases.withLockedValue { databases in
            if let name = databases[dataDirectory] { return name }
            let name = try server.createDatabase()
            databases[dataDirectory] = name
            return name
        }
        return server.url(database: name)
    }

    /// `environment` is added to this process's own. `storeInSQLite`: in SQLite even under
    /// `PUSHGATE_TEST_POSTGRES` (a test of moving a SQLite store).
    init(
        arguments: [String],
        listeners: Int,
        adminListeners: Int = 0,
        environment: [String: String] = [:],
        storeInSQLite: Bool = false
    ) throws {
        var arguments = arguments
        if !arguments.contains("--data-dir") {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "pushgate-cli-\(UUID().uuidString)"
            ).path
            ownDataDirectory = directory
            arguments += ["--data-dir", directory]
        }
        if Self.storeInPostgres, !storeInSQLite, !arguments.contains("--database-url"),
            !arguments.contains("--database-url-file"),
            let index = arguments.firstIndex(of: "--data-dir"), index + 1 < arguments.count
        {
            arguments += ["--database-url", try Self.databaseURL(for: arguments[index + 1])]
        }
        // Stopping at once unless a test is about the drain: the grace would only slow them.
        if !arguments.contains("--drain-grace-seconds") { arguments += ["--drain-grace-seconds", "0"] }
        process = Unprivileged.process(["serve", "--log-level", "warning"] + arguments)
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        // Blocks until the process has printed one line per listener (it does so once bound).
        var buffer = Data()
        let handle = stdout.fileHandleForReading
        while urls.count < listeners || adminURLs.count < adminListeners {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            let lines = String(decoding: buffer, as: UTF8.self).split(separator: "\n")
            urls = lines.filter { $0.hasPrefix("listening ") }.map { String($0.dropFirst("listening ".count)) }
            adminURLs = lines.filter { $0.hasPrefix("admin listening ") }.map {
                String($0.dropFirst("admin listening ".count))
            }
        }
        if urls.count < listeners || adminURLs.count < adminListeners {
            let errors = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
            throw GatewayFailed(message: "pushgate serve did not start: \(errors)")
        }
        // Keep draining both pipes, so a chatty gateway never blocks on a full one; what it
        // logs is kept for `logged`.
        let out = stdout.fileHandleForReading
        Thread { while !out.availableData.isEmpty {} }.start()
        let err = stderr.fileHandleForReading
        let log = self.log
        let logEnded = self.logEnded
        Thread {
            while true {
                let chunk = err.availableData
                if chunk.isEmpty { break }
                log.withLockedValue { $0.append(chunk) }
            }
            logEnded.signal()
        }.start()
    }

    private let log = NIOLockedValueBox(Data())
    private let logEnded = DispatchSemaphore(value: 0)

    /// What the gateway logged (stderr), all of it once `stop` has returned.
    var logged: String { log.withLockedValue { String(decoding: $0, as: UTF8.self) } }

    /// A cleartext listener (`urls[0]`) and a TLS one with the test certificate (`urls[1]`).
    static func cleartextAndTLS(_ extra: [String] = []) throws -> GatewayProcess {
        try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0",
                "--tls-listen", "127.0.0.1:0",
                "--tls-cert", Fixtures.tls("server.pem"),
                "--tls-key", Fixtures.tls("server-key.pem"),
            ] + extra,
            listeners: 2
        )
    }

    /// One cleartext listener, with `secret` as its registration secret (a config file in
    /// `directory`).
    static func withRegistrationSecret(_ secret: String, in directory: String) throws -> GatewayProcess {
        let config = directory + "/pushgate.json"
        try Data(#"{"registrationSecret": "\#(secret)"}"#.utf8).write(to: URL(fileURLWithPath: config))
        return try GatewayProcess(arguments: ["--listen", "127.0.0.1:0", "--config", config], listeners: 1)
    }

    struct GatewayFailed: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Sends `signal` and waits for the exit status.
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        logEnded.wait()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        if let ownDataDirectory { try? FileManager.default.removeItem(atPath: ownDataDirectory) }
    }
}
