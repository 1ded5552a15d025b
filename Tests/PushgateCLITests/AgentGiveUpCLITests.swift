import Foundation
import Testing

/// Failures no retry can fix end the agent with status 1 and the reason (a certificate that does
/// not verify, a name the certificate does not carry, a handshake the gateway refuses, the wrong
/// scheme); `--retry-forever` keeps a supervised agent trying; a gateway that is not there is
/// still waited for with back-off.
@Suite("pushgate agent: giving up on what retrying cannot fix", .serialized, .timeLimit(.minutes(3)))
struct AgentGiveUpCLITests {
    static let topic = "com.example.giveup"

    /// What an agent run wrote on stderr, read until `lines` lines or its exit (by default, its
    /// exit); `status` is nil when it was still running then (it is killed).
    private func agent(
        _ server: String,
        _ extra: [String],
        lines: Int = .max
    ) throws -> (
        lines: [String], status: Int32?
    ) {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = Unprivileged.process(
            ["agent", "--server", server, "--identity", directory + "/device.json", "--topic", Self.topic] + extra
        )
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let watchdog = killAfter(.seconds(60), process)
        defer { watchdog.cancel() }
        var text = Data()
        var ended = false
        while text.filter({ $0 == UInt8(ascii: "\n") }).count < lines {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty {
                ended = true
                break
            }
            text.append(chunk)
        }
        if !ended { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let said = String(decoding: text, as: UTF8.self).split(separator: "\n").map(String.init)
        return (said, ended ? process.terminationStatus : nil)
    }

    @Test(
        "a certificate that does not verify, an address it does not name, a handshake refused for want of a client certificate: exit 1 with the reason",
        arguments: ["untrusted", "mismatch", "refused"]
    )
    func givesUp(_ failure: String) throws {
        let certificate = ["--tls-cert", Fixtures.tls("server.pem"), "--tls-key", Fixtures.tls("server-key.pem")]
        let (gateway, trust, reason): (GatewayProcess, String, String)
        switch failure {
        case "untrusted":
            gateway = try GatewayProcess(arguments: ["--tls-listen", "127.0.0.1:0"] + certificate, listeners: 1)
            (trust, reason) = ("other-ca.pem", "peer certificate: unable to get local issuer certificate")
        case "mismatch":
            // The certificate names 127.0.0.1, not 127.0.0.2.
            gateway = try GatewayProcess(arguments: ["--tls-listen", "127.0.0.2:0"] + certificate, listeners: 1)
            (trust, reason) = ("ca.pem", "peer certificate: IP address mismatch")
        default:
            gateway = try GatewayProcess(
                arguments: [
                    "--tls-listen", "127.0.0.1:0", "--tls-client-ca", Fixtures.tls("ca.pem"),
                    "--tls-require-client-cert",
                ]
                    + certificate,
                listeners: 1
            )
            (trust, reason) = ("ca.pem", "alert certificate required")
        }
        defer { _ = gateway.stop() }
        let run = try agent(gateway.urls[0], ["--cacert", Fixtures.tls(trust)])
        #expect(run.status == 1, "\(run.lines)")
        let said = run.lines.joined(separator: "\n")
        #expect(said.hasPrefix("Error: "), "\(said)")
        #expect(said.contains(reason), "\(said)")
        #expect(said.hasSuffix("; retrying will not fix this (--retry-forever retries anyway)"), "\(said)")
    }

    @Test("http:// to a TLS port: exit 1 with the URL to use")
    func wrongScheme() throws {
        let gateway = try GatewayProcess.cleartextAndTLS()
        defer { _ = gateway.stop() }
        let tls = try #require(gateway.urls[1].split(separator: "//").last.map(String.init))
        let run = try agent("http://\(tls)", [])
        #expect(run.status == 1, "\(run.lines)")
        #expect(run.lines.first?.contains("use https://\(tls)") == true, "\(run.lines)")
    }

    @Test("--retry-forever: a certificate that does not verify is retried with back-off, as a supervised agent wants")
    func retryForever() throws {
        let gateway = try GatewayProcess.cleartextAndTLS()
        defer { _ = gateway.stop() }
        let run = try agent(gateway.urls[1], ["--cacert", Fixtures.tls("other-ca.pem"), "--retry-forever"], lines: 2)
        #expect(run.status == nil, "the agent ended: \(run.lines)")
        for line in run.lines {
            #expect(
                line.hasPrefix("pushgate agent: connection to \(gateway.urls[1]) lost (TLS handshake failed"),
                "\(line)"
            )
            #expect(line.contains("unable to get local issuer certificate") && line.contains("; reconnecting in "))
        }
    }

    @Test("a gateway that is not there (yet) is waited for with back-off")
    func transientKeepsTrying() throws {
        let run = try agent("http://127.0.0.1:1", [], lines: 2)
        #expect(run.status == nil, "the agent ended: \(run.lines)")
        for line in run.lines {
            #expect(
                line.hasPrefix(
                    "pushgate agent: connection to http://127.0.0.1:1 lost (cannot connect to 127.0.0.1:1: connection refused)"
                ),
                "\(line)"
            )
        }
    }

    @Test(
        "--server more than once: a gateway that is not there is passed over for the next, and a certificate no retry fixes ends the agent only once every gateway has failed so"
    )
    func severalServers() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = gateway.stop() }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(
            server: "http://127.0.0.1:1",
            identity: directory + "/device.json",
            topic: Self.topic,
            arguments: ["--server", gateway.urls[0]],
            capturingErrors: true
        )
        #expect(try agent.next()["type"] as? String == "registered")
        #expect(try agent.next()["type"] as? String == "connected")
        let said = agent.exitMessages()
        #expect(
            said.hasPrefix(
                "pushgate agent: connection to http://127.0.0.1:1 lost (cannot connect to 127.0.0.1:1: connection refused); connecting to \(gateway.urls[0]) in "
            ),
            "\(said)"
        )

        let tls = try GatewayProcess.cleartextAndTLS()
        defer { _ = tls.stop() }
        let untrusted = ["--cacert", Fixtures.tls("other-ca.pem"), "--server", tls.urls[1]]
        let run = try self.agent(tls.urls[1], untrusted)
        #expect(run.status == 1, "\(run.lines)")
        #expect(run.lines.count == 2, "one failure said per gateway, then the end: \(run.lines)")
        #expect(run.lines.last?.contains("retrying will not fix this") == true, "\(run.lines)")
    }
}
