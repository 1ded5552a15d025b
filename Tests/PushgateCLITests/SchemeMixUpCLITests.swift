import Foundation
import Testing

/// http:// given for a TLS port, https:// for a cleartext one: send, bench and the agent say
/// which, with the URL to use instead, every time (not in one try of six, as timing allowed).
@Suite(
    "send, bench, agent: http:// to a TLS port and https:// to a cleartext one",
    .serialized,
    .timeLimit(.minutes(3))
)
struct SchemeMixUpCLITests {
    /// The wrong URL for each listener of `gateway`, and what must be said of it.
    private func mixUps(_ gateway: GatewayProcess) throws -> [(server: String, message: String)] {
        let cleartext = try #require(gateway.urls[0].split(separator: "//").last.map(String.init))
        let tls = try #require(gateway.urls[1].split(separator: "//").last.map(String.init))
        return [
            (
                "http://\(tls)",
                "the server at \(tls) speaks TLS, not cleartext HTTP/2: use https://\(tls)"
            ),
            (
                "https://\(cleartext)",
                #"the server at \#(cleartext) speaks cleartext, not TLS (its answer began "HTTP/1.1 400 Bad Request"): use http://\#(cleartext)"#
            ),
        ]
    }

    @Test("send and bench: the same words, five times in a row each way")
    func sendAndBench() throws {
        let gateway = try GatewayProcess.cleartextAndTLS()
        defer { _ = gateway.stop() }
        let token = String(repeating: "ab", count: 32)
        for (server, message) in try mixUps(gateway) {
            let tls = ["--server", server, "--cacert", Fixtures.tls("ca.pem")]
            for attempt in 1...5 {
                let sent = try runPushgate(["send"] + tls + ["--token", token, "--topic", "com.example.app", "{}"])
                #expect(sent.status == 1)
                #expect(sent.stderr == "Error: \(message)\n", "send to \(server), attempt \(attempt)")
            }
            for attempt in 1...2 {
                let bench = try runPushgate(["bench"] + tls + ["--devices", "1", "--pushes", "1"])
                #expect(bench.status == 1)
                #expect(bench.stderr.hasPrefix("pushgate bench: creating 1 device\n"), "\(bench.stderr)")
                #expect(
                    bench.stderr.hasSuffix("Error: \(message)\n"),
                    "bench to \(server), attempt \(attempt): \(bench.stderr)"
                )
            }
        }
    }

    @Test("agent: the same words on each of several connections")
    func agent() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gateway = try GatewayProcess.cleartextAndTLS()
        defer { _ = gateway.stop() }
        for (server, message) in try mixUps(gateway) {
            for attempt in 1...3 {
                let said = try firstAgentError(
                    [
                        "agent", "--server", server, "--cacert", Fixtures.tls("ca.pem"), "--identity",
                        directory + "/device.json", "--topic", "com.example.app",
                    ]
                )
                #expect(said.contains(message), "agent to \(server), attempt \(attempt): \(said)")
            }
        }
    }

    /// The first line a `pushgate agent` run writes on stderr; the agent is killed then if it runs on.
    private func firstAgentError(_ arguments: [String]) throws -> String {
        let process = Unprivileged.process(arguments)
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let watchdog = killAfter(.seconds(60), process)
        defer {
            watchdog.cancel()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        var text = Data()
        while !text.contains(UInt8(ascii: "\n")) {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text.append(chunk)
        }
        return String(decoding: text, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
    }
}
