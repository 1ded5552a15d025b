import Foundation
import Testing

/// Client-certificate authentication for `send` and `bench`, and the getting-started script that
/// makes every file TLS and provider authentication need with the openssl CLI and sends a push
/// each way: run here as it is, so that the commands it shows are known to work.
@Suite("send and bench: client certificates; the TLS and authentication script", .serialized, .timeLimit(.minutes(3)))
struct ProviderCertificateCLITests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs-snippets/tls-and-auth.sh")

    @Test(
        "docs-snippets/tls-and-auth.sh: a CA, server and provider certificates and a .p8 from openssl, a gateway, a device, a push by token and one by certificate"
    )
    func script() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Where the unprivileged user can read it.
        let script = directory + "/tls-and-auth.sh"
        try FileManager.default.copyItem(atPath: Self.script.path, toPath: script)
        try Unprivileged.handOver(script)
        let command = Unprivileged.command(executable: URL(fileURLWithPath: "/bin/sh"), [script, directory + "/demo"])
        let ran = try run(
            executable: command.executable,
            command.arguments,
            environment: [
                "PUSHGATE": Unprivileged.staged.binary.path, "PORT": "0", "XDG_CACHE_HOME": directory + "/cache",
            ],
            timeout: .seconds(120)
        )
        #expect(ran.status == 0, "stdout: \(ran.stdout)\nstderr: \(ran.stderr)")
        #expect(ran.stdout.components(separatedBy: "status: 200\n").count == 3, "\(ran.stdout)")
        #expect(ran.stdout.hasSuffix("the device received both pushes\n"), "\(ran.stdout)")
        // The provider certificate carries its topic where the gateway reads it.
        let subject = try PushgateCLITests.run(
            "openssl",
            ["x509", "-in", directory + "/demo/provider.pem", "-noout", "-subject"]
        )
        #expect(subject.stdout.contains("UID = com.example.app"), "\(subject.stdout)")
        // TLS only: a TLS listener and no --listen serves no cleartext.
        let listeners = try String(contentsOfFile: directory + "/demo/serve.out", encoding: .utf8)
        #expect(
            listeners.split(separator: "\n").count == 1 && listeners.hasPrefix("listening https://"),
            "\(listeners)"
        )
    }

    @Test(
        "send --cert with its key in the same file, and bench --cert on its provider connections only: accepted without a token; refused without the certificate"
    )
    func certificateInOneFile() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let both = directory + "/provider-both.pem"
        let pem =
            try String(contentsOfFile: Fixtures.tls("client.pem"), encoding: .utf8)
            + String(contentsOfFile: Fixtures.tls("client-key.pem"), encoding: .utf8)
        try Data(pem.utf8).write(to: URL(fileURLWithPath: both))
        try Unprivileged.handOver(both)
        let gateway = try GatewayProcess.cleartextAndTLS(["--tls-client-ca", Fixtures.tls("ca.pem")])
        defer { _ = gateway.stop() }
        // The fixture client certificate has UID=com.example.app.
        let topic = "com.example.app"
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        let tls = ["--server", gateway.urls[1], "--cacert", Fixtures.tls("ca.pem")]
        let sent = try runPushgate(
            ["send"] + tls + ["--cert", both, "--token", device.token, "--topic", topic, #"{"aps":{"alert":"hi"}}"#]
        )
        #expect(sent.status == 0 && sent.stdout.hasPrefix("status: 200\n"), "\(sent.stdout) \(sent.stderr)")
        let anonymous = try runPushgate(
            ["send"] + tls + ["--token", device.token, "--topic", topic, #"{"aps":{"alert":"hi"}}"#]
        )
        #expect(anonymous.stdout.contains("reason: MissingProviderToken"), "\(anonymous.stdout)")

        let bench = try runPushgate(
            ["bench"] + tls + [
                "--cert", Fixtures.tls("client.pem"), "--cert-key", Fixtures.tls("client-key.pem"), "--topic", topic,
                "--devices", "2", "--providers", "1", "--pushes", "20", "--drain-seconds", "30",
            ]
        )
        #expect(bench.status == 0, "\(bench.stderr)")
        #expect(bench.stdout.contains(#""accepted":20,"refused":0,"#), "\(bench.stdout)")
        #expect(bench.stdout.contains(#""lost":0,"#), "\(bench.stdout)")
    }

    @Test(
        "--cert over http://, --cert-key without --cert and a --cert file without its key are refused before anything connects"
    )
    func misuse() throws {
        let token = String(repeating: "ab", count: 32)
        for command in [
            ["send", "--token", token, "--topic", "com.example.app", "{}"],
            ["bench", "--devices", "1", "--pushes", "1"],
        ] {
            let cleartext = try runPushgate(command + ["--server", "http://127.0.0.1:1", "--cert", "provider.pem"])
            #expect(cleartext.status == 64)
            #expect(
                cleartext.stderr.contains(
                    "Error: --cert needs an https:// server: a client certificate is presented in the TLS handshake, and http://127.0.0.1:1 is cleartext"
                ),
                "\(cleartext.stderr)"
            )
            let keyAlone = try runPushgate(command + ["--server", "https://127.0.0.1:1", "--cert-key", "key.pem"])
            #expect(keyAlone.status == 64)
            #expect(keyAlone.stderr.contains("Error: --cert-key needs --cert"), "\(keyAlone.stderr)")
            let certificate = Fixtures.tls("client.pem")
            let noKey = try runPushgate(command + ["--server", "https://127.0.0.1:1", "--cert", certificate])
            #expect(noKey.status == 1)
            #expect(
                noKey.stderr.contains(
                    "Error: --cert \(certificate) holds no private key: name the key's file with --cert-key"
                ),
                "\(noKey.stderr)"
            )
        }
    }
}
