import Foundation
import PushgateGateway
import PushgateTestFixtures
import PushgateTransport
import Testing

/// The one table of settings: names derived from it, precedence (flag > environment > file >
/// default), the file's keys checked with their lines, secrets from files, the documentation's copy.
@Suite("Settings: flags, environment, file")
struct SettingsTests {
    /// A scratch directory with a configuration file holding `json`.
    final class Scratch {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-settings-\(UUID().uuidString)"
        ).path
        var config: String { directory + "/pushgate.json" }

        init(_ json: String) throws {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try write("pushgate.json", json)
        }

        func write(_ name: String, _ text: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }
    }

    @Test("every flag serve had keeps its name; each name follows from the file key")
    func names() {
        let flags = Set(Settings.all.compactMap(\.flag) + Settings.all.compactMap(\.secretFileFlag))
        for flag in [
            "--listen", "--tls-listen", "--tls-cert", "--tls-key", "--tls-client-ca", "--tls-require-client-cert",
            "--config",
            "--provider-key", "--data-dir", "--idle-timeout", "--shutdown-timeout", "--threads", "--log-level",
            "--admin-listen",
            "--admin-token", "--admin-token-file", "--allow-insecure-cleartext", "--admin-only-on-admin-listener",
            "--metrics-topic-labels",
        ] {
            #expect(flags.contains(flag), "\(flag)")
        }
        let token = Settings.all.first { $0.key == "adminToken" }
        #expect(token?.environmentVariable == "PUSHGATE_ADMIN_TOKEN")
        #expect(token?.secretFileEnvironmentVariable == "PUSHGATE_ADMIN_TOKEN_FILE")
        #expect(token?.secretFileKey == "adminTokenFile")
        let burst = Settings.all.first { $0.key == "scheduler.appBurst" }
        #expect(burst?.flag == "--scheduler-app-burst")
        #expect(burst?.environmentVariable == "PUSHGATE_SCHEDULER_APP_BURST")
        #expect(Settings.all.first { $0.key == "tlsClientCA" }?.environmentVariable == "PUSHGATE_TLS_CLIENT_CA")
        #expect(Set(Settings.all.map(\.key)).count == Settings.all.count, "one row per setting")
    }

    @Test("a flag wins over the environment, the environment over the file, the file over the default")
    func precedence() throws {
        let scratch = try Scratch(
            #"{"threads": 3, "idleTimeout": 30, "logLevel": "debug", "shutdownTimeout": 7, "listen": ["127.0.0.1:1"]}"#
        )
        let resolved = ResolvedSettings(
            arguments: ["--config", scratch.config, "--threads", "5", "--listen=127.0.0.1:3"],
            environment: [
                "PUSHGATE_THREADS": "4", "PUSHGATE_IDLE_TIMEOUT": "40", "PUSHGATE_LISTEN": "127.0.0.1:2 127.0.0.1:22",
            ]
        )
        let configuration = try resolved.checked()
        #expect(configuration.threads == 5)  // flag over environment and file
        #expect(configuration.idleTimeoutSeconds == 40)  // environment over file
        #expect(configuration.logLevel == "debug")  // file over default
        #expect(configuration.shutdownTimeoutSeconds == 7)
        #expect(configuration.dataDirectory == "./pushgate-data")  // default
        #expect(configuration.listen == [ListenAddress(host: "127.0.0.1", port: 3)])
        let origins = Dictionary(
            uniqueKeysWithValues: resolved.entries.map { ($0.setting.key, $0.origins.map(\.description)) }
        )
        #expect(origins["threads"] == ["--threads"])
        #expect(origins["idleTimeout"] == ["PUSHGATE_IDLE_TIMEOUT"])
        #expect(origins["logLevel"] == ["\(scratch.config):1"])
        #expect(origins["dataDir"] == [])

        let fromEnvironment = try ResolvedSettings(
            arguments: [],
            environment: ["PUSHGATE_LISTEN": "127.0.0.1:2 [::1]:22"]
        ).checked()
        #expect(fromEnvironment.listen == [ListenAddress(host: "127.0.0.1", port: 2), ListenAddress("[::1]:22")])
    }

    @Test("toggles: a bare flag, true/false in the file and the environment")
    func toggles() throws {
        let scratch = try Scratch(#"{"metricsTopicLabels": true, "allowInsecureCleartext": true}"#)
        let configuration = try ResolvedSettings(
            arguments: ["--config", scratch.config, "--tls-require-client-cert"],
            environment: ["PUSHGATE_ALLOW_INSECURE_CLEARTEXT": "false"]
        ).checked()
        #expect(configuration.metricsTopicLabels)
        #expect(!configuration.allowInsecureCleartext)
        #expect(configuration.tlsRequireClientCertificate)
    }

    @Test(
        "databaseURL is a secret: its four forms, the file's final newline dropped, never shown; without it SQLite"
    )
    func databaseURL() throws {
        let url = "postgresql://gw:p%40ss%3A%2F%25%3F%23%26%3D%20w@db.internal:5433/pushgate?sslmode=verify-full"
        let scratch = try Scratch(#"{"databaseURLFile": "url.txt"}"#)
        try scratch.write("url.txt", url + "\n")
        let setting = Settings.all.first { $0.key == "databaseURL" }
        #expect(setting?.flag == "--database-url")
        #expect(setting?.secretFileFlag == "--database-url-file")
        #expect(setting?.environmentVariable == "PUSHGATE_DATABASE_URL")
        #expect(setting?.secretFileEnvironmentVariable == "PUSHGATE_DATABASE_URL_FILE")
        #expect(setting?.isSecret == true)
        for (arguments, environment) in [
            (["--config", scratch.config], [String: String]()),
            (["--database-url-file", scratch.directory + "/url.txt"], [:]),
            ([], ["PUSHGATE_DATABASE_URL_FILE": scratch.directory + "/url.txt"]),
            ([], ["PUSHGATE_DATABASE_URL": url]),
            (["--database-url", url], [:]),
        ] {
            let resolved = ResolvedSettings(arguments: arguments, environment: environment)
            #expect(try resolved.checked().databaseURL == url, "\(arguments) \(environment)")
            let shown = resolved.entries.map { "\($0.setting.key)=\($0.value)" }.joined(separator: "\n")
            #expect(shown.contains("databaseURL=<redacted>"))
            #expect(!shown.contains("p%40ss"))
        }
        #expect(try ResolvedSettings(arguments: [], environment: [:]).checked().databaseURL == nil)
        let empty = ResolvedSettings(arguments: ["--database-url", " "], environment: [:])
        #expect(empty.problems.map(\.description) == ["--database-url: is empty"])
    }

    @Test(
        "secrets come from files: *_FILE variables and ...File keys (relative to the config file); given twice at one level is an error"
    )
    func secretFiles() throws {
        let scratch = try Scratch(#"{"registrationSecretFile": "secret.txt", "adminToken": "from-the-file"}"#)
        try scratch.write("secret.txt", "  a-registration-secret-long-enough\n")
        try scratch.write("token.txt", "token-from-a-file\n")
        let resolved = ResolvedSettings(
            arguments: ["--config", scratch.config],
            environment: ["PUSHGATE_ADMIN_TOKEN_FILE": scratch.directory + "/token.txt"]
        )
        let configuration = try resolved.checked()
        #expect(configuration.policy.registrationSecret == "a-registration-secret-long-enough")
        #expect(configuration.adminToken == "token-from-a-file")
        for entry in resolved.entries where entry.setting.isSecret && !entry.origins.isEmpty {
            #expect(entry.value == "<redacted>")
        }

        let twice = ResolvedSettings(
            arguments: ["--admin-token", "a", "--admin-token-file", scratch.directory + "/token.txt"],
            environment: [:]
        )
        #expect(
            twice.problems.map(\.description) == ["--admin-token and --admin-token-file: give the admin token once"]
        )
        let missing = ResolvedSettings(
            arguments: [],
            environment: ["PUSHGATE_REGISTRATION_SECRET_FILE": "/nonexistent/secret"]
        )
        #expect(
            missing.problems.map(\.description) == [
                "PUSHGATE_REGISTRATION_SECRET_FILE: /nonexistent/secret cannot be read: No such file or directory"
            ]
        )
        // The wrong file named: refused from its size (a 3 GB one was read whole, 6 GB of memory
        // and no end in sight), or from what it is.
        try scratch.write("huge.log", "")
        let handle = try #require(FileHandle(forWritingAtPath: scratch.directory + "/huge.log"))
        try handle.truncate(atOffset: 3 << 30)
        try handle.close()
        let huge = ResolvedSettings(
            arguments: ["--admin-token-file", scratch.directory + "/huge.log"],
            environment: [:]
        )
        #expect(
            huge.problems.map(\.description) == [
                "--admin-token-file: \(scratch.directory)/huge.log holds more than 65536 bytes, the limit for this file: is it the right one?"
            ]
        )
        let device = ResolvedSettings(arguments: ["--config", "/dev/zero"], environment: [:])
        #expect(
            device.problems.map(\.description) == [
                "/dev/zero: is not a regular file (a directory, a device or a pipe); name the file itself"
            ]
        )
    }

    @Test(
        "an admin token no request could carry is refused, without showing it: a newline inside, a space, past 1024 bytes"
    )
    func unusableAdminTokens() throws {
        let scratch = try Scratch("{}")
        try scratch.write("two-lines.txt", "first-half\nsecond-half\n")
        try scratch.write("long.txt", String(repeating: "x", count: 1025))
        try scratch.write("fine.txt", "a-fine-token\n")
        let tokenFile = { (name: String) in
            ResolvedSettings(arguments: ["--admin-token-file", scratch.directory + "/" + name], environment: [:])
        }
        let twoLines = tokenFile("two-lines.txt").problems.map(\.description)
        #expect(
            twoLines.count == 1 && twoLines[0].contains("control or a non-ASCII character at byte 11 of 22"),
            "\(twoLines)"
        )
        #expect(!twoLines.joined().contains("half"))
        #expect(
            tokenFile("long.txt").problems.map(\.description).first?.contains("is 1025 bytes; a token is at most 1024")
                == true
        )
        #expect(tokenFile("fine.txt").problems.isEmpty)
        #expect(try tokenFile("fine.txt").checked().adminToken == "a-fine-token")
        let spaced = ResolvedSettings(arguments: [], environment: ["PUSHGATE_ADMIN_TOKEN": "two words"]).problems.map(
            \.description
        )
        #expect(spaced.count == 1 && spaced[0].hasPrefix("PUSHGATE_ADMIN_TOKEN: has a space"), "\(spaced)")
    }

    @Test("a required field of a provider key spelt wrong is named as the misspelling, not only as missing")
    func misspeltRequiredField() throws {
        let scratch = try Scratch(
            "{\"providerKeys\": [\n  {\"teamId\": \"TEAM000001\", \"keyID\": \"KEY0000001\", \"privateKeyFile\": \"k.p8\", \"topics\": [\"a\"]}\n]}"
        )
        let problems = ResolvedSettings(arguments: ["--config", scratch.config], environment: [:]).problems.map(
            \.description
        )
        #expect(
            problems == [
                "\(scratch.config):2:28: providerKeys[0].keyID: unknown key; did you mean \"keyId\"? (\"keyId\" is required)"
            ],
            "\(problems)"
        )
    }

    @Test("a key given twice in one object, anywhere in the file, is an error at the second")
    func duplicateKeys() throws {
        let scratch = try Scratch(
            "{\n  \"scheduler\": {\"appBurst\": 3,\n    \"appBurst\": 5},\n  \"providerKeys\": [{\"teamId\": \"A\", \"teamId\": \"B\"}]\n}"
        )
        let problems = ResolvedSettings(arguments: ["--config", scratch.config], environment: [:]).problems.map(
            \.description
        )
        #expect(
            problems.contains(
                "\(scratch.config):3:5: scheduler.appBurst: given twice (first at line 2); give each key once"
            ),
            "\(problems)"
        )
        #expect(problems.contains { $0.contains("providerKeys[0].teamId: given twice") }, "\(problems)")
    }

    @Test("a scheduler override keyed by something no topic can be is refused, saying why")
    func overrideOfNoTopic() throws {
        let scratch = try Scratch(
            #"{"scheduler": {"topics": {"com.example.ok": {"appBurst": 2}, "bad topic!": {"appBurst": 1}}}}"#
        )
        let problems = ResolvedSettings(arguments: ["--config", scratch.config], environment: [:]).problems.map(
            \.description
        )
        #expect(
            problems.count == 1
                && problems[0].contains(
                    #"scheduler.topics is keyed by topics, and the topic "bad topic!" may contain only letters"#
                ),
            "\(problems)"
        )
        let fine = try Scratch(#"{"scheduler": {"topics": {"com.example.ok": {"appBurst": 2}}}}"#)
        #expect(ResolvedSettings(arguments: ["--config", fine.config], environment: [:]).problems.isEmpty)
    }

    @Test("unknown keys anywhere are errors at their line, with the closest known key")
    func unknownKeys() throws {
        let scratch = try Scratch(
            """
            {
              "listen": ["127.0.0.1:0"],
              "logLevl": "debug",
              "scheduler": {
                "appBrust": 3,
                "topics": {
                  "com.example.news": {
                    "appBurst": 6,
                    "maxHeldPerAp": 2
                  }
                }
              },
              "providerKeys": [
                {"teamId": "TEAM000001", "keyId": "KEY0000001", "privateKeyFile": "k.p8",
                 "topics": ["com.example.app"], "enviroment": "production"}
              ],
              "zzzz": 1
            }
            """
        )
        let problems = ResolvedSettings(arguments: ["--config", scratch.config], environment: [:]).problems.map(
            \.description
        )
        let path = scratch.config
        #expect(problems.contains("\(path):3:3: logLevl: unknown key; did you mean \"logLevel\"?"), "\(problems)")
        #expect(
            problems.contains("\(path):5:5: scheduler.appBrust: unknown key; did you mean \"appBurst\"?"),
            "\(problems)"
        )
        #expect(
            problems.contains(
                "\(path):9:9: scheduler.topics.com.example.news.maxHeldPerAp: unknown key; did you mean \"maxHeldPerApp\"?"
            ),
            "\(problems)"
        )
        #expect(
            problems.contains("\(path):15:37: providerKeys[0].enviroment: unknown key; did you mean \"environment\"?"),
            "\(problems)"
        )
        #expect(problems.contains("\(path):17:3: zzzz: unknown key"), "\(problems)")
        #expect(problems.count == 5, "\(problems)")
    }

    @Test("a wrong type or value names the line and column of the value; a syntax error its place")
    func wrongTypes() throws {
        let scratch = try Scratch(
            "{\n  \"threads\": \"two\",\n  \"listen\": \"127.0.0.1:1\",\n  \"scheduler\": {\"appBurst\": true},\n  \"logLevel\": \"loud\"\n}"
        )
        let problems = ResolvedSettings(arguments: ["--config", scratch.config], environment: [:]).problems.map(
            \.description
        )
        #expect(
            problems == [
                "\(scratch.config):3:13: listen: must be an array of strings, not a string",
                "\(scratch.config):2:14: threads: must be a whole number, not a string",
                "\(scratch.config):5:15: logLevel: \"loud\" is not one of trace, debug, info, notice, warning, error, critical",
                "\(scratch.config):4:29: scheduler.appBurst: must be a whole number, not true or false",
            ]
        )
        try scratch.write("pushgate.json", #"{"scheduler": 3}"#)
        let notAnObject = ResolvedSettings(arguments: ["--config", scratch.config], environment: [:]).problems.map(
            \.description
        )
        #expect(notAnObject == ["\(scratch.config):1:15: scheduler: must be an object ({...}), not a number"])
        try scratch.write("pushgate.json", "{\n  \"threads\": 2,\n  \"listen\": [\"a\" \"b\"]\n}")
        let syntax = ResolvedSettings(arguments: ["--config", scratch.config], environment: [:]).problems.map(
            \.description
        )
        #expect(syntax == ["\(scratch.config):3:18: not valid JSON: expected ',' or ']' in the array"])
    }

    @Test(
        "flags: unknown ones suggest the closest (their value, maybe a secret, is not echoed); a bad value names the flag or variable"
    )
    func badFlags() {
        let problems = ResolvedSettings(
            arguments: [
                "--lisen", "127.0.0.1:1", "--admin-tokn", "a-secret", "127.0.0.2:2", "--threads", "0",
                "--unauthenticated-idle-timeout", "9999999999",
            ],
            environment: ["PUSHGATE_IDLE_TIMEOUT": "soon"]
        ).problems.map(\.description)
        #expect(
            problems == [
                "--lisen: unknown flag; did you mean --listen?",
                "--admin-tokn: unknown flag; did you mean --admin-token?",
                "127.0.0.2:2: unexpected argument: every setting is a flag with a name (--listen HOST:PORT)",
                "PUSHGATE_IDLE_TIMEOUT: \"soon\" is not a whole number",
                // Written to mean "never": refused, naming the range.
                "--unauthenticated-idle-timeout: is 9999999999; must be 1 to 31536000",
                "--threads: is 0; must be 1 to 1024",
            ]
        )
    }

    @Test(
        "flags no spelling is close to: the flags holding their words (--tls-ca), or those whose value they name (--port), three and a pointer to more"
    )
    func flagSuggestions() {
        let problems = ResolvedSettings(
            arguments: ["--tls-ca", "ca.pem", "--port", "2197", "--cert", "c.pem", "--timeout", "5", "--xyz", "1"],
            environment: [:]
        ).problems.map(\.description)
        #expect(
            problems == [
                "--tls-ca: unknown flag; did you mean --tls-client-ca?",
                "--port: unknown flag; did you mean --listen HOST:PORT, --tls-listen HOST:PORT or --admin-listen HOST:PORT?",
                "--cert: unknown flag; did you mean --tls-cert or --tls-require-client-cert?",
                "--timeout: unknown flag; did you mean --database-statement-timeout-ms, --idle-timeout, --unauthenticated-idle-timeout or another of serve --help?",
                "--xyz: unknown flag",
            ]
        )
    }

    @Test(
        "PUSHGATE_* variables no setting reads are warned about, with a likely meant one; what the agent, the container and the build read is not"
    )
    func unknownVariables() {
        let resolved = ResolvedSettings(
            arguments: [],
            environment: [
                "PUSHGATE_LISTN": "127.0.0.1:1", "PUSHGATE_PORT": "2197", "PUSHGATE_WHATEVER": "1",
                "PUSHGATE_REGISTRATION_SECRET": "s", "PUSHGATE_SEQ": "1", "PUSHGATE_TOPIC": "t",
                "PUSHGATE_APNS_ID": "a",
                "PUSHGATE_HEALTHCHECK_PORT": "9197", "PUSHGATE_SYSTEM_MALLOC": "1", "PUSHGATE_SANITIZE": "address",
                "HOME": "/root",
            ]
        )
        #expect(
            resolved.warnings.map(\.description) == [
                "PUSHGATE_LISTN: no such setting, ignored; did you mean PUSHGATE_LISTEN?",
                "PUSHGATE_PORT: no such setting, ignored; did you mean PUSHGATE_LISTEN=HOST:PORT, PUSHGATE_TLS_LISTEN=HOST:PORT or PUSHGATE_ADMIN_LISTEN=HOST:PORT?",
                "PUSHGATE_WHATEVER: no such setting, ignored",
            ]
        )
        #expect(resolved.problems.isEmpty, "a warning, not a refusal: \(resolved.problems)")
    }

    @Test("provider keys add up: flag, environment and file; file paths resolve against the file's directory")
    func providerKeys() throws {
        let scratch = try Scratch(
            #"{"providerKeys": [{"teamId": "T1", "keyId": "K1", "privateKeyFile": "k1.p8", "topics": ["a"]}]}"#
        )
        let configuration = try ResolvedSettings(
            arguments: ["--config", scratch.config, "--provider-key", "T2:K2:/keys/k2.p8:b,c"],
            environment: ["PUSHGATE_PROVIDER_KEYS": "T3:K3:/keys/k3.p8:d"]
        ).checked()
        #expect(configuration.policy.providerKeys.map(\.keyID) == ["K2", "K3", "K1"])
        #expect(configuration.policy.providerKeys[2].privateKeyFile == scratch.directory + "/k1.p8")
        #expect(configuration.policy.providerKeys[0].topics == ["b", "c"])
    }

    @Test("docs/configuration.md's table is the code's table")
    func documentedTable() throws {
        let page = TestFixtures.file("docs/configuration.md")
        let text = try String(contentsOf: page, encoding: .utf8)
        let begin = "<!-- settings table: generated from Settings.markdownReference -->\n"
        let end = "\n<!-- end of settings table -->"
        let start = try #require(text.range(of: begin), "docs/configuration.md lacks the settings table's markers")
        let stop = try #require(text.range(of: end, range: start.upperBound..<text.endIndex))
        let table = String(text[start.upperBound..<stop.lowerBound])
        #expect(
            table == Settings.markdownReference,
            "docs/configuration.md's settings table differs from the code's: replace it with `swift run pushgate config reference`'s output"
        )
    }
}
