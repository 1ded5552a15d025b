import Foundation
import NIOConcurrencyHelpers
import PushgateTestFixtures
import PushgateTestKit
import Testing

/// Abusive clients (Benchmarks/abuse.py, which Benchmarks/abuse.sh runs for longer and measures)
/// against the real gateway while `pushgate bench` pushes through it: every well-behaved push
/// arrives, each abuser is answered as docs/security.md ("Limits") says, and the gateway still
/// answers /healthz. The limits are lowered so that each shows within seconds; nothing here
/// depends on timing beyond generous bounds (the machine is shared).
@Suite("Abuse: a well-behaved client is served while abusers are refused", .serialized, .timeLimit(.minutes(2)))
struct AbuseCLITests {
    static let script = TestFixtures.file("Benchmarks/abuse.py").path

    /// One abuser's JSON line: what it did and how each of its connections ended.
    struct Outcome: Decodable, Sendable, CustomStringConvertible {
        struct Ended: Decodable, Sendable {
            var connections: Int
            var maxSeconds: Double
        }

        var kind: String
        var ended: [String: Ended]
        var stillOpen: Int
        var counts: [String: Int]

        var description: String { "\(kind): ended \(ended), still open \(stillOpen), \(counts)" }
        func count(_ name: String) -> Int { counts[name] ?? 0 }
        /// Connections that ended as `how` (see abuse.py), within a second of their connect or
        /// later, and the longest of their lives.
        func ended(_ how: String) -> Ended {
            let both = [ended[how], ended["at once: " + how]].compactMap { $0 }
            return Ended(
                connections: both.reduce(0) { $0 + $1.connections },
                maxSeconds: both.map(\.maxSeconds).max() ?? 0
            )
        }
    }

    static func abuse(_ arguments: [String]) throws -> Outcome {
        let result = try run(
            executable: URL(fileURLWithPath: PythonClient.interpreter),
            ["-B", script] + arguments,
            timeout: .seconds(60)
        )
        let line = try #require(
            result.stdout.split(separator: "\n").last,
            "abuse.py \(arguments): no output: \(result.stderr)"
        )
        return try JSONDecoder().decode(Outcome.self, from: Data(line.utf8))
    }

    @Test(
        "while floods, slow and idle clients run, every push of a bench arrives; each abuser is refused or closed as documented"
    )
    func wellBehavedClientIsServed() throws {
        let address = try #require(
            try nonLoopbackAddress(),
            "this machine has no non-loopback IPv4 address to abuse from"
        )
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try ProviderAuthCLITests.makeSigningKey(in: directory)
        let secret = "abuse-test-registration-secret"
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--listen", "\(address):0", "--allow-insecure-cleartext",
                "--tls-listen", "127.0.0.1:0", "--tls-cert", Fixtures.tls("server.pem"), "--tls-key",
                Fixtures.tls("server-key.pem"),
                "--provider-key",
                "\(ProviderAuthCLITests.teamID):\(ProviderAuthCLITests.keyID):\(key):com.example.bench",
                "--registration-secret", secret,
                "--max-connections-per-address", "20", "--unauthenticated-idle-timeout", "1",
                "--connection-setup-timeout", "1", "--request-timeout", "2",
                "--device-creations-per-address-per-hour", "10", "--max-registrations-per-device", "8",
            ],
            listeners: 3
        )
        func port(_ prefix: String) throws -> String {
            let url = try #require(
                gateway.urls.first { $0.hasPrefix(prefix) },
                "no listener \(prefix)…: \(gateway.urls)"
            )
            return String(url.split(separator: ":").last!)
        }
        let local = try port("http://127.0.0.1:")
        let remote = try port("http://\(address):")
        let tls = try port("https://127.0.0.1:")
        let fromLoopback = ["--host", "127.0.0.1", "--port", local, "--seconds", "4"]
        let fromAddress = ["--host", address, "--port", remote]
        // A request flood from loopback: h2load, one connection, 100 streams at once, flat out.
        // Its first request (GET /metrics) proves it a loopback operator, which lifts the one
        // stream of a connection that has proven nothing.
        let uris = directory + "/uris"
        try Data(
            (["\(gateway.urls[0])/metrics"] + Array(repeating: "\(gateway.urls[0])/healthz", count: 9999)).joined(
                separator: "\n"
            ).utf8
        )
        .write(to: URL(fileURLWithPath: uris))
        let requestFlood = NIOLockedValueBox<Result<ToolRun, any Error>?>(nil)

        // The abusers run beside the bench, each on a thread of its own; from the non-loopback
        // address the device creation flood comes first, then the connection flood, which takes
        // every connection the address may hold.
        let outcomes = NIOLockedValueBox([String: Result<Outcome, any Error>]())
        let abusers: [(String, [[String]])] = [
            ("idle", [["idle", "--count", "4"] + fromLoopback]),
            ("ping-flood", [["ping-flood"] + fromLoopback]),
            ("settings-flood", [["settings-flood"] + fromLoopback]),
            (
                "zero-window",
                [
                    [
                        "zero-window", "--setup-port", local, "--secret", secret, "--count", "5", "--rate", "100",
                        "--payload-bytes", "4000",
                        "--topic", "com.example.bench", "--key", key, "--key-id", ProviderAuthCLITests.keyID,
                        "--team-id", ProviderAuthCLITests.teamID,
                    ] + fromLoopback
                ]
            ),
            ("empty-data", [["empty-data", "--secret", secret, "--seconds", "2"] + fromLoopback]),
            ("empty-headers", [["empty-headers", "--seconds", "2"] + fromLoopback]),
            ("slow-h2", [["slow-h2", "--count", "2", "--interval", "0.1"] + fromLoopback]),
            ("slow-h1-head", [["slow-h1-head", "--count", "2", "--interval", "0.1"] + fromLoopback]),
            ("slow-h1-body", [["slow-h1-body", "--count", "2", "--interval", "0.1"] + fromLoopback]),
            ("tls-stall", [["tls-stall", "--count", "4", "--host", "127.0.0.1", "--port", tls, "--seconds", "4"]]),
            ("registrations", [["registration-flood", "--setup-port", local, "--secret", secret] + fromLoopback]),
            (
                "address",
                [
                    ["device-flood", "--secret", secret, "--seconds", "1.5"] + fromAddress,
                    ["connections", "--count", "30", "--seconds", "2.5"] + fromAddress,
                ]
            ),
        ]
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            requestFlood.withLockedValue {
                $0 = Result { try run("h2load", ["-c", "1", "-m", "100", "-t", "1", "-D", "4", "-i", uris]) }
            }
        }
        for (name, runs) in abusers {
            DispatchQueue.global().async(group: group) {
                for (index, arguments) in runs.enumerated() {
                    let outcome = Result { try Self.abuse(arguments) }
                    outcomes.withLockedValue { $0[index == 0 ? name : arguments[0]] = outcome }
                }
            }
        }
        let bench = try runPushgate([
            "bench", "--server", gateway.urls[0], "--devices", "20", "--providers", "2", "--pushes", "1000", "--rate",
            "250",
            "--registration-secret", secret, "--key", key, "--key-id", ProviderAuthCLITests.keyID, "--team-id",
            ProviderAuthCLITests.teamID,
        ])
        group.wait()
        let results = try outcomes.withLockedValue { try $0.mapValues { try $0.get() } }

        try #require(bench.status == 0, "bench failed: \(bench.stderr)")
        let summary = try #require(
            try JSONSerialization.jsonObject(with: Data((bench.stdout.split(separator: "\n").last ?? "").utf8))
                as? [String: Any]
        )
        #expect(summary["accepted"] as? Int == 1000, "\(summary)")
        for field in ["lost", "duplicated", "refused", "streamsLost"] {
            #expect(summary[field] as? Int == 0, "\(field): \(summary)")
        }

        // Connections that prove nothing are closed after unauthenticatedIdleTimeout.
        let idle = try #require(results["idle"])
        #expect(idle.ended(#"GOAWAY NO_ERROR {"reason":"IdleTimeout"}"#).connections >= 4, "\(idle)")
        // A PING flood is answered until nghttp2 has 1,000 acks to send that the flooder has
        // not read: then the connection is closed, with the flood still coming (RST).
        let ping = try #require(results["ping-flood"])
        #expect(ping.count("PING acks received") > 0, "\(ping)")
        #expect(ping.ended("reset").connections > 0 && ping.ended("reset").maxSeconds < 3, "\(ping)")
        let settings = try #require(results["settings-flood"])
        #expect(settings.count("SETTINGS acks received") > 0, "\(settings)")
        #expect(settings.ended("reset").connections > 0 && settings.ended("reset").maxSeconds < 3, "\(settings)")
        // Devices whose event streams are never read (window 0): pushes to them are still
        // taken, and the bench's devices get every push meanwhile (checked above).
        let zeroWindow = try #require(results["zero-window"])
        #expect(zeroWindow.count("pushes answered 200") > 0, "\(zeroWindow)")
        // Frames that do nothing, flat out: past http2FloodBurst (1,000) the connection ends
        // (GOAWAY ENHANCE_YOUR_CALM, then the close; with the flood still coming the flooder sees
        // a reset), each time it comes back.
        for name in ["empty-data", "empty-headers"] {
            let flood = try #require(results[name])
            #expect(
                flood.ended("reset").connections > 0 && flood.ended("reset").maxSeconds < 3 && flood.stillOpen <= 1,
                "\(flood)"
            )
        }
        // A header block trickled in CONTINUATIONs (1,000 bytes: 100 s) ends the connection at
        // nghttp2's limit, the ninth.
        let slowH2 = try #require(results["slow-h2"])
        #expect(slowH2.ended("closed").connections >= 2 && slowH2.ended("closed").maxSeconds < 3, "\(slowH2)")
        // An HTTP/1.1 head trickled a byte at a time (4 KiB: 400 s) is cut by the idle timeout.
        let slowH1 = try #require(results["slow-h1-head"])
        #expect(slowH1.ended("closed").connections >= 2 && slowH1.ended("closed").maxSeconds < 3, "\(slowH1)")
        // A body trickled a byte at a time (each byte restarting the idle timer) is cut at the
        // request timeout (2 s here): closed, or reset when the close meets the next byte.
        let slowBody = try #require(results["slow-h1-body"])
        let cut = [slowBody.ended("closed"), slowBody.ended("reset")]
        #expect(cut.reduce(0) { $0 + $1.connections } >= 2 && cut.allSatisfy { $0.maxSeconds < 4 }, "\(slowBody)")
        // TLS handshakes that stall (nothing sent, or half a ClientHello) are closed at the
        // connection setup timeout (1 s here), and come back.
        let tlsStall = try #require(results["tls-stall"])
        #expect(
            tlsStall.ended("closed, no byte").connections >= 4 && tlsStall.ended("closed, no byte").maxSeconds < 3,
            "\(tlsStall)"
        )
        // The request flood is served, every request.
        let flood = try #require(try requestFlood.withLockedValue { try $0?.get() })
        let finished =
            flood.stdout.split(separator: "\n").first { $0.hasPrefix("status codes:") }.map(String.init) ?? flood.stdout
        #expect(
            flood.status == 0 && finished.hasPrefix("status codes: ") && !finished.hasPrefix("status codes: 0 2xx")
                && finished.hasSuffix(" 0 3xx, 0 4xx, 0 5xx"),
            "\(finished)"
        )
        let registrations = try #require(results["registrations"])
        #expect(registrations.count("answered 201") == 8, "\(registrations)")
        #expect(registrations.count("answered 409") > 0, "\(registrations)")
        let devices = try #require(results["address"])
        #expect(devices.count("answered 201") == 10, "\(devices)")
        #expect(devices.count("answered 429") > 0 && devices.count("retry-after values seen") > 0, "\(devices)")
        let connections = try #require(results["connections"])
        #expect(connections.ended("at once: closed, no byte").connections > 0, "\(connections)")
        #expect(connections.stillOpen > 0, "the address's first 20 are served: \(connections)")

        let metrics = try run("curl", ["-sS", "--max-time", "30", "\(gateway.urls[0])/metrics"])
        #expect(
            metrics.stdout.contains(#"pushgate_connections_refused_total{reason="address_full"}"#)
                && !metrics.stdout.contains(#"pushgate_connections_refused_total{reason="address_full"} 0"#),
            "\(metrics.stdout.prefix(400))"
        )
        #expect(metrics.stdout.contains("pushgate_device_creations_refused_total "), "\(metrics.stdout.prefix(400))")
        #expect(
            metrics.stdout.contains("pushgate_http2_flood_closures_total ")
                && !metrics.stdout.contains("pushgate_http2_flood_closures_total 0\n"),
            "\(metrics.stdout.prefix(400))"
        )
        for timeout in ["connection_setup", "idle", "request"] {
            let line = metrics.stdout.split(separator: "\n").first {
                $0.hasPrefix(#"pushgate_timeouts_total{timeout="\#(timeout)"}"#)
            }
            #expect(line != nil && !line!.hasSuffix(" 0"), "\(timeout): \(line ?? "no line")")
        }
        for url in gateway.urls {
            // -k: the test certificate's CA is not the point here.
            let health = try run(
                "curl",
                [
                    "-sSk", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "--max-time", "30",
                    "\(url)/healthz",
                ]
            )
            #expect(health.stdout == "200", "\(url): \(health.stdout) \(health.stderr)")
        }
        #expect(gateway.stop() == 0)
    }
}
