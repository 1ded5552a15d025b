import Foundation
import NIOPosix
import PushgateTestKit
import Testing

/// Provider authentication with the real binary and clients nobody here wrote: aioapns (a
/// Python APNs library from PyPI) with token auth over TLS, curl with a client certificate, and
/// the refusal to serve the network unauthenticated.
@Suite("Provider authentication: aioapns, client certificates, secure by default", .serialized, .timeLimit(.minutes(5)))
struct ProviderAuthCLITests {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"

    /// A fresh P-256 `.p8` (PKCS#8 PEM, the format Apple hands out), made with the openssl CLI.
    static func makeSigningKey(in directory: String) throws -> String {
        let path = directory + "/AuthKey_\(keyID).p8"
        let made = try run(
            "openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]
        )
        try #require(made.status == 0, "openssl genpkey: \(made.stderr)")
        // openssl writes it 0600, as a key should be: the gateway's user must own it.
        try Unprivileged.handOver(path)
        return path
    }

    @Test(
        "aioapns with token auth over TLS: alert and background pushes 200, BadDeviceToken, Unregistered with timestamp; the 100th refusal in a row and a push beside it both answered before the GOAWAY"
    )
    func aioapns() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try Self.makeSigningKey(in: directory)
        let topic = "com.example.aioapns"
        let gateway = try GatewayProcess.cleartextAndTLS([
            "--provider-key", "\(Self.teamID):\(Self.keyID):\(key):\(topic)",
        ])
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        let gone = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        let deleted = try run(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "-X", "DELETE",
                "-H", "authorization: bearer \(gone.secret)",
                "\(gateway.urls[0])/v1/devices/\(gone.deviceId)/registrations/\(gone.token)",
            ]
        )
        #expect(deleted.stdout == "204", "\(deleted.stdout) \(deleted.stderr)")

        let port = try #require(gateway.urls[1].split(separator: ":").last.flatMap { Int($0) })
        let results = try PythonClient.json(
            AioapnsResults.self,
            "aioapns_provider.py",
            [
                "localhost", "\(port)", Fixtures.tls("ca.pem"), key, Self.keyID, Self.teamID, topic, device.token,
                gone.token,
            ]
        )
        #expect(results.alert.status == "200", "\(results.alert)")
        #expect(results.alert.reason == nil, "\(results.alert)")
        #expect(results.background.status == "200", "\(results.background)")
        #expect(results.unknown.status == "400", "\(results.unknown)")
        #expect(results.unknown.reason == "BadDeviceToken", "\(results.unknown)")
        #expect(results.unregistered.status == "410", "\(results.unregistered)")
        #expect(results.unregistered.reason == "Unregistered", "\(results.unregistered)")
        #expect(
            (results.unregistered.timestamp ?? 0) > 1_600_000_000_000,
            "410 carries the unregistration time in ms: \(results.unregistered)"
        )
        // The 100th refusal in a row ends the connection, with a push still being stored: both
        // answers reach aioapns, so it has nothing to send again.
        #expect(
            results.hundredth.status == "400" && results.hundredth.reason == "BadDeviceToken",
            "\(results.hundredth)"
        )
        #expect(results.during.status == "200", "\(results.during)")
        #expect(gateway.stop() == 0)
    }

    @Test(
        "serve refuses to listen beyond loopback without provider authentication and a registration secret, and names them; and cleartext beyond loopback unless asked for"
    )
    func secureByDefault() throws {
        let refused = try runServe(["--listen", "0.0.0.0:0"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("0.0.0.0"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--provider-key"), "\(refused.stderr)")
        #expect(refused.stderr.contains("registrationSecret"), "\(refused.stderr)")

        // A provider key alone is not enough: device creation would still be open.
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try Self.makeSigningKey(in: directory)
        let keyOnly = try runServe([
            "--listen", "0.0.0.0:0", "--provider-key", "\(Self.teamID):\(Self.keyID):\(key):com.example.app",
        ])
        #expect(keyOnly.status != 0)
        #expect(keyOnly.stderr.contains("registration secret"), "\(keyOnly.stderr)")
        #expect(!keyOnly.stderr.contains("--provider-key"), "\(keyOnly.stderr)")

        // With both, cleartext off loopback is still refused, on every interface and on one of
        // this machine's own addresses alike: the secrets would cross the network unencrypted
        // (the security review's finding).
        let config = directory + "/pushgate.json"
        try Data(#"{"registrationSecret": "a-registration-secret-for-tests"}"#.utf8).write(
            to: URL(fileURLWithPath: config)
        )
        let own = try #require(try nonLoopbackAddress(), "this machine has no non-loopback IPv4 address to listen on")
        for host in ["0.0.0.0", own] {
            let authenticated = [
                "--listen", "\(host):0", "--config", config, "--provider-key",
                "\(Self.teamID):\(Self.keyID):\(key):com.example.app",
            ]
            let cleartext = try runServe(authenticated)
            #expect(cleartext.status != 0)
            #expect(
                cleartext.stderr.contains("refusing to serve cleartext on \(host):0 (not loopback)"),
                "\(cleartext.stderr)"
            )
            for advice in ["--tls-listen", "proxy that terminates TLS", "--allow-insecure-cleartext"] {
                #expect(cleartext.stderr.contains(advice), "\(cleartext.stderr)")
            }
            // With --allow-insecure-cleartext it serves there and says nothing about exposure.
            let gateway = try GatewayProcess(arguments: authenticated + ["--allow-insecure-cleartext"], listeners: 1)
            #expect(gateway.urls[0].hasPrefix("http://\(host):"))
            let health = try run(
                "curl",
                ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30", "\(gateway.urls[0])/healthz"]
            )
            #expect(health.stdout == "200", "\(health.stdout) \(health.stderr)")
            #expect(gateway.stop() == 0)
        }
        let admin = try runServe(["--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0"])
        #expect(admin.stderr.contains("refusing to serve cleartext on 0.0.0.0:0"), "\(admin.stderr)")
    }

    @Test("a client certificate from the operator's CA authenticates a provider; its UID is the topic")
    func clientCertificate() throws {
        let gateway = try GatewayProcess.cleartextAndTLS(["--tls-client-ca", Fixtures.tls("ca.pem")])
        // The fixture client certificate has UID=com.example.app.
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], "com.example.app"])
        func push(topic: String?, certificate: Bool) throws -> CurlResponse {
            var arguments = [
                "-sS", "-i", "--http2", "--max-time", "30", "--cacert", Fixtures.tls("ca.pem"), "-X", "POST",
                "-H", "apns-push-type: alert",
            ]
            if certificate {
                arguments += ["--cert", Fixtures.tls("client.pem"), "--key", Fixtures.tls("client-key.pem")]
            }
            if let topic { arguments += ["-H", "apns-topic: \(topic)"] }
            let url = gateway.urls[1].replacingOccurrences(of: "127.0.0.1", with: "localhost")
            arguments += ["--data-binary", #"{"aps":{"alert":"by certificate"}}"#, "\(url)/3/device/\(device.token)"]
            let result = try run("curl", arguments)
            try #require(result.status == 0, "curl: \(result.stderr)")
            return parseCurl(result.stdout)
        }
        let implied = try push(topic: nil, certificate: true)
        #expect(implied.status == 200, "no apns-topic: the certificate's UID is the topic: \(implied.raw)")
        #expect(implied.headers["pushgate-disposition"] == "stored", "\(implied.raw)")
        let named = try push(topic: "com.example.app", certificate: true)
        #expect(named.status == 200, "\(named.raw)")
        let other = try push(topic: "com.example.other", certificate: true)
        #expect(other.status == 400, "\(other.raw)")
        #expect(other.body.contains("TopicDisallowed"), "\(other.raw)")
        let anonymous = try push(topic: "com.example.app", certificate: false)
        #expect(anonymous.status == 403, "\(anonymous.raw)")
        #expect(anonymous.body.contains("MissingProviderToken"), "\(anonymous.raw)")
        #expect(gateway.stop() == 0)
    }

    @Test(
        "a provider without a token that opens a body and never ends it: 403 MissingProviderToken on the head alone, the stream reset when body still comes, the connection kept"
    )
    func unfinishedBodyRefusedOnItsHead() async throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try Self.makeSigningKey(in: directory)
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--provider-key", "\(Self.teamID):\(Self.keyID):\(key):com.example.app",
                "--request-body-budget-bytes", "65536",
                // The connection never proves itself, and between stream 1's reset and stream 3 it
                // has no open stream: on a loaded machine the short idle limit for unproven
                // connections must not become what this test sees.
                "--unauthenticated-idle-timeout", "600", "--log-level", "debug",
            ],
            listeners: 1
        )
        // The connection has been seen closed by the gateway under CI's load, rarely, for a
        // reason this test could not tell: the gateway's debug log says why, when it happens.
        do {
            let port = try #require(gateway.urls[0].split(separator: ":").last.flatMap { Int($0) })
            let client = try await RawHTTP2Client.connect(port: port, group: MultiThreadedEventLoopGroup.singleton)
            let head = [
                (":method", "POST"), (":scheme", "http"), (":path", "/3/device/\(String(repeating: "0f", count: 32))"),
                (":authority", "localhost"), ("apns-topic", "com.example.app"),
            ]
            // Not a byte of body yet: the answer must not wait for one.
            try await client.sendHeaders(streamID: 1, head, endStream: false)
            let frames = try await client.frames { $0.answered(1) }
            #expect(frames.body(of: 1).contains(#""reason":"MissingProviderToken""#), "\(frames)")
            // Body that still comes after the answer is stopped: RST_STREAM NO_ERROR.
            try await client.sendData(streamID: 1, Array(repeating: 0x20, count: 1000), endStream: false)
            #expect(
                try await client.frames { $0.reset(of: 1) != nil }.reset(of: 1) == 0,
                "RST_STREAM NO_ERROR: stop sending the body"
            )
            // A client that sends its body anyway changes nothing; the connection serves on.
            for _ in 0..<20 {
                try await client.sendData(streamID: 1, Array(repeating: 0x20, count: 1000), endStream: false)
            }
            try await client.sendHeaders(
                streamID: 3,
                [(":method", "GET"), (":scheme", "http"), (":path", "/healthz"), (":authority", "localhost")],
                endStream: true
            )
            #expect(try await client.frames { $0.answered(3) }.answered(3))
            await client.close()
        } catch {
            _ = gateway.stop()
            Issue.record("\(error); the gateway logged:\n\(gateway.logged)")
            return
        }
        #expect(gateway.stop() == 0)
    }

    @Test("send --key signs its own token and reuses it from the cache on the next run")
    func sendWithKey() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try Self.makeSigningKey(in: directory)
        let topic = "com.example.send"
        let gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--provider-key", "\(Self.teamID):\(Self.keyID):\(key):\(topic)"],
            listeners: 1
        )
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        let cache = directory + "/token.jwt"
        func send(_ extra: [String]) throws -> (Int32, String) {
            let result = try runPushgate(
                ["send", "--server", gateway.urls[0], "--token", device.token, "--topic", topic] + extra + [
                    #"{"aps":{"alert":"signed"}}"#
                ]
            )
            return (result.status, result.stdout + result.stderr)
        }
        let unsigned = try send([])
        #expect(unsigned.0 == 1)
        #expect(unsigned.1.contains("MissingProviderToken"), "\(unsigned.1)")

        let signing = ["--key", key, "--key-id", Self.keyID, "--team-id", Self.teamID, "--token-cache", cache]
        let first = try send(signing)
        #expect(first.0 == 0, "\(first.1)")
        #expect(first.1.contains("status: 200"), "\(first.1)")
        let cached = try String(contentsOfFile: cache, encoding: .utf8)
        let second = try send(signing)
        #expect(second.0 == 0, "\(second.1)")
        #expect(try String(contentsOfFile: cache, encoding: .utf8) == cached, "the second run reused the token")
        let attributes = try FileManager.default.attributesOfItem(atPath: cache)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(gateway.stop() == 0)
    }

    @Test(
        "send's token cache belongs to the .p8 that signed the token: a key replaced behind its key id is used at once, another key never reuses it, and a refused token is dropped"
    )
    func tokenCacheFollowsTheKey() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Unprivileged.handOver(directory)
        let first = try Self.makeSigningKey(in: directory)
        let second = directory + "/second.p8"
        let made = try run(
            "openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", second]
        )
        try #require(made.status == 0, "openssl genpkey: \(made.stderr)")
        try Unprivileged.handOver(second)
        // The gateway's copy of the key, replaced below as an operator replaces a revoked .p8.
        let gatewayKey = directory + "/gateway.p8"
        try FileManager.default.copyItem(atPath: first, toPath: gatewayKey)
        try Unprivileged.handOver(gatewayKey)
        let topic = "com.example.cache"
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--provider-key", "\(Self.teamID):\(Self.keyID):\(gatewayKey):\(topic)",
            ],
            listeners: 1
        )
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        // The default cache, under XDG_CACHE_HOME.
        let cacheHome = directory + "/cache"
        func send(_ key: String, _ extra: [String] = []) throws -> ToolRun {
            try runPushgate(
                [
                    "send", "--server", gateway.urls[0], "--token", device.token, "--topic", topic,
                    "--key", key, "--key-id", Self.keyID, "--team-id", Self.teamID,
                ] + extra + [#"{"aps":{"alert":"cached"}}"#],
                environment: ["XDG_CACHE_HOME": cacheHome]
            )
        }
        func cached() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: cacheHome + "/pushgate").sorted()
        }
        let signed = try send(first)
        #expect(signed.status == 0, "\(signed.stdout) \(signed.stderr)")
        let firstEntry = try #require(try cached().first)
        #expect(firstEntry.hasPrefix("\(Self.teamID).\(Self.keyID).") && firstEntry.hasSuffix(".jwt"), "\(firstEntry)")

        try Data(contentsOf: URL(fileURLWithPath: second)).write(to: URL(fileURLWithPath: gatewayKey))
        let reloaded = try run("curl", ["-sS", "-X", "POST", "--max-time", "30", gateway.urls[0] + "/v1/admin/reload"])
        #expect(reloaded.stdout.contains("providerKeys"), "\(reloaded.stdout) \(reloaded.stderr)")

        // The new key signs its own token at once, not the first key's cached one.
        let replaced = try send(second)
        #expect(
            replaced.status == 0 && replaced.stdout.contains("status: 200"),
            "\(replaced.stdout) \(replaced.stderr)"
        )
        let entries = try cached()
        #expect(entries.count == 2, "one entry per key: \(entries)")

        // The old key's token is refused, and dropped from the cache with a word about it.
        let revoked = try send(first)
        #expect(revoked.status == 1)
        #expect(revoked.stdout.contains("reason: InvalidProviderToken"), "\(revoked.stdout)")
        #expect(
            revoked.stderr.contains("removed the refused token from the cache \(cacheHome)/pushgate/\(firstEntry)"),
            "\(revoked.stderr)"
        )
        let remaining = try cached()
        #expect(!remaining.contains(firstEntry), "\(remaining)")

        // One cache file named with --token-cache holds the token of the key that signed it only.
        let shared = directory + "/shared.jwt"
        let byNewKey = try send(second, ["--token-cache", shared])
        #expect(byNewKey.status == 0, "\(byNewKey.stdout) \(byNewKey.stderr)")
        let byOldKey = try send(first, ["--token-cache", shared])
        #expect(byOldKey.status == 1, "the first key must not reuse the second key's token: \(byOldKey.stdout)")
        #expect(byOldKey.stdout.contains("reason: InvalidProviderToken"), "\(byOldKey.stdout)")
        #expect(!FileManager.default.fileExists(atPath: shared))
        #expect(gateway.stop() == 0)
    }

    private func runServe(_ arguments: [String]) throws -> ToolRun {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try runPushgate(["serve", "--data-dir", directory] + arguments)
    }
}

struct AioapnsResult: Decodable, CustomStringConvertible {
    var status: String
    /// aioapns' `description`: the APNs reason of a refusal.
    var reason: String?
    var timestamp: Int64?
    var id: String?

    private enum CodingKeys: String, CodingKey {
        case status
        case reason = "description"
        case timestamp, id
    }

    var description: String { "\(status) \(reason ?? "-") \(timestamp.map(String.init) ?? "-")" }
}

struct AioapnsResults: Decodable {
    var alert: AioapnsResult
    var background: AioapnsResult
    var unknown: AioapnsResult
    var unregistered: AioapnsResult
    var during: AioapnsResult
    var hundredth: AioapnsResult
}
