import Foundation
import Testing

/// The gateway as production runs it: its own user, no capabilities. When SwiftNIO's
/// `.socketOption(.tcp_nodelay)` (SO_DEBUG, which needs CAP_NET_ADMIN) was set on accepted
/// connections, a gateway started this way reset every connection while root's passed every test.
@Suite("pushgate serve as an unprivileged user", .serialized, .timeLimit(.minutes(3)))
struct UnprivilegedGatewayTests {
    static let topic = "com.example.unprivileged"

    @Test(
        "as a non-root user: curl over h2c, HTTP/1.1 and TLS, the walkthrough (agent, send), h2load pushes over h2c and TLS"
    )
    func servesWithoutPrivileges() throws {
        let gateway = try GatewayProcess.cleartextAndTLS()
        #expect(
            try Unprivileged.userID(of: gateway.process.processIdentifier) != 0,
            "the gateway under test runs as root"
        )

        let h2c = try run("curl", ["-sS", "-i", "--http2-prior-knowledge", gateway.urls[0] + "/healthz"])
        #expect(h2c.status == 0, "\(h2c.stderr)")
        #expect(h2c.stdout.hasPrefix("HTTP/2 200"), "\(h2c.stdout)")
        let http1 = try run("curl", ["-sS", "-i", gateway.urls[0] + "/healthz"])
        #expect(http1.status == 0, "\(http1.stderr)")
        #expect(http1.stdout.hasPrefix("HTTP/1.1 200 OK"), "\(http1.stdout)")
        let tlsURL = gateway.urls[1].replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let tls = try run("curl", ["-sS", "-i", "--http2", "--cacert", Fixtures.tls("ca.pem"), tlsURL + "/healthz"])
        #expect(tls.status == 0, "\(tls.stderr)")
        #expect(tls.stdout.hasPrefix("HTTP/2 200"), "\(tls.stdout)")

        // The walkthrough of the README and docs/getting-started.md, the agent and send unprivileged too.
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(server: gateway.urls[0], identity: directory + "/device.json", topic: Self.topic)
        let registered = try agent.next()
        let token = try #require(registered["token"] as? String, "\(registered)")
        #expect(try agent.next()["type"] as? String == "connected")
        let sent = try runPushgate([
            "send", "--server", tlsURL, "--cacert", Fixtures.tls("ca.pem"), "--token", token, "--topic", Self.topic,
            #"{"aps":{"alert":"hello"}}"#,
        ])
        #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        #expect(sent.stdout.contains("disposition: delivered"), "\(sent.stdout)")
        let received = try agent.next()
        #expect(received["topic"] as? String == Self.topic, "\(received)")
        #expect(received["delivery"] as? String == "immediate", "\(received)")

        // APNs POSTs from h2load, stored for a second device that never connects.
        let offline = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], Self.topic])
        let payload = directory + "/payload.json"
        try Data(#"{"aps":{"alert":"load"}}"#.utf8).write(to: URL(fileURLWithPath: payload))
        for (base, count) in [(gateway.urls[0], 2_000), (gateway.urls[1], 1_000)] {
            let load = try run(
                "h2load",
                [
                    "-n", "\(count)", "-c", "4", "-m", "10", "-d", payload, "-H", "apns-topic: \(Self.topic)",
                    "\(base)/3/device/\(offline.token)",
                ]
            )
            #expect(load.status == 0, "\(load.stderr)")
            #expect(load.stdout.contains("\(count) succeeded, 0 failed, 0 errored, 0 timeout"), "\(load.stdout)")
            #expect(load.stdout.contains("\(count) 2xx, 0 3xx, 0 4xx, 0 5xx"), "\(load.stdout)")
        }
        #expect(gateway.stop() == 0)
    }

    @Test(
        "a store directory the gateway's user cannot write is refused at start, naming it and what to do",
        .enabled(if: Unprivileged.dropsPrivileges, "needs root to make a directory the gateway's user cannot write")
    )
    func unwritableStoreDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-root-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o755]
        )
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try runPushgate(
            ["serve", "--listen", "127.0.0.1:0", "--data-dir", directory],
            timeout: .seconds(30)
        )
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot use the store directory \(directory)"), "\(result.stderr)")
        #expect(result.stderr.contains("chown"), "\(result.stderr)")
    }

    @Test(
        "a port below 1024 without CAP_NET_BIND_SERVICE is refused, saying how to grant it",
        .enabled(if: Unprivileged.dropsPrivileges, "needs root to run the gateway without the capability")
    )
    func privilegedPort() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try runPushgate(
            ["serve", "--listen", "127.0.0.1:443", "--data-dir", directory + "/data"],
            timeout: .seconds(30)
        )
        #expect(result.status != 0)
        #expect(result.stderr.contains("CAP_NET_BIND_SERVICE"), "\(result.stderr)")
    }
}
