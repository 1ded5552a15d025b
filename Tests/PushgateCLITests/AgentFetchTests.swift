import Foundation
import NIOCore
import PushgateTransport
import Testing

/// The real `pushgate agent` running fetch commands for silent pushes from a stand-in gateway,
/// which keeps what the agent reports: the results, their lines, the fetch intervals. Every
/// wait is for a line the agent prints.
@Suite("pushgate agent: background fetch", .serialized, .timeLimit(.minutes(2)))
struct AgentFetchTests {
    static let topic = "com.example.acks"

    @Test(
        "the command reads the notification as printed and sees its variables; its exit is reported; intervals go with the state"
    )
    func commandRunsAndIsReported() async throws {
        let files = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: files) }
        let command =
            #"cat > '\#(files)'/$PUSHGATE_SEQ.json; echo "$PUSHGATE_TOPIC $PUSHGATE_APNS_ID" > '\#(files)'/$PUSHGATE_SEQ.env; exit 1"#
        let arguments = [
            "--fetch-command", command, "--fetch-interval", "\(Self.topic)=600", "--fetch-interval",
            "com.example.other=never",
        ]
        try await withStandInGateway(agentArguments: arguments) { gateway, agent in
            #expect(try agent.next()["type"] as? String == "registered")
            let state = try agent.next()
            #expect(state["type"] as? String == "state")
            #expect(
                gateway.stateReports == [#"{"fetchIntervals":{"com.example.acks":600,"com.example.other":"never"}}"#]
            )
            #expect(try agent.next()["type"] as? String == "connected")

            let stream = try await gateway.firstStream()
            let silent = Self.notification(seq: 1, pushType: "background", window: 20)
            try await Self.send(silent, seq: 1, on: stream)
            #expect(try agent.next()["seq"] as? Int == 1)
            let fetch = try agent.nextFetch()
            #expect(fetch["seq"] as? Int == 1)
            #expect(fetch["topic"] as? String == Self.topic)
            #expect(fetch["result"] as? String == "noData")
            #expect(fetch["exitStatus"] as? Int == 1)
            #expect((fetch["durationMs"] as? Int).map { $0 >= 0 } == true)
            #expect(fetch["refused"] == nil && fetch["unreported"] == nil)
            #expect(gateway.fetchReports == [#"{"results":[{"seq":1,"result":"noData"}]}"#])
            #expect(try String(contentsOfFile: files + "/1.json", encoding: .utf8) == silent + "\n")
            #expect(try String(contentsOfFile: files + "/1.env", encoding: .utf8) == "\(Self.topic) apns-1\n")
        }
    }

    @Test(
        "without a command each silent push is reported as newData; a refusal is printed and the agent goes on; keep-alives too"
    )
    func newDataAndRefusals() async throws {
        try await withStandInGateway(fetchRefusals: [400]) { gateway, agent in
            gateway.answerAcks()
            #expect(try agent.next()["type"] as? String == "registered")
            #expect(try agent.next()["type"] as? String == "connected")
            let stream = try await gateway.firstStream()

            try await Self.send(Self.notification(seq: 1, pushType: "background"), seq: 1, on: stream)
            #expect(try agent.next()["seq"] as? Int == 1)
            let refused = try agent.nextFetch()
            #expect(refused["seq"] as? Int == 1)
            #expect(refused["result"] as? String == "newData")
            #expect(refused["exitStatus"] == nil)
            let refusal = try #require(refused["refused"] as? [String: Any])
            #expect(refusal["status"] as? Int == 400)
            #expect(refusal["reason"] as? String == "StandIn")
            #expect(refusal["detail"] as? String == "refused by the stand-in")

            // Not silent: printed and acked, not fetched.
            try await Self.send(Self.notification(seq: 2, pushType: "alert"), seq: 2, on: stream)
            #expect(try agent.next()["seq"] as? Int == 2)
            try await Self.send(Self.notification(seq: 3, pushType: "background"), seq: 3, on: stream)
            #expect(try agent.next()["seq"] as? Int == 3)
            let accepted = try agent.nextFetch()
            #expect(accepted["seq"] as? Int == 3)
            #expect(accepted["result"] as? String == "newData")
            #expect(accepted["refused"] == nil)
            try await gateway.waitForAck(upTo: 3)

            gateway.answerKeepalives(#"{"notifications":[\#(Self.notification(seq: 4, pushType: "background"))]}"#)
            agent.command("keepalive")
            #expect(try agent.next()["seq"] as? Int == 4)
            #expect(try agent.nextFetch()["seq"] as? Int == 4)
            #expect(
                gateway.fetchReports == [1, 3, 4].map { #"{"results":[{"seq":\#($0),"result":"newData"}]}"# },
                "refused or not, each silent push is reported once; the alert is not"
            )
        }
    }

    @Test("a command still running when the window ends is killed and not reported")
    func timeoutIsNotReported() async throws {
        let command = #"if [ "$PUSHGATE_SEQ" = 1 ]; then sleep 30 & wait; fi; exit 0"#
        try await withStandInGateway(agentArguments: ["--fetch-command", command]) { gateway, agent in
            #expect(try agent.next()["type"] as? String == "registered")
            #expect(try agent.next()["type"] as? String == "connected")
            let stream = try await gateway.firstStream()

            try await Self.send(Self.notification(seq: 1, pushType: "background", window: 1), seq: 1, on: stream)
            #expect(try agent.next()["seq"] as? Int == 1)
            let timeout = try agent.nextFetch()
            #expect(timeout["seq"] as? Int == 1)
            #expect(timeout["result"] as? String == "timeout")
            // A 1 s window: killed half-way, so that a report could still reach the gateway.
            #expect((timeout["killedAfterMs"] as? Int).map { $0 >= 500 } == true, "\(timeout)")
            #expect(timeout["exitStatus"] == nil)

            try await Self.send(Self.notification(seq: 2, pushType: "background"), seq: 2, on: stream)
            #expect(try agent.next()["seq"] as? Int == 2)
            let next = try agent.nextFetch()
            #expect(next["seq"] as? Int == 2)
            #expect(next["exitStatus"] as? Int == 0)
            #expect(gateway.fetchReports == [#"{"results":[{"seq":2,"result":"newData"}]}"#])
        }
    }

    /// A notification as the gateway writes it; `window` is its fetchWindowSeconds, left out when nil.
    static func notification(seq: Int, pushType: String, window: Int? = nil) -> String {
        #"{"seq":\#(seq),"apnsId":"apns-\#(seq)","token":"00","topic":"\#(topic)","pushType":"\#(pushType)","priority":5,"collapseId":null,"#
            + #""payload":{"aps":{"content-available":1}},"acceptedAt":0,"delivery":"immediate","carrier":null"#
            + (window.map { #","fetchWindowSeconds":\#($0)"# } ?? "") + "}"
    }

    static func send(_ json: String, seq: Int, on stream: ResponseBodyWriter) async throws {
        let written = try await stream.eventLoop.submit {
            stream.write(ByteBuffer(string: "id: \(seq)\nevent: notification\ndata: \(json)\n\n"))
        }.get()
        #expect(written == .accepted)
    }
}
