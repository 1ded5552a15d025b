import Foundation
import PushgateTestKit
import Testing

/// Background fetch end to end: the real agent runs a real fetch command for each silent push
/// from the real gateway, and the scheduler learns from what it reports.
@Suite("Background fetch end to end: the agent's command, the gateway's refill", .serialized, .timeLimit(.minutes(3)))
struct FetchEndToEndTests {
    static let slow = "com.example.slow"
    static let fast = "com.example.fast"

    @Test(
        "an app whose fetch always times out gets fewer silent pushes delivered than one that reports newData, and the device view says why"
    )
    func slowAppGetsLess() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // One silent push at once per app, then one every 4 s; a 2 s fetch window (the agent
        // kills at 1 s). The timeout, 2 s in, leaves the slow app half a token and brings it to
        // the floor of 1 an hour: its next token is half an hour away.
        let config = directory + "/pushgate.json"
        let scheduler =
            #"{"scheduler": {"appBurst": 1, "appRefillPerHour": 900, "deviceBurst": 10, "deviceRefillPerHour": 3600, "fetchWindowSeconds": 2}}"#
        try Data(scheduler.utf8).write(to: URL(fileURLWithPath: config))
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0", "--config", config], listeners: 1)
        defer { _ = gateway.stop() }
        let command = #"case "$PUSHGATE_TOPIC" in \#(Self.slow)) sleep 30 ;; *) cat > /dev/null; exit 0 ;; esac"#
        let agent = try AgentProcess(
            server: gateway.urls[0],
            identity: directory + "/device.json",
            topic: Self.slow,
            arguments: ["--topic", Self.fast, "--fetch-command", command]
        )
        var tokens: [String: String] = [:]
        var deviceID = ""
        while true {
            let line = try agent.next()
            if line["type"] as? String == "registered" {
                tokens[line["topic"] as? String ?? ""] = line["token"] as? String
                deviceID = line["deviceId"] as? String ?? ""
            }
            if line["type"] as? String == "connected" { break }
        }
        let slowToken = try #require(tokens[Self.slow])
        let fastToken = try #require(tokens[Self.fast])

        func silent(_ token: String, _ topic: String) throws -> String? {
            let result = try runPushgate([
                "send", "--server", gateway.urls[0], "--token", token, "--topic", topic,
                "--push-type", "background", "--priority", "5", #"{"aps":{"content-available":1}}"#,
            ])
            return result.stdout.split(separator: "\n").first { $0.hasPrefix("disposition: ") }.map {
                String($0.dropFirst(13))
            }
        }
        var delivered: [String: Int] = [Self.slow: 0, Self.fast: 0]
        func receive(_ count: Int) throws {
            for _ in 0..<count {
                let line = try agent.next()
                if let topic = line["topic"] as? String, line["seq"] != nil { delivered[topic, default: 0] += 1 }
            }
        }

        // One each, within budget: both delivered, both commands run.
        #expect(try silent(slowToken, Self.slow) == "delivered")
        #expect(try silent(fastToken, Self.fast) == "delivered")
        try receive(2)
        var outcomes: [String: [String: Any]] = [:]
        while outcomes.count < 2 {
            let fetch = try agent.nextFetch()
            outcomes[fetch["topic"] as? String ?? ""] = fetch
        }
        #expect(outcomes[Self.fast]?["result"] as? String == "newData")
        #expect(outcomes[Self.fast]?["refused"] == nil, "reported in time")
        #expect(outcomes[Self.fast]?["exitStatus"] as? Int == 0)
        #expect(outcomes[Self.slow]?["result"] as? String == "timeout", "killed at the window's end, never reported")
        #expect(outcomes[Self.slow]?["killedAfterMs"] != nil)

        // The gateway counts the timeout when the window it opened ends: its own clock.
        let view = { () throws -> [String: Any] in
            let reply = try run("curl", ["-sS", gateway.urls[0] + "/v1/admin/devices/\(deviceID)"])
            return (try JSONSerialization.jsonObject(with: Data(reply.stdout.utf8)) as? [String: Any]) ?? [:]
        }
        func fetch(_ device: [String: Any], _ topic: String) -> [String: Any]? {
            (device["registrations"] as? [[String: Any]])?.first { $0["topic"] as? String == topic }?["fetch"]
                as? [String: Any]
        }
        try waitUntil("the slow app's timeout counted") {
            fetch(try view(), Self.slow)?["results"] as? [String] == ["timeout"]
        }

        // Three more each: the fast app's come out as its bucket refills; the slow app's wait.
        for _ in 0..<3 {
            _ = try silent(slowToken, Self.slow)
            _ = try silent(fastToken, Self.fast)
        }
        while delivered[Self.fast, default: 0] < 4 { try receive(1) }
        var fastResults = 1
        while fastResults < 4 {
            let line = try agent.nextFetch()
            #expect(line["topic"] as? String == Self.fast)
            #expect(line["result"] as? String == "newData")
            #expect(line["refused"] == nil, "\(line)")
            fastResults += 1
        }

        let device = try view()
        let held = ((device["notifications"] as? [[String: Any]]) ?? []).filter { $0["state"] as? String == "held" }
        #expect(delivered == [Self.slow: 1, Self.fast: 4])
        #expect(held.filter { $0["topic"] as? String == Self.slow }.count == 3)
        #expect(held.filter { $0["topic"] as? String == Self.fast }.isEmpty)
        let slow = try #require(fetch(device, Self.slow))
        let fast = try #require(fetch(device, Self.fast))
        #expect(slow["refillPerHour"] as? Double == 1)
        #expect(fast["refillPerHour"] as? Double == 900)
        #expect(
            (slow["explanation"] as? String)?.hasPrefix(
                "refill 1/h instead of 900/h, at the floor of 1/h: score 0 over the last 1 result (1 timeout); halved until"
            ) == true
        )
        #expect(
            fast["explanation"] as? String == "refill 900/h as configured: score 1 over the last 4 results (4 newData)"
        )
        #expect(
            held.allSatisfy {
                ($0["reason"] as? String)?.hasPrefix("app budget empty until") == true
                    || ($0["reason"] as? String)?.hasPrefix("behind") == true
            }
        )
    }
}
