import Foundation
import PushgateDeviceClient

/// `--backlog`: pushes stored while no device is connected, an optional command between (a
/// gateway restart), then every device reconnecting at once.
extension BenchRun {
    /// The pushes go to devices with no stream open, so they are stored; after `--then-run`
    /// (a gateway restart, say) every device opens its stream and gets its backlog.
    func reconnectStorm(_ devices: [Device], ledger: BenchLedger) async throws {
        log(
            "sending \(counted(options.pushes, "push", plural: "pushes")) to offline devices over \(counted(options.providers, "connection"))"
        )
        let started = BenchLedger.now()
        try await send(devices, ledger: ledger)
        let sendSeconds = Double(BenchLedger.now() - started) / 1e9
        if let command = options.thenRun {
            log("running \(command)")
            let status = Self.runShell(command)
            guard status == 0 else {
                throw ClientFailure(description: "--then-run ended with status \(status): \(command)")
            }
        }
        // Read after the command: a restart has a new process id.
        let serverPID = try options.serverPIDFile.map { path in try Self.processID(in: path) }
        log("opening \(counted(devices.count, "event stream")), \(options.concurrentConnects) at a time")
        let cpuBefore = try serverPID.map { pid throws(ProcessCPU.Unreadable) in try ProcessCPU.sample(pid: pid) }
        let stormStarted = BenchLedger.now()
        let streams = try await devices.concurrentMap(width: options.concurrentConnects) { device in
            try await openStream(device, ledger: ledger)
        }
        let openSeconds = Double(BenchLedger.now() - stormStarted) / 1e9
        try await awaitDelivery(ledger, checkingEvery: .milliseconds(5))
        let deliveredSeconds = Double(BenchLedger.now() - stormStarted) / 1e9
        // Before the streams close: closing them is not the storm's cost.
        var stormCPU: ProcessCPU?
        if let serverPID, let cpuBefore { stormCPU = try ProcessCPU.sample(pid: serverPID).since(cpuBefore) }
        ledger.stopped.store(true, ordering: .relaxed)
        report(
            ledger,
            sendSeconds: sendSeconds,
            serverCPU: nil,
            storm: StormFigures(open: openSeconds, delivered: deliveredSeconds, serverCPU: stormCPU)
        )
        await withTaskGroup(of: Void.self) { group in
            for connection in streams { group.addTask { await connection.close() } }
        }
    }

    /// The process id a --server-pid-file holds.
    private static func processID(in path: String) throws -> Int32 {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 else {
            throw ClientFailure(description: "--server-pid-file \(path) does not hold a process id")
        }
        return pid
    }

    /// `sh -c command`, waited for with waitpid: Foundation's `Process.waitUntilExit` never
    /// returned here for a command that outlived its start (it waits on a run loop the bench's
    /// threads do not run). The exit status, or -1 when it could not start or ended by a signal.
    private static func runShell(_ command: String) -> Int32 {
        let argv: [UnsafeMutablePointer<CChar>?] =
            ["/bin/sh", "-c", command].map { (argument: String) in strdup(argument) } + [nil]
        defer { for arg in argv { free(arg) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { return -1 }
        }
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : -1
    }
}
