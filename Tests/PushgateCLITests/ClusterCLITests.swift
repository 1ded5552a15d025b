import Foundation
import PushgateStoreTestKit
import Testing

/// Three gateways on one PostgreSQL database, as three hosts would run them (here on one host:
/// each its own ports): a push taken by any node reaches the device's stream on another, with
/// its disposition; a device offline on one node gets what another took when it connects to a
/// third; a stream opened on another node ends the first; silent budgets hold across nodes; and
/// the node holding a device killed -9 loses nothing answered 200.
@Suite("Cluster: three nodes on one PostgreSQL", .serialized, .timeLimit(.minutes(4)))
struct ClusterCLITests {
    static let topic = "com.example.cluster"

    /// Three nodes (n1, n2, n3) on a new database of the shared test server.
    private func cluster(_ extra: [String] = []) throws -> [GatewayProcess] {
        let server = try PostgresServer.shared()
        let url = server.url(database: try server.createDatabase())
        return try (1...3).map { index in
            try GatewayProcess(
                arguments: ["--listen", "127.0.0.1:0", "--database-url", url, "--node-name", "n\(index)"] + extra,
                listeners: 1,
                storeInSQLite: true
            )
        }
    }

    private func send(
        _ node: GatewayProcess,
        _ token: String,
        _ body: String,
        silent: Bool = false
    ) throws
        -> CurlResponse
    {
        try curlPush(
            node.urls[0],
            token: token,
            topic: Self.topic,
            apnsID: nil,
            pushType: silent ? "background" : "alert",
            body: body,
            headers: silent ? ["apns-priority": "5"] : [:]
        )
    }

    @Test("a push sent to any node reaches the device's stream on another, answered delivered")
    func crossNode() throws {
        let nodes = try cluster()
        defer { for node in nodes { _ = node.stop() } }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(server: nodes[0].urls[0], identity: directory + "/device.json", topic: Self.topic)
        let registered = try agent.next()
        let token = try #require(registered["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")
        for (index, node) in nodes.enumerated() {
            let answer = try send(node, token, #"{"aps":{"alert":"to n\#(index + 1)"}}"#)
            #expect(answer.status == 200 && answer.headers["pushgate-disposition"] == "delivered", "\(answer.raw)")
            let event = try agent.next()
            #expect((event["payload"] as? [String: Any]).map { "\($0)" }?.contains("to n\(index + 1)") == true)
        }
    }

    @Test(
        "offline: a push taken by one node is stored; the device connecting to another gets it; its stream opened on a third then ends the second's"
    )
    func offlineAndMoving() throws {
        let nodes = try cluster()
        defer { for node in nodes { _ = node.stop() } }
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [nodes[0].urls[0], Self.topic])
        let stored = try send(nodes[1], device.token, #"{"aps":{"alert":"while offline"}}"#)
        #expect(stored.status == 200 && stored.headers["pushgate-disposition"] == "stored", "\(stored.raw)")

        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let identity = directory + "/device.json"
        try Data(#"{"deviceId":"\#(device.deviceId)","secret":"\#(device.secret)"}"#.utf8)
            .write(to: URL(fileURLWithPath: identity))
        try Unprivileged.handOver(identity)
        let agent = try AgentProcess(
            server: nodes[2].urls[0],
            identity: identity,
            topic: Self.topic,
            capturingErrors: true
        )
        _ = try agent.next()  // registered (the same token again)
        #expect(try agent.next()["type"] as? String == "connected")
        let event = try agent.next()
        #expect(event["delivery"] as? String == "stored")
        #expect((event["payload"] as? [String: Any]).map { "\($0)" }?.contains("while offline") == true)

        // A second stream, on another node, ends the first within 10 s (the agent then comes
        // back: the newest stream wins again, and the curl stream ends in turn).
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = [
            "-sS", "-N", "--http2-prior-knowledge", "--max-time", "30", "-o", "/dev/null", "-w", "%{http_code}",
            "-H", "authorization: bearer \(device.secret)", nodes[1].urls[0] + "/v1/devices/\(device.deviceId)/events",
        ]
        let output = Pipe()
        curl.standardOutput = output
        let started = ContinuousClock.now
        try curl.run()
        curl.waitUntilExit()
        let took = ContinuousClock.now - started
        #expect(curl.terminationStatus == 0, "the curl stream did not end cleanly")
        #expect(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "200")
        #expect(took < .seconds(15), "the stream on n2 lasted \(took)")
        let said = agent.exitMessages()
        #expect(said.contains("connection to \(nodes[2].urls[0]) lost"), "\(said)")
    }

    @Test("silent budgets hold whichever node a push arrives on: three delivered, the fourth held")
    func budgetAcrossNodes() throws {
        let nodes = try cluster()
        defer { for node in nodes { _ = node.stop() } }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(server: nodes[0].urls[0], identity: directory + "/device.json", topic: Self.topic)
        let token = try #require(try agent.next()["token"] as? String)
        _ = try agent.next()  // connected
        var dispositions: [String] = []
        for node in nodes + [nodes[1]] {
            let answer = try send(node, token, #"{"aps":{"content-available":1}}"#, silent: true)
            dispositions.append(answer.headers["pushgate-disposition"] ?? "\(answer.status)")
        }
        #expect(dispositions == ["delivered", "delivered", "delivered", "held"])
    }

    @Test(
        "the node holding the device killed -9 under load: every push answered 200 reaches the agent, which moves to another node"
    )
    func ownerKilled() throws {
        let nodes = try cluster()
        defer { for node in nodes { _ = node.stop() } }
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [nodes[0].urls[0], Self.topic])
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let identity = directory + "/device.json"
        try Data(#"{"deviceId":"\#(device.deviceId)","secret":"\#(device.secret)"}"#.utf8)
            .write(to: URL(fileURLWithPath: identity))
        try Unprivileged.handOver(identity)
        let agent = try AgentProcess(
            server: nodes[0].urls[0],
            identity: identity,
            topic: Self.topic,
            arguments: ["--server", nodes[1].urls[0]]
        )
        _ = try agent.next()  // registered
        #expect(try agent.next()["type"] as? String == "connected")

        // Pushes to the third node while the first, which holds the device, is killed.
        let burst = try PythonClient.json(
            BurstResult.self,
            "provider_burst.py",
            [
                "--url", nodes[2].urls[0], "--token", device.token, "--topic", Self.topic, "--count", "400",
                "--concurrency", "8", "--kill-pid", "\(nodes[0].process.processIdentifier)", "--kill-after", "100",
            ]
        )
        #expect(burst.ok.count >= 100)
        #expect(burst.rejected.allSatisfy { $0.status == 503 }, "\(burst.rejected.prefix(3))")
        // Whatever was answered 200 arrives (duplicates allowed: those sent but not acked).
        let answered = Set(burst.ok)
        var received = Set<String>()
        while !answered.isSubset(of: received) {
            let event = try agent.next(timeout: .seconds(30))
            if let id = event["apnsId"] as? String { received.insert(id) }
        }
        #expect(answered.isSubset(of: received))
    }
}
