import Foundation
import Testing

/// `pushgate config check` and the settings' sources as the binary reads them: the effective
/// configuration with secrets redacted, errors at their file line; `--log-format json`.
@Suite("Configuration: config check, environment, JSON logs", .timeLimit(.minutes(2)))
struct ConfigCheckCLITests {
    static let adminToken = "admin-token-that-must-never-show"
    static let registrationSecret = "registration-secret-never-shown"

    /// A directory the unprivileged gateway can read, holding `pushgate.json` and secret files.
    struct Scratch {
        let directory: String
        var config: String { directory + "/pushgate.json" }

        init(_ json: String) throws {
            directory = try scratchDirectory()
            try write("pushgate.json", json)
        }

        func write(_ name: String, _ text: String) throws {
            let path = directory + "/" + name
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            try Unprivileged.handOver(path)
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    @Test("a good file: exit 0, every setting with its value and source, secrets redacted")
    func good() throws {
        let scratch = try Scratch(
            """
            {
              "listen": ["127.0.0.1:2197"],
              "logLevel": "debug",
              "registrationSecretFile": "registration-secret",
              "scheduler": {"appBurst": 5, "topics": {"com.example.news": {"appBurst": 6}}}
            }
            """
        )
        defer { scratch.remove() }
        try scratch.write("registration-secret", Self.registrationSecret + "\n")
        let check = try runPushgate(
            ["config", "check", "--config", scratch.config, "--threads", "3"],
            environment: ["PUSHGATE_ADMIN_TOKEN": Self.adminToken, "PUSHGATE_LOG_LEVEL": "warning"],
            timeout: .seconds(30)
        )
        #expect(check.status == 0, "\(check.stdout)\n\(check.stderr)")
        let lines = check.stdout.split(separator: "\n").map {
            $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        }
        #expect(lines.contains("threads 3 --threads"), "\(check.stdout)")
        #expect(
            lines.contains("logLevel warning PUSHGATE_LOG_LEVEL"),
            "the environment wins over the file: \(check.stdout)"
        )
        #expect(lines.contains("listen 127.0.0.1:2197 \(scratch.config):2"), "\(check.stdout)")
        #expect(lines.contains("scheduler.appBurst 5 \(scratch.config):5"), "\(check.stdout)")
        #expect(lines.contains("adminToken <redacted> PUSHGATE_ADMIN_TOKEN"), "\(check.stdout)")
        #expect(
            lines.contains {
                $0.hasPrefix(
                    "registrationSecret <redacted> \(scratch.directory)/registration-secret, named by \(scratch.config):4"
                )
            },
            "\(check.stdout)"
        )
        #expect(lines.contains("idleTimeout 300 default"), "\(check.stdout)")
        #expect(lines.last == "configuration OK")
        for secret in [Self.adminToken, Self.registrationSecret] {
            #expect(!check.stdout.contains(secret) && !check.stderr.contains(secret))
        }
    }

    @Test(
        "a bad file: exit 1, the error at its line and column",
        arguments: [
            (
                "{\n  \"listen\": [\"127.0.0.1:0\"],\n  \"scheduler\": {\n    \"appBrust\": 3\n  }\n}",
                ":4:5: scheduler.appBrust: unknown key; did you mean \"appBurst\"?"
            ),
            ("{\n  \"threads\": \"4\"\n}", ":2:14: threads: must be a whole number, not a string"),
            (
                "{\n  \"scheduler\": {\n    \"topics\": {\"com.example.news\": {\"appBurst\": 0}}\n  }\n}",
                #":3:49: scheduler.topics.com.example.news.appBurst: scheduler policy for topic "com.example.news": appBurst is 0; allowed 1...1000"#
            ),
            ("{\n  \"idleTimeout\": 0\n}", ":2:18: idleTimeout: is 0; must be 1 to 31536000"),
            ("{\n  \"listen\": [\"0.0.0.0:2197\"]\n}", "refusing to listen on 0.0.0.0 (not loopback)"),
            // The shipped Secret's placeholders are long enough to pass as secrets, and public.
            (
                "{\"registrationSecret\": \"REPLACE-WITH-A-LONG-RANDOM-STRING\"}",
                "the registration secret is still the placeholder of Deploy/kubernetes/secret.yaml"
            ),
            (
                "{\"adminToken\": \"REPLACE-WITH-A-LONG-RANDOM-TOKEN\"}",
                "the admin token is still the placeholder of Deploy/kubernetes/secret.yaml"
            ),
            (
                "{\"providerKeys\": [\n  {\"teamId\": \"TEAM000001\", \"keyId\": \"KEY0000001\", \"topics\": [\"a\"],\n   \"privateKeyFile\": \"missing.p8\"}\n]}",
                #":3:22: providerKeys[0].privateKeyFile: provider key "KEY0000001": privateKeyFile: "#
            ),
        ]
    )
    func bad(json: String, message: String) throws {
        let scratch = try Scratch(json)
        defer { scratch.remove() }
        let check = try runPushgate(["config", "check", "--config", scratch.config], timeout: .seconds(30))
        #expect(check.status == 1, "\(check.stdout)\n\(check.stderr)")
        let expected = message.hasPrefix(":") ? "error: \(scratch.config)\(message)" : message
        #expect(check.stderr.contains(expected), "\(check.stderr)")
    }

    @Test("config check names every error, each at its place: scheduler values out of range beside the others")
    func everyError() throws {
        let scratch = try Scratch("{\n  \"scheduler\": {\"appBurst\": -1, \"appRefillPerHour\": 0}\n}")
        defer { scratch.remove() }
        let check = try runPushgate(
            ["config", "check", "--config", scratch.config, "--threads", "0"],
            environment: ["PUSHGATE_SCHEDULER_DEVICE_BURST": "0"],
            timeout: .seconds(30)
        )
        #expect(check.status == 1, "\(check.stdout)\n\(check.stderr)")
        let errors = check.stderr.split(separator: "\n").filter { $0.hasPrefix("error: ") }
        #expect(errors.count == 4, "\(check.stderr)")
        for expected in [
            "--threads: ", "\(scratch.config):2:29: scheduler.appBurst: global scheduler policy: appBurst is -1",
            "\(scratch.config):2:53: scheduler.appRefillPerHour: global scheduler policy: appRefillPerHour is 0",
            "PUSHGATE_SCHEDULER_DEVICE_BURST: global scheduler policy: deviceBurst is 0",
        ] {
            #expect(errors.contains { $0.contains(expected) }, "\(expected) in \(check.stderr)")
        }
    }

    @Test("serve: the environment and a secret's _FILE variable set what no flag sets; a flag wins over both")
    func environment() throws {
        let scratch = try Scratch(#"{"adminListen": ["127.0.0.1:0"], "logLevel": "info"}"#)
        defer { scratch.remove() }
        try scratch.write("admin-token", Self.adminToken + "\n")
        let gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--config", scratch.config],
            listeners: 1,
            adminListeners: 1,
            environment: [
                "PUSHGATE_ADMIN_TOKEN_FILE": scratch.directory + "/admin-token", "PUSHGATE_LOG_LEVEL": "debug",
            ]
        )
        let refused = try run(
            "curl",
            ["-sS", "-o", "/dev/null", "-w", "%{http_code}", gateway.adminURLs[0] + "/metrics"]
        )
        #expect(refused.stdout == "401", "the token from the file guards the admin listener of the config file")
        let allowed = try run(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "authorization: bearer \(Self.adminToken)",
                gateway.adminURLs[0] + "/metrics",
            ]
        )
        #expect(allowed.stdout == "200")
        #expect(gateway.stop() == 0)
        // GatewayProcess passes --log-level warning, which wins over PUSHGATE_LOG_LEVEL=debug.
        #expect(!gateway.logged.contains("info") && !gateway.logged.contains("debug"), "\(gateway.logged)")
    }

    @Test("--log-format json: every line is one JSON object with timestamp, level, label and message; no secret in it")
    func jsonLogs() throws {
        let scratch = try Scratch(#"{"logFormat": "json", "registrationSecret": "\#(Self.registrationSecret)"}"#)
        defer { scratch.remove() }
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--config", scratch.config, "--log-level", "debug", "--admin-token",
                Self.adminToken,
            ],
            listeners: 1
        )
        #expect(gateway.stop() == 0)
        let lines = gateway.logged.split(separator: "\n")
        #expect(lines.count >= 3, "\(gateway.logged)")
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(
                object?["timestamp"] is String && object?["level"] is String
                    && object?["label"] as? String == "pushgate",
                "\(line)"
            )
            #expect(object?["message"] is String, "\(line)")
        }
        #expect(
            lines.contains {
                $0.contains(#""message":"access""#) && $0.contains(#""devices.registration_secret":"true""#)
            },
            "\(gateway.logged)"
        )
        for secret in [Self.adminToken, Self.registrationSecret] {
            #expect(!gateway.logged.contains(secret))
        }
    }
}

/// A port already taken: serve says which address and which setting, not NIO's
/// `bind(descriptor:ptr:bytes:)` line.
@Suite("serve: a port in use", .serialized, .timeLimit(.minutes(2)))
struct PortInUseCLITests {
    @Test(
        "each listener setting, given an address in use, is named with it",
        arguments: ["listen", "tlsListen", "adminListen"]
    )
    func portInUse(_ setting: String) throws {
        let taken = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = taken.stop() }
        let address = try #require(taken.urls[0].split(separator: "//").last.map(String.init))
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let arguments: [String]
        switch setting {
        case "listen": arguments = ["--listen", address]
        case "tlsListen":
            arguments = [
                "--tls-listen", address, "--tls-cert", Fixtures.tls("server.pem"), "--tls-key",
                Fixtures.tls("server-key.pem"),
            ]
        default: arguments = ["--listen", "127.0.0.1:0", "--admin-listen", address]
        }
        let refused = try runPushgate(["serve", "--data-dir", directory] + arguments)
        #expect(refused.status == 1)
        #expect(
            refused.stderr.hasSuffix(
                "Error: cannot listen on \(address) (\(setting)): address already in use (another process, or another listener of this gateway, has the port)\n"
            ),
            "\(refused.stderr)"
        )
    }
}

/// Names that are no setting: a flag gets a "did you mean" whatever the kind of mistake, and a
/// `PUSHGATE_*` variable that nothing reads is warned about instead of silently ignored.
@Suite("serve and config check: flags and variables that name no setting", .serialized, .timeLimit(.minutes(2)))
struct UnknownNamesCLITests {
    @Test("--port and --tls-ca get a did-you-mean, from serve and config check alike")
    func flags() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = try runPushgate(["serve", "--data-dir", directory, "--port", "2197"])
        #expect(port.status == 64)
        #expect(
            port.stderr.hasPrefix(
                "Error: --port: unknown flag; did you mean --listen HOST:PORT, --tls-listen HOST:PORT or --admin-listen HOST:PORT?\n"
            ),
            "\(port.stderr)"
        )
        let serve = try runPushgate(["serve", "--data-dir", directory, "--tls-ca", "ca.pem"])
        #expect(
            serve.stderr.hasPrefix("Error: --tls-ca: unknown flag; did you mean --tls-client-ca?\n"),
            "\(serve.stderr)"
        )
        let check = try runPushgate(["config", "check", "--tls-ca", "ca.pem"])
        #expect(check.status == 1)
        #expect(check.stderr == "error: --tls-ca: unknown flag; did you mean --tls-client-ca?\n", "\(check.stderr)")
    }

    @Test(
        "a misspelt PUSHGATE_* variable is warned about by config check (which still passes) and in serve's log; the agent's, the container's and the build's are not"
    )
    func variables() throws {
        let environment = [
            "PUSHGATE_LISTN": "127.0.0.1:1", "PUSHGATE_HEALTHCHECK_PORT": "9197", "PUSHGATE_SEQ": "1",
            "PUSHGATE_REGISTRATION_SECRET": "a-registration-secret",
        ]
        let warning = "PUSHGATE_LISTN: no such setting, ignored; did you mean PUSHGATE_LISTEN?"
        let check = try runPushgate(["config", "check"], environment: environment)
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.hasSuffix("configuration OK\n"))
        #expect(check.stderr.contains("warning: \(warning)\n"), "\(check.stderr)")
        for variable in ["PUSHGATE_HEALTHCHECK_PORT", "PUSHGATE_SEQ", "PUSHGATE_REGISTRATION_SECRET"] {
            #expect(!check.stderr.contains(variable), "\(check.stderr)")
        }
        let gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--log-format", "json"],
            listeners: 1,
            environment: environment
        )
        #expect(gateway.stop() == 0)
        let line = gateway.logged.split(separator: "\n").first { $0.contains("PUSHGATE_LISTN") }
        #expect(line?.contains(#""level":"warning""#) == true && line?.contains(warning) == true, "\(gateway.logged)")
    }
}

/// `serve --help` at the width it is shown in: every line breaks where the next word would not
/// fit, none mid-sentence, and each setting's names, continued, stay apart from the next.
@Suite("serve --help: wrapped for the screen", .timeLimit(.minutes(1)))
struct ServeHelpCLITests {
    @Test("no line breaks early or runs over, at 80, 100 and 60 columns", arguments: [80, 100, 60])
    func wrapping(columns: Int) throws {
        let help = try runPushgate(["serve", "--help"], environment: ["COLUMNS": "\(columns)"])
        #expect(help.status == 0)
        let lines = help.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let settings = try #require(lines.firstIndex { $0.hasPrefix("SETTINGS") })
        func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
        for (index, line) in lines.enumerated() {
            #expect(line.count < columns, "line \(index) runs over \(columns) columns: \(line)")
            guard index + 1 < lines.count, !line.isEmpty, !lines[index + 1].isEmpty else { continue }
            let next = lines[index + 1]
            // The same paragraph goes on: free text at one indentation; in the settings, a
            // setting's names (indent 2) go on at 4, its help (6) at 6.
            let continued =
                index < settings
                ? indent(next) == indent(line)
                : (indent(line) == 2 && indent(next) == 4) || (indent(line) >= 4 && indent(next) == indent(line))
            guard continued else { continue }
            let nextWord = next.drop { $0 == " " }.prefix { $0 != " " }
            #expect(
                line.count + 1 + nextWord.count >= columns - 1,
                "line \(index) breaks before \"\(nextWord)\" would have to: \(line)"
            )
        }
        #expect(help.stdout.contains("--listen HOST:PORT, PUSHGATE_LISTEN"))
    }
}
