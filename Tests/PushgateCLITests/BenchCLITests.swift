import Foundation
import Testing

/// The real `pushgate bench` against the real `pushgate serve`: every push it sends is accepted
/// and received exactly once, whether devices ack at once or coalesce their acks.
@Suite("pushgate bench: end to end", .serialized, .timeLimit(.minutes(3)))
struct BenchCLITests {
    @Test("a small run loses and duplicates nothing", arguments: [["--ack-delay", "0"], ["--ack-delay", "20"], ["--silent-percent", "50"]])
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
    }
}
