import Foundation
import Testing

/// docs/configuration.md "Reloading": SIGHUP and `POST /v1/admin/reload` against the real binary,
/// run unprivileged. TLS clients written by others (Python's http.client and ssl, the openssl CLI)
/// report which certificate each connection was served, by its SHA-256 fingerprint.
@Suite("Reload: SIGHUP and POST /v1/admin/reload against pushgate serve", .serialized, .timeLimit(.minutes(3)))
struct ReloadCLITests {
    static let teamID = "TEAM123456"

    @Test(
        "SIGHUP with a new certificate: the open TLS connection goes on with the old one, a new connection gets the new one"
    )
    func certificateRotation() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (certificate, key) = try stageFixtureCertificate(in: directory)
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0", "--tls-cert", certificate, "--tls-key", key,
                "--log-level", "notice",  // the reload's line
            ],
            listeners: 2
        )
        let old = try fingerprint(ofCertificate: certificate)
        // The gateway reads the files only when told to: replacing them first changes nothing yet.
        let next = try makeServerCertificate(in: directory, name: "next")
        try replace(certificate, with: next.certificate)
        try replace(key, with: next.key)
        let new = try fingerprint(ofCertificate: certificate)
        #expect(new != old)

        let probe = try PythonClient.json(
            TLSReloadProbe.self,
            "tls_reload_probe.py",
            [
                "--url", gateway.urls[1], "--ca", Fixtures.tls("ca.pem"), "--pid",
                "\(gateway.process.processIdentifier)", "--metrics", gateway.urls[0],
            ]
        )
        #expect(probe.reloads == 1, "SIGHUP counted as a successful reload after \(probe.reloadPolls) polls")
        #expect(probe.before.status == 200 && probe.before.fingerprint == old, "before: \(probe.before)")
        #expect(
            probe.after.status == 200 && probe.after.fingerprint == new,
            "a new connection after the reload: \(probe.after)"
        )
        #expect(
            probe.again.status == 200 && probe.again.fingerprint == old,
            "the connection opened before it, asked again: \(probe.again)"
        )
        #expect(probe.sameConnection, "the second request went over the connection opened before the reload")
        #expect(try servedFingerprint(gateway.urls[1]) == new, "openssl s_client sees the new certificate")
        #expect(gateway.stop() == 0)
        #expect(gateway.logged.contains("configuration reloaded"), "\(gateway.logged.suffix(2000))")
    }

    @Test("a corrupt key refuses the reload (422 with the reason, logged, counted); the old certificate keeps serving")
    func badReload() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (certificate, key) = try stageFixtureCertificate(in: directory)
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0", "--tls-cert", certificate, "--tls-key", key,
            ],
            listeners: 2
        )
        let old = try fingerprint(ofCertificate: certificate)
        try Data("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n".utf8).write(
            to: URL(fileURLWithPath: key)
        )

        let refused = try curl(["-X", "POST", gateway.urls[0] + "/v1/admin/reload"])
        #expect(refused.status == 422, "\(refused)")
        #expect(
            refused.body.contains("ConfigurationRefused") && refused.body.contains(key),
            "the answer names the file: \(refused.body)"
        )
        let metrics = try curl([gateway.urls[0] + "/metrics"]).body
        #expect(
            metrics.contains(#"pushgate_config_reloads_total{result="failure"} 1"#),
            "\(metrics.split(separator: "\n").filter { $0.contains("reloads") })"
        )
        #expect(metrics.contains(#"pushgate_config_reloads_total{result="success"} 0"#))
        #expect(try servedFingerprint(gateway.urls[1]) == old, "new connections still get the running certificate")
        let served = try curl(["--cacert", Fixtures.tls("ca.pem"), gateway.urls[1] + "/healthz"])
        #expect(served.status == 200, "\(served)")
        #expect(gateway.stop() == 0)
        #expect(gateway.logged.contains("configuration reload refused"), "\(gateway.logged.suffix(2000))")
    }

    @Test("a provider key added to the configuration file by a reload accepts a push signed with it")
    func providerKeyAdded() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let topic = "com.example.reload"
        let first = try makeSigningKey(in: directory, keyID: "KEYFIRST01")
        let second = try makeSigningKey(in: directory, keyID: "KEYSECOND1")
        let config = directory + "/pushgate.json"
        func writeConfig(_ keys: [(id: String, path: String)]) throws {
            let entries = keys.map {
                #"{"teamId": "\#(Self.teamID)", "keyId": "\#($0.id)", "privateKeyFile": "\#($0.path)", "topics": ["\#(topic)"]}"#
            }
            try Data(#"{"providerKeys": [\#(entries.joined(separator: ", "))]}"#.utf8).write(
                to: URL(fileURLWithPath: config)
            )
        }
        try writeConfig([("KEYFIRST01", first)])
        // Info: the access lines.
        let gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--config", config, "--log-level", "info"],
            listeners: 1
        )
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        func send(signedWith key: String, keyID: String) throws -> ToolRun {
            try runPushgate([
                "send", "--server", gateway.urls[0], "--token", device.token, "--topic", topic,
                "--key", key, "--key-id", keyID, "--team-id", Self.teamID, #"{"aps":{"alert":"reloaded"}}"#,
            ])
        }
        let before = try send(signedWith: second, keyID: "KEYSECOND1")
        #expect(
            before.status == 1 && (before.stdout + before.stderr).contains("InvalidProviderToken"),
            "\(before.stdout) \(before.stderr)"
        )

        try writeConfig([("KEYFIRST01", first), ("KEYSECOND1", second)])
        let reloaded = try curl(["-X", "POST", gateway.urls[0] + "/v1/admin/reload"])
        #expect(reloaded.status == 200 && reloaded.body.contains("providerKeys (2)"), "\(reloaded)")

        let after = try send(signedWith: second, keyID: "KEYSECOND1")
        #expect(after.status == 0 && after.stdout.contains("status: 200"), "\(after.stdout) \(after.stderr)")
        let still = try send(signedWith: first, keyID: "KEYFIRST01")
        #expect(still.status == 0, "the first key still works: \(still.stdout) \(still.stderr)")

        // Refused after the keys were read: the log's access line is for what runs, so none.
        try writeConfig([])
        let refused = try curl(["-X", "POST", gateway.urls[0] + "/v1/admin/reload"])
        #expect(refused.status == 422 && refused.body.contains("would leave no provider key"), "\(refused)")
        #expect(gateway.stop() == 0)
        let access = gateway.logged.split(separator: "\n").filter { $0.hasSuffix(" access") }
        #expect(
            access.count == 2 && access.last?.contains("KEYSECOND1") == true,
            "an access line at start and one for the reload that took effect: \(access)"
        )
    }

    // MARK: Files and clients

    /// The fixture certificate and key copied where the test may replace them.
    private func stageFixtureCertificate(in directory: String) throws -> (certificate: String, key: String) {
        let certificate = directory + "/server.pem"
        let key = directory + "/server-key.pem"
        try FileManager.default.copyItem(atPath: Fixtures.tls("server.pem"), toPath: certificate)
        try FileManager.default.copyItem(atPath: Fixtures.tls("server-key.pem"), toPath: key)
        try Unprivileged.handOver(certificate)
        try Unprivileged.handOver(key)
        return (certificate, key)
    }

    /// A new server certificate for localhost and 127.0.0.1 from the fixtures' CA, with a new key.
    private func makeServerCertificate(in directory: String, name: String) throws -> (certificate: String, key: String)
    {
        let key = directory + "/\(name)-key.pem"
        let request = directory + "/\(name).csr"
        let certificate = directory + "/\(name).pem"
        let extensions = directory + "/\(name).cnf"
        try Data(
            """
            [server]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1

            """.utf8
        ).write(to: URL(fileURLWithPath: extensions))
        for step in [
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
            ["req", "-new", "-key", key, "-subj", "/CN=localhost", "-out", request],
            [
                "x509", "-req", "-in", request, "-CA", Fixtures.tls("ca.pem"), "-CAkey", Fixtures.tls("ca-key.pem"),
                "-set_serial", "0x5EED0F01", "-days", "30", "-extfile", extensions, "-extensions", "server", "-out",
                certificate,
            ],
        ] {
            let made = try run("openssl", step)
            try #require(made.status == 0, "openssl \(step[0]): \(made.stderr)")
        }
        return (certificate, key)
    }

    private func makeSigningKey(in directory: String, keyID: String) throws -> String {
        let path = directory + "/AuthKey_\(keyID).p8"
        let made = try run(
            "openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]
        )
        try #require(made.status == 0, "openssl genpkey: \(made.stderr)")
        try Unprivileged.handOver(path)
        return path
    }

    /// Replaces `path`'s contents with `source`'s, keeping it readable by the gateway's user.
    private func replace(_ path: String, with source: String) throws {
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: source, toPath: path)
        try Unprivileged.handOver(path)
    }

    /// SHA-256 of a PEM certificate's DER, lowercase hex, as the openssl CLI computes it.
    private func fingerprint(ofCertificate path: String) throws -> String {
        let printed = try run("openssl", ["x509", "-noout", "-fingerprint", "-sha256", "-in", path])
        return Self.hex(ofFingerprintLine: printed.stdout)
    }

    /// The fingerprint of the certificate a new connection to `url` is served, by openssl s_client.
    private func servedFingerprint(_ url: String) throws -> String {
        let address = String(url.dropFirst("https://".count))
        let printed = try run(
            executable: URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "openssl s_client -connect \(address) -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256",
            ],
            timeout: .seconds(30)
        )
        return Self.hex(ofFingerprintLine: printed.stdout)
    }

    /// `sha256 Fingerprint=AB:CD:...` as `abcd...`.
    private static func hex(ofFingerprintLine line: String) -> String {
        (line.split(separator: "=").last.map(String.init) ?? "").replacingOccurrences(of: ":", with: "")
            .trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }

    /// curl's status and body (HTTP/1.1 for cleartext; ALPN h2 over TLS).
    private func curl(_ arguments: [String]) throws -> (status: Int, body: String) {
        let result = try run("curl", ["-sS", "--max-time", "30", "-w", "\n%{http_code}"] + arguments)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? -1, lines.dropLast().joined(separator: "\n"))
    }
}

/// `python/tls_reload_probe.py`'s output.
struct TLSReloadProbe: Decodable {
    struct Answer: Decodable, CustomStringConvertible {
        var status: Int
        var httpVersion: String
        var fingerprint: String
        var description: String { "\(status) \(httpVersion) \(fingerprint.prefix(16))" }
    }
    var before: Answer
    var reloadPolls: Int
    var reloads: Int
    var after: Answer
    var again: Answer
    var sameConnection: Bool
}
