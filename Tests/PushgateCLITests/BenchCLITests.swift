import Foundation
import Testing

/// The real `pushgate bench` against the real `pushgate serve`: every push it sends is accepted
/// and received exactly once, whether devices ack at once or coalesce their acks.
@Suite("pushgate bench: end to end", .serialized, .timeLimit(.minutes(3)))
struct BenchCLITests {
    @Test(
        "a small run loses and duplicates nothing; devices ack (unless told to wait past the run) and keep their streams",
        arguments: [["--ack-delay", "0"], ["--ack-delay", "60000"], ["--silent-percent", "50"], ["--rate", "1000"]]
    )
    func smallRun(_ extra: [String]) throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = gateway.stop() }
        let result = try runPushgate(
            ["bench", "--server", gateway.urls[0], "--devices", "20", "--providers", "2", "--pushes", "2000", "--drain-seconds", "30"] + extra
        )
        #expect(result.status == 0, "bench failed: \(result.stderr)")
        let last = try #require(result.stdout.split(separator: "\n").last, "no output: \(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
        #expect(summary["accepted"] as? Int == 2000)
        #expect(summary["lost"] as? Int == 0)
        #expect(summary["duplicated"] as? Int == 0)
        if extra == ["--ack-delay", "60000"] {
            // The run ends long before the first ack is due: a bench that ignored the delay
            // would have sent about one ack per ten pushes here.
            #expect(summary["acks"] as? Int == 0)
        } else {
            #expect((summary["acks"] as? Int ?? 0) > 0)
        }
        #expect(summary["streamsLost"] as? Int == 0)
        if let rate = extra.firstIndex(of: "--rate").flatMap({ Int(extra[$0 + 1]) }) {
            // Paced: the 2,000th push is not due before 1,999 / rate seconds have passed (flat
            // out, a debug build here sends about 3,600/s).
            let perSecond = try #require(summary["acceptedPerSecond"] as? Double ?? (summary["acceptedPerSecond"] as? Int).map(Double.init))
            #expect(perSecond <= Double(rate) * 2000 / 1999 + 1)
        }
    }

    @Test("against a gateway with a registration secret, bench creates its devices with --registration-secret")
    func registrationSecret() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = "bench-registration-secret"
        let gateway = try GatewayProcess.withRegistrationSecret(secret, in: directory)
        defer { _ = gateway.stop() }
        let base = ["bench", "--server", gateway.urls[0], "--devices", "4", "--providers", "1", "--pushes", "100"]
        let refused = try runPushgate(base)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("401"), "without the secret: \(refused.stderr)")
        let result = try runPushgate(base + ["--registration-secret", secret])
        #expect(result.status == 0, "bench failed: \(result.stderr)")
        let last = try #require(result.stdout.split(separator: "\n").last)
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
        #expect(summary["accepted"] as? Int == 100)
        #expect(summary["lost"] as? Int == 0)
    }
}
