import Foundation
import Testing

/// Client-certificate authentication for `send` and `bench`. (The getting-started page's TLS
/// walk-through, openssl commands and a push each way, is run by CI as the page has it:
/// Tests/docs/run-getting-started.sh.)
@Suite("send and bench: client certificates", .serialized, .timeLimit(.minutes(3)))
struct ProviderCertificateCLITests {
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
