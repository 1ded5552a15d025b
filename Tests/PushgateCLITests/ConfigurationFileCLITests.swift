import Foundation
import Testing

/// `serve --config`: a scheduler value out of range stops the gateway with a message in the
/// file's own terms.
@Suite("Configuration file: scheduler values are checked as written", .timeLimit(.minutes(2)))
struct ConfigurationFileCLITests {
    @Test(
        "a scheduler value out of range stops serve, named as written: topic, field, value, range",
        arguments: [
            (
                #"{"scheduler": {"topics": {"com.example.news": {"appBurst": 0}}}}"#,
                #"scheduler policy for topic "com.example.news": appBurst is 0; allowed 1...1000"#
            ),
            // 18446744073709552 s is 2^64 + 384 ms: wrapped, it passed as 384 ms.
            (
                #"{"scheduler": {"maxDeferralSeconds": 18446744073709552}}"#,
                "global scheduler policy: maxDeferralSeconds is 18446744073709552; allowed 1...86400"
            ),
            (
                #"{"scheduler": {"topics": {"com.example.news": {"defaultExpirationSeconds": -9223372036854775807}}}}"#,
                #"scheduler policy for topic "com.example.news": defaultExpirationSeconds is -9223372036854775807; allowed 1...2592000"#
            ),
            (
                #"{"scheduler": {"maxDeferralSeconds": 0}}"#,
                "global scheduler policy: maxDeferralSeconds is 0; allowed 1...86400"
            ),
            (
                #"{"scheduler": {"fetchWindowSeconds": 0}}"#,
                "global scheduler policy: fetchWindowSeconds is 0; allowed 1...600"
            ),
            (
                #"{"scheduler": {"topics": {"com.example.news": {"minRefillPerHour": 0}}}}"#,
                #"scheduler policy for topic "com.example.news": minRefillPerHour is 0; allowed 1...3600000"#
            ),
            (
                #"{"scheduler": {"timeoutPenaltySeconds": -1}}"#,
                "global scheduler policy: timeoutPenaltySeconds is -1; allowed 0...2592000"
            ),
        ]
    )
    func outOfRange(config: String, message: String) throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/pushgate.json"
        try Data(config.utf8).write(to: URL(fileURLWithPath: path))
        // A gateway that starts anyway is killed: its stderr then lacks the message.
        let result = try runPushgate(
            ["serve", "--data-dir", directory + "/data", "--listen", "127.0.0.1:0", "--config", path],
            timeout: .seconds(30)
        )
        #expect(result.status != 0)
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }
}
