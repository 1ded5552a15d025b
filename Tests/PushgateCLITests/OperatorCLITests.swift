import Foundation
import NIOConcurrencyHelpers
import PushgateTestFixtures
import Testing

/// The operator's side of `pushgate serve` with the real tools an operator points at it: a real
/// Prometheus scraping `/metrics` with the admin token, `promtool check metrics`, headless
/// Chromium on the dashboard, and the admin flags.
@Suite("Operators: Prometheus, promtool, the dashboard in a browser, admin flags", .serialized, .timeLimit(.minutes(3)))
struct OperatorCLITests {
    static let topic = "com.example.operators"
    static let token = "prometheus-reads-this-7d2a"

    /// A file holding the admin token, readable by the gateway's user only.
    static func tokenFile(in directory: String, _ token: String = token) throws -> String {
        let path = directory + "/admin-token"
        try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        try Unprivileged.handOver(path)
        return path
    }

    /// A gateway with an admin listener and a token file, and an agent that has received one push.
    static func gatewayWithTraffic(in directory: String) throws -> (GatewayProcess, AgentProcess, String) {
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--admin-token-file",
                try tokenFile(in: directory),
            ],
            listeners: 1,
            adminListeners: 1
        )
        let agent = try AgentProcess(server: gateway.urls[0], identity: directory + "/device.json", topic: Self.topic)
        let token = try #require(try agent.next()["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")
        let sent = try runPushgate([
            "send", "--server", gateway.urls[0], "--token", token, "--topic", Self.topic, #"{"aps":{"alert":"hi"}}"#,
        ])
        #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        #expect(try agent.next()["topic"] as? String == Self.topic)
        return (gateway, agent, token)
    }

    @Test(
        "a real Prometheus scrapes /metrics with the bearer token; up and a Pushgate series come back through its API"
    )
    func prometheusScrapes() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (gateway, _, _) = try Self.gatewayWithTraffic(in: directory)
        let target = try #require(gateway.adminURLs.first.map { $0.replacingOccurrences(of: "http://", with: "") })

        let prometheus = try PrometheusProcess(
            directory: directory,
            target: target,
            tokenFile: directory + "/admin-token"
        )
        defer { prometheus.stop() }
        let up = try prometheus.waitForSample(#"up{job="pushgate"}"#) { $0 == 1 }
        #expect(up == 1)
        let received = try prometheus.waitForSample(
            #"pushgate_notifications_received_total{job="pushgate",push_type="alert"}"#
        ) { $0 >= 1 }
        #expect(received == 1)
        let build = try prometheus.waitForSample(#"pushgate_build_info{job="pushgate"}"#) { $0 == 1 }
        #expect(build == 1)
        #expect(gateway.stop() == 0)
    }

    @Test("promtool check metrics finds nothing to report in the exposition")
    func promtoolChecksMetrics() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (gateway, _, _) = try Self.gatewayWithTraffic(in: directory)
        let exposition = try run(
            "curl",
            ["-sS", "-f", "-H", "authorization: bearer \(Self.token)", gateway.adminURLs[0] + "/metrics"]
        )
        #expect(exposition.status == 0, "\(exposition.stderr)")
        #expect(exposition.stdout.contains("pushgate_notifications_received_total{push_type=\"alert\"} 1"))
        let file = directory + "/metrics.txt"
        try Data(exposition.stdout.utf8).write(to: URL(fileURLWithPath: file))
        let check = try run("sh", ["-c", "promtool check metrics < '\(file)'"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout.isEmpty && check.stderr.isEmpty, "promtool reports: \(check.stdout) \(check.stderr)")
        #expect(gateway.stop() == 0)
    }

    @Test(
        "the dashboard in headless Chromium: the token once, then live figures move as pushes are sent, and a device's reasons"
    )
    func dashboardInBrowser() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The token from the environment, as a unit file's EnvironmentFile gives it.
        let gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0"],
            listeners: 1,
            environment: ["PUSHGATE_ADMIN_TOKEN": Self.token]
        )
        let agent = try AgentProcess(server: gateway.urls[0], identity: directory + "/device.json", topic: Self.topic)
        let token = try #require(try agent.next()["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")
        let identity =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/device.json")))
            as? [String: Any]
        let deviceID = try #require(identity?["deviceId"] as? String)

        try FileManager.default.createDirectory(atPath: Self.screenshots.path, withIntermediateDirectories: true)
        let screenshot = Self.screenshots.appendingPathComponent("dashboard.png").path
        let browser = try BrowserCheck(url: gateway.urls[0] + "/admin", token: Self.token, screenshot: screenshot)
        let ready = try browser.line()
        try #require(ready.hasPrefix("READY "), "\(ready)\n\(browser.rest())")

        // Two delivered at once, two priority-1 pushes held for a wake event.
        for priority in ["10", "10", "1", "1"] {
            let sent = try runPushgate([
                "send", "--server", gateway.urls[0], "--token", token, "--topic", Self.topic, "--priority", priority,
                #"{"aps":{"alert":"hi"}}"#,
            ])
            #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        }
        try browser.send("SENT 4 \(deviceID)")
        let outcome = try browser.line()
        #expect(outcome.hasPrefix("OK "), "\(outcome)\n\(browser.rest())")
        #expect(browser.exitStatus() == 0)
        #expect(FileManager.default.fileExists(atPath: screenshot))
        print("dashboard screenshots: \(screenshot) and its -phone twin")
        #expect(gateway.stop() == 0)
    }

    /// Where the dashboard test leaves its screenshots for a person to look at.
    static let screenshots = TestFixtures.file(".build/test-screenshots")

    @Test(
        "without an admin token, what a proxy forwards is refused though the proxy is a loopback peer; a loopback client's own request is answered"
    )
    func forwardedWithoutToken() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = gateway.stop() }
        func status(_ path: String, _ headers: [String]) throws -> (code: String, body: String) {
            let result = try run(
                "curl",
                ["-sS", "-w", "\n%{http_code}"] + headers.flatMap { ["-H", $0] } + [gateway.urls[0] + path]
            )
            let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
        }
        #expect(try status("/v1/admin/stats", []).code == "200")
        #expect(try status("/metrics", []).code == "200")
        for (path, header) in [
            ("/v1/admin/stats", "x-forwarded-for: 192.0.2.9"), ("/metrics", "Via: 1.1 proxy"),
            ("/v1/admin/stats", "forwarded: for=192.0.2.9"),
        ] {
            let refused = try status(path, [header])
            #expect(refused.code == "403", "\(path) \(header): \(refused)")
            #expect(refused.body.contains("came through a proxy"), "\(refused.body)")
        }
    }

    @Test(
        "serve warns when operator routes listen off loopback without a token; token settings that cannot work are usage errors"
    )
    func adminFlags() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let open = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0", "--allow-insecure-cleartext"],
            listeners: 1,
            adminListeners: 1
        )
        #expect(open.stop() == 0)
        #expect(open.logged.contains("no admin token"), "\(open.logged)")
        let guarded = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0", "--admin-token-file",
                try Self.tokenFile(in: directory),
                "--allow-insecure-cleartext",
            ],
            listeners: 1,
            adminListeners: 1
        )
        let refused = try run(
            "curl",
            ["-sS", "-o", "/dev/null", "-w", "%{http_code}", guarded.adminURLs[0] + "/metrics"]
        )
        #expect(refused.stdout == "401")
        #expect(guarded.stop() == 0)
        #expect(!guarded.logged.contains("no admin token"), "\(guarded.logged)")

        let empty = directory + "/empty-token"
        try Data("\n".utf8).write(to: URL(fileURLWithPath: empty))
        try Unprivileged.handOver(empty)
        for (arguments, message) in [
            (["--admin-token", "a", "--admin-token-file", empty], "give the admin token once"),
            (["--admin-only-on-admin-listener"], "--admin-only-on-admin-listener needs --admin-listen"),
            (["--admin-token-file", empty], "is empty"),
            (["--admin-token-file", directory + "/missing"], "cannot be read"),
        ] {
            let serve = try runPushgate(
                ["serve", "--listen", "127.0.0.1:0", "--data-dir", directory + "/data"] + arguments,
                timeout: .seconds(30)
            )
            #expect(serve.status != 0, "\(arguments)")
            #expect(serve.stderr.contains(message), "\(arguments): \(serve.stderr)")
        }
    }
}

/// `prometheus` as a plain process with a temporary configuration and data directory.
final class PrometheusProcess {
    let process = Process()
    private let errors = Pipe()
    private(set) var address = ""

    struct Failed: Error, CustomStringConvertible {
        var description: String
    }

    init(directory: String, target: String, tokenFile: String) throws {
        let configuration = directory + "/prometheus.yml"
        try Data(
            """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
            scrape_configs:
              - job_name: pushgate
                authorization:
                  credentials_file: \(tokenFile)
                static_configs:
                  - targets: ["\(target)"]

            """.utf8
        ).write(to: URL(fileURLWithPath: configuration))
        guard
            let executable = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].first(
                where: FileManager.default.isExecutableFile
            )
        else {
            throw ToolMissing(tool: "prometheus")
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--config.file=\(configuration)", "--storage.tsdb.path=\(directory)/prometheus-data",
            "--web.listen-address=127.0.0.1:0", "--log.level=info",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        // It logs the port it bound ("Listening on" address=127.0.0.1:PORT).
        let watchdog = killAfter(.seconds(60), process)
        defer { watchdog.cancel() }
        var log = ""
        while address.isEmpty {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { throw Failed(description: "prometheus exited: \(log)") }
            log += String(decoding: chunk, as: UTF8.self)
            for line in log.split(separator: "\n") where line.contains("msg=\"Listening on\"") {
                if let range = line.range(of: "address=") {
                    address = String(line[range.upperBound...].prefix { $0 != " " })
                }
            }
        }
        let handle = errors.fileHandleForReading
        Thread { while !handle.availableData.isEmpty {} }.start()
    }

    /// Queries `query` through the HTTP API until `accept` holds for its value (Prometheus
    /// scrapes once a second); fails after 30 s.
    func waitForSample(_ query: String, _ accept: (Double) -> Bool) throws -> Double {
        let deadline = Date().addingTimeInterval(30)
        var last = ""
        while Date() < deadline {
            let result = try run(
                "curl",
                ["-sS", "-G", "http://\(address)/api/v1/query", "--data-urlencode", "query=\(query)"]
            )
            last = result.stdout
            if let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                let data = json["data"] as? [String: Any],
                let samples = data["result"] as? [[String: Any]],
                let value = (samples.first?["value"] as? [Any])?.last as? String,
                let number = Double(value), accept(number)
            {
                return number
            }
            Thread.sleep(forTimeInterval: 0.25)
        }
        throw Failed(description: "\(query) never matched; last answer: \(last)")
    }

    func stop() {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }
}

/// `dashboard_check.py`: Chromium driven by selenium, talked to a line at a time.
final class BrowserCheck {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors = Pipe()
    private var pending = Data()

    init(url: String, token: String, screenshot: String) throws {
        guard FileManager.default.isExecutableFile(atPath: PythonClient.interpreter) else {
            throw PythonClient.NotInstalled()
        }
        process.executableURL = URL(fileURLWithPath: PythonClient.interpreter)
        process.arguments = [
            "-B", PythonClient.path("dashboard_check.py"), "--url", url, "--token", token, "--screenshot", screenshot,
            "--timeout", "30",
        ]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Chromium and its driver may say a lot on stderr: kept for a failure's message, and
        // read as it comes so that a full pipe never stalls them.
        let handle = errors.fileHandleForReading
        let log = self.log
        Thread {
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                log.withLockedValue { $0.append(chunk) }
            }
        }.start()
    }

    private let log = NIOLockedValueBox(Data())

    /// The script's next line (it bounds its own waits and exits on failure).
    func line() throws -> String {
        let watchdog = killAfter(.seconds(120), process)
        defer { watchdog.cancel() }
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending = Data(pending[(newline + 1)...])
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return "FAIL the script exited: " + String(decoding: pending, as: UTF8.self) }
            pending.append(chunk)
        }
    }

    func send(_ line: String) throws {
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Whatever else it printed, for a failure's message.
    func rest() -> String {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let out = String(decoding: pending + output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = log.withLockedValue { String(decoding: $0, as: UTF8.self) }
        return "stdout: \(out.suffix(3000))\nstderr: \(err.suffix(3000))"
    }

    func exitStatus() -> Int32 {
        let watchdog = killAfter(.seconds(60), process)
        defer { watchdog.cancel() }
        process.waitUntilExit()
        return process.terminationStatus
    }
}
