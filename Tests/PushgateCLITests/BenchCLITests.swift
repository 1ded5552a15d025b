import Foundation
import Testing

/// The real `pushgate bench` against the real `pushgate serve`: every push it sends is accepted
/// and received exactly once, whether devices ack at once or coalesce their acks; given the
/// gateway's pid, it reports the gateway's CPU.
@Suite("pushgate bench: end to end", .serialized, .timeLimit(.minutes(3)))
struct BenchCLITests {
    /// One bench run's flags and what its devices' acks and pacing must show.
    struct Run: Sendable, CustomTestStringConvertible {
        var flags: [String]
        /// False when the run ends before any ack is due.
        var acks = true
        /// The --rate given, which caps the accepted rate.
        var rate: Int?
        var testDescription: String { flags.joined(separator: " ") }
    }

    @Test(
        "a small run loses and duplicates nothing; devices ack (unless told to wait past the run) and keep their streams",
        arguments: [
            Run(flags: ["--ack-delay", "0"]),
            // The run ends long before the first ack is due: a bench that ignored the delay
            // would send about one ack per ten pushes here.
            Run(flags: ["--ack-delay", "60000"], acks: false),
            Run(flags: ["--silent-percent", "50"]),
            Run(flags: ["--rate", "1000"], rate: 1000),
        ]
    )
    func smallRun(_ run: Run) throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = gateway.stop() }
        let summary = try benchSummary(
            runPushgate(
                [
                    "bench", "--server", gateway.urls[0], "--devices", "20", "--providers", "2", "--pushes", "2000",
                    "--drain-seconds", "30",
                    "--server-pid", "\(gateway.process.processIdentifier)",
                ] + run.flags
            )
        )
        #expect(summary["accepted"] as? Int == 2000)
        #expect(summary["lost"] as? Int == 0)
        #expect(summary["duplicated"] as? Int == 0)
        let acks = (summary["acks"] as? NSNumber)?.intValue ?? 0
        #expect(run.acks ? acks > 0 : acks == 0, "acks: \(acks)")
        #expect(summary["streamsLost"] as? Int == 0)
        // The gateway worked through the pushes: its CPU shows, the event loops' part of it.
        let cpu = try #require((summary["serverCPUPer100k"] as? NSNumber)?.doubleValue, "no server CPU: \(summary)")
        let loops = try #require((summary["serverLoopCPUPer100k"] as? NSNumber)?.doubleValue)
        #expect(cpu > 0)
        #expect(loops > 0 && loops <= cpu)
        if let rate = run.rate {
            // Paced: the 2,000th push is not due before 1,999 / rate seconds have passed (flat
            // out, a debug build here sends about 3,600/s).
            let perSecond = try #require((summary["acceptedPerSecond"] as? NSNumber)?.doubleValue)
            #expect(perSecond <= Double(rate) * 2000 / 1999 + 1)
        }
    }

    @Test(
        "--backlog: the pushes are stored while no device is connected, --then-run runs before the streams open, each device gets its backlog once, the gateway's CPU over the storm is read from --server-pid-file; a failing command or an unreadable pid file ends the bench"
    )
    func backlog() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = gateway.stop() }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seen = directory + "/stored"
        let base = [
            "bench", "--server", gateway.urls[0], "--devices", "20", "--providers", "2", "--pushes", "100", "--backlog",
            "--drain-seconds", "30",
        ]
        // The restart a storm benchmark runs would write a new process id here.
        let pidFile = directory + "/gateway.pid"
        let summary = try benchSummary(
            runPushgate(
                base + [
                    "--then-run",
                    "curl -s \(gateway.urls[0])/metrics > \(seen) && echo \(gateway.process.processIdentifier) > \(pidFile)",
                    "--server-pid-file", pidFile,
                ]
            )
        )
        // When the command ran every push was stored and none delivered: no stream was open.
        let metrics = try String(contentsOfFile: seen, encoding: .utf8)
        #expect(
            metrics.contains("pushgate_stored_notifications 100.0\n"),
            "\(metrics.split(separator: "\n").filter { $0.hasPrefix("pushgate_stored") })"
        )
        #expect(summary["accepted"] as? Int == 100)
        #expect(summary["lost"] as? Int == 0)
        #expect(summary["duplicated"] as? Int == 0)
        let open = try #require((summary["streamsOpenSeconds"] as? NSNumber)?.doubleValue, "\(summary)")
        let delivered = try #require((summary["backlogDeliveredSeconds"] as? NSNumber)?.doubleValue)
        #expect(open > 0 && delivered >= open)
        let stormCPU = try #require((summary["stormServerCPUSeconds"] as? NSNumber)?.doubleValue, "\(summary)")
        #expect(stormCPU >= 0)

        let noPID = try runPushgate(base + ["--server-pid-file", directory + "/absent.pid"])
        #expect(noPID.status != 0)
        #expect(noPID.stderr.contains("does not hold a process id"), "\(noPID.stderr)")

        let failed = try runPushgate(base + ["--then-run", "exit 3"])
        #expect(failed.status != 0)
        #expect(failed.stderr.contains("--then-run ended with status 3"), "\(failed.stderr)")
    }

    @Test(
        "without --server-pid the bench reports no server CPU; with a process that does not exist it refuses to start"
    )
    func serverPID() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = gateway.stop() }
        let base = ["bench", "--server", gateway.urls[0], "--devices", "2", "--providers", "1", "--pushes", "10"]
        let summary = try benchSummary(runPushgate(base))
        #expect(summary["serverCPUPer100k"] is NSNull)
        // Above the kernel's pid limit (4,194,304 at most): no such process.
        let refused = try runPushgate(base + ["--server-pid", "2000000000"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("cannot read /proc/2000000000/stat"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("creating"), "refused before creating devices: \(refused.stderr)")
    }

    @Test(
        "--drain-seconds out of 0...86400 is refused before the bench starts",
        arguments: ["-1", "86401", "18446744074"]
    )
    func drainSeconds(value: String) throws {
        let refused = try runPushgate(["bench", "--server", "http://127.0.0.1:1", "--drain-seconds=\(value)"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--drain-seconds must be 0 to 86400"), "\(refused.stderr)")
    }

    @Test("against a gateway with a registration secret, bench creates its devices with --registration-secret")
    func registrationSecret() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = "bench-registration-secret"
        let gateway = try GatewayProcess.withRegistrationSecret(secret, in: directory)
        defer { _ = gateway.stop() }
        let base = ["bench", "--server", gateway.urls[0], "--devices", "4", "--providers", "1", "--pushes", "100"]
        let refused = try runPushgate(base)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("401"), "without the secret: \(refused.stderr)")
        let summary = try benchSummary(runPushgate(base + ["--registration-secret", secret]))
        #expect(summary["accepted"] as? Int == 100)
        #expect(summary["lost"] as? Int == 0)
    }

    /// The JSON line a successful bench run ends with.
    private func benchSummary(_ result: ToolRun) throws -> [String: Any] {
        try #require(result.status == 0, "bench failed: \(result.stderr)")
        let last = try #require(result.stdout.split(separator: "\n").last, "no output: \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
    }
}
