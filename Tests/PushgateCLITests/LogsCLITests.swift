import Foundation
import Testing

/// `--log-format json` at the most talkative level (issue 23, logs): every line is one JSON
/// object; lines about one push or one device carry its `apns-id` or `device`; and while a
/// device is created with the registration secret, registers, receives a push signed with a
/// provider key, acks, and is deleted, and the admin API is called with its token, no secret
/// reaches the log: not the registration secret, the admin token, the device's secret, the
/// provider's JWT, nor the key it was signed with.
@Suite("Logs: JSON lines with apns-id and device, never a secret", .serialized, .timeLimit(.minutes(3)))
struct LogsCLITests {
    static let topic = "com.example.logs"
    static let teamID = "TEAM123456"
    static let keyID = ProviderAuthCLITests.keyID

    @Test(
        "trace-level JSON logs of registration, pushes, acks, admin calls and a deletion hold no secret; a refused push's line has its apns-id"
    )
    func noSecretInTheLog() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let registrationSecret = "registration-\(UUID().uuidString)"
        let adminToken = "admin-\(UUID().uuidString)"
        let key = try ProviderAuthCLITests.makeSigningKey(in: directory)
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--log-format", "json", "--log-level", "trace",
                "--registration-secret-file",
                try Self.secretFile(directory + "/registration-secret", registrationSecret),
                "--admin-token-file", try Self.secretFile(directory + "/admin-token", adminToken),
                "--provider-key", "\(Self.teamID):\(Self.keyID):\(key):\(Self.topic)",
            ],
            listeners: 1
        )
        let url = gateway.urls[0]
        let agent = try AgentProcess(
            server: url,
            identity: directory + "/device.json",
            topic: Self.topic,
            environment: ["PUSHGATE_REGISTRATION_SECRET": registrationSecret]
        )
        let token = try #require(try agent.next()["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")
        let identity = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/device.json")))
                as? [String: Any]
        )
        let deviceID = try #require(identity["deviceId"] as? String)
        let deviceSecret = try #require(identity["secret"] as? String)

        let jwtCache = directory + "/provider.jwt"
        func send(_ arguments: [String]) throws -> ToolRun {
            try runPushgate(
                [
                    "send", "--server", url, "--token", token, "--topic", Self.topic, "--key", key, "--key-id",
                    Self.keyID, "--team-id", Self.teamID, "--token-cache", jwtCache,
                ]
                    + arguments
            )
        }
        let delivered = try send([#"{"aps":{"alert":"logged"}}"#])
        #expect(
            delivered.status == 0 && delivered.stdout.contains("status: 200"),
            "\(delivered.stdout) \(delivered.stderr)"
        )
        #expect(try agent.next()["topic"] as? String == Self.topic)
        let refusedID = UUID().uuidString.lowercased()
        let refused = try send([
            "--apns-id", refusedID, "--push-type", "background", "--priority", "10",
            #"{"aps":{"content-available":1}}"#,
        ])
        #expect(refused.stdout.contains("BadPriority"), "\(refused.stdout) \(refused.stderr)")
        let jwt = try #require(
            try String(contentsOfFile: jwtCache, encoding: .utf8).split(separator: " ").last.map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
        )

        let device = ["-H", "authorization: bearer \(deviceSecret)"]
        #expect(
            try Self.curl(
                device + [
                    "--http2-prior-knowledge", "-X", "POST", "-d", #"{"upTo":1}"#, "\(url)/v1/devices/\(deviceID)/ack",
                ]
            ) == 204
        )
        let admin = ["-H", "authorization: bearer \(adminToken)"]
        #expect(try Self.curl(admin + ["\(url)/v1/admin/stats"]) == 200)
        #expect(try Self.curl(admin + ["\(url)/v1/admin/devices/\(deviceID)"]) == 200)
        #expect(try Self.curl(admin + ["\(url)/metrics"]) == 200)
        #expect(try Self.curl(admin + ["-X", "POST", "\(url)/v1/admin/reload"]) == 200)
        #expect(
            try Self.curl(device + ["--http2-prior-knowledge", "-X", "DELETE", "\(url)/v1/devices/\(deviceID)"]) == 204
        )
        #expect(gateway.stop() == 0)

        let log = gateway.logged
        let lines = log.split(separator: "\n")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(
            objects.count == lines.count,
            "every line is one JSON object: \(lines.filter { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) == nil }.prefix(3))"
        )
        #expect(objects.contains { $0["level"] as? String == "trace" }, "the log is at trace level")
        let keyBody = try String(contentsOfFile: key, encoding: .utf8).split(separator: "\n").filter {
            !$0.hasPrefix("-----")
        }
        let secrets = [
            "registration secret": registrationSecret, "admin token": adminToken, "device secret": deviceSecret,
            "provider JWT": jwt,
        ]
        .merging(keyBody.enumerated().map { ("provider key line \($0.offset)", String($0.element)) }) { $1 }
        #expect(secrets.filter { log.contains($0.value) }.keys.sorted() == [], "secrets in the log")
        // The JWT's first part (its header), whoever's it would be.
        #expect(!log.contains(String(jwt.prefix { $0 != "." })), "a JWT header is in the log")

        func line(_ message: String) -> [String: Any]? { objects.first { $0["message"] as? String == message } }
        let refusal = try #require(line("push refused"), "no line for the refused push")
        #expect(
            refusal["apns-id"] as? String == refusedID && refusal["push.reason"] as? String == "BadPriority",
            "\(refusal)"
        )
        for message in ["device created", "app registered", "event stream opened", "device deleted"] {
            #expect(line(message)?["device"] as? String == deviceID, "\(message): \(line(message) ?? [:])")
        }
    }

    @Test(
        "a gateway that cannot start says why in its log format: settings that cannot run exit 64 (the unit does not restart on it), a store it cannot create exits 1"
    )
    func startRefusals() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data().write(to: URL(fileURLWithPath: directory + "/file"))
        // Refused before binding: 192.0.2.1 (TEST-NET-1) could not be bound anyway, so a
        // regression fails with a bind error rather than serving.
        let exposed = ["serve", "--listen", "192.0.2.1:0", "--data-dir", directory + "/data"]
        let noStore = ["serve", "--listen", "127.0.0.1:0", "--data-dir", directory + "/file/data"]
        // A value the flags' own checks refuse, before anything else is looked at.
        let badValue = ["serve", "--listen", "127.0.0.1:0", "--data-dir", directory + "/data", "--threads", "0"]
        for (arguments, status, reason) in [
            (exposed, Int32(64), "refusing to listen on 192.0.2.1"),
            (noStore, 1, "cannot use \(directory)/file/data as the store directory"),
            (badValue, 64, "--threads: is 0; must be 1 to 1024"),
        ] {
            let text = try runPushgate(arguments, timeout: .seconds(30))
            #expect(
                text.status == status && text.stderr.contains("Error: \(reason)"),
                "\(arguments): \(text.status) \(text.stderr)"
            )
            let json = try runPushgate(arguments + ["--log-format", "json"], timeout: .seconds(30))
            #expect(json.status == status, "\(arguments): \(json.status) \(json.stderr)")
            let lines = json.stderr.split(separator: "\n")
            #expect(
                lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil },
                "not all JSON: \(json.stderr)"
            )
            let last = try #require(
                lines.last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            )
            #expect(
                last["level"] as? String == "critical" && (last["message"] as? String)?.contains(reason) == true,
                "\(last)"
            )
        }
    }

    /// A secret's file, readable by the gateway's user only.
    static func secretFile(_ path: String, _ secret: String) throws -> String {
        try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        try Unprivileged.handOver(path)
        return path
    }

    /// curl's status code.
    static func curl(_ arguments: [String]) throws -> Int {
        let result = try run("curl", ["-sS", "--max-time", "30", "-o", "/dev/null", "-w", "%{http_code}"] + arguments)
        return Int(result.stdout) ?? -1
    }
}
