import Foundation
import Testing

/// The registration secret from a file for `agent` and `bench`, as `serve` takes its secrets: a
/// secret on the command line shows in `ps` to every user of the machine.
@Suite("agent and bench: the registration secret from a file", .serialized, .timeLimit(.minutes(2)))
struct RegistrationSecretFileCLITests {
    static let secret = "a-registration-secret-from-a-file"
    static let topic = "com.example.secretfile"

    /// The secret as platforms write it (an editor, `echo`, a Kubernetes secret): a final newline.
    private func secretFile(in directory: String, _ content: String = secret + "\n") throws -> String {
        let path = directory + "/registration-secret"
        try Data(content.utf8).write(to: URL(fileURLWithPath: path))
        try Unprivileged.handOver(path)
        return path
    }

    @Test("agent --registration-secret-file creates its device; the file's final newline is not part of the secret")
    func agent() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gateway = try GatewayProcess.withRegistrationSecret(Self.secret, in: directory)
        defer { _ = gateway.stop() }
        let agent = try AgentProcess(
            server: gateway.urls[0],
            identity: directory + "/device.json",
            topic: Self.topic,
            arguments: ["--registration-secret-file", try secretFile(in: directory)]
        )
        #expect(try agent.next()["type"] as? String == "registered")
        #expect(try agent.next()["type"] as? String == "connected")
    }

    @Test("bench takes the file from PUSHGATE_REGISTRATION_SECRET_FILE, as serve does")
    func bench() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gateway = try GatewayProcess.withRegistrationSecret(Self.secret, in: directory)
        defer { _ = gateway.stop() }
        let run = try runPushgate(
            [
                "bench", "--server", gateway.urls[0], "--devices", "2", "--providers", "1", "--pushes", "10",
                "--drain-seconds", "30", "--topic", Self.topic,
            ],
            environment: ["PUSHGATE_REGISTRATION_SECRET_FILE": try secretFile(in: directory)]
        )
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains(#""accepted":10,"#), "\(run.stdout)")
    }

    @Test(
        "a file that cannot be used, or the secret given twice, stops agent and bench before they connect, in serve's words"
    )
    func refusals() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let empty = try secretFile(in: directory, " \n")
        let cases: [(arguments: [String], environment: [String: String], message: String)] = [
            (
                ["--registration-secret-file", directory + "/missing"], [:],
                "--registration-secret-file: \(directory)/missing cannot be read: No such file or directory"
            ),
            (["--registration-secret-file", empty], [:], "--registration-secret-file: \(empty) is empty"),
            (
                ["--registration-secret-file", empty, "--registration-secret", "x"], [:],
                "--registration-secret and --registration-secret-file: give the registration secret once"
            ),
            (
                [], ["PUSHGATE_REGISTRATION_SECRET_FILE": empty, "PUSHGATE_REGISTRATION_SECRET": "x"],
                "PUSHGATE_REGISTRATION_SECRET and PUSHGATE_REGISTRATION_SECRET_FILE: give the registration secret once"
            ),
        ]
        for (arguments, environment, message) in cases {
            for command in [
                ["agent", "--identity", directory + "/device.json", "--topic", Self.topic],
                ["bench", "--devices", "1", "--pushes", "1"],
            ] {
                let run = try runPushgate(
                    command + ["--server", "http://127.0.0.1:1"] + arguments,
                    environment: environment,
                    timeout: .seconds(30)
                )
                #expect(run.status == 64, "\(command[0]) \(arguments): \(run.stderr)")
                #expect(run.stderr.contains("Error: \(message)\n"), "\(command[0]) \(arguments): \(run.stderr)")
            }
        }
    }
}
