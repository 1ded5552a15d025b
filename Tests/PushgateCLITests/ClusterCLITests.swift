import Foundation
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// Three gateways on one PostgreSQL database, as three hosts would run them (here on one host:
/// each its own ports): a push taken by any node reaches the device's stream on another, with
/// its disposition; a device offline on one node gets what another took when it connects to a
/// third; a stream opened on another node ends the first; silent budgets hold across nodes; Web
/// Push reaches a subscription through any node; and the node holding a device killed -9 loses
/// nothing answered 200.
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
        "Web Push through nodes that do not hold the subscription: pywebpush answered 201 and the agent prints it; a restricted subscription's key checked by its owner (403 for another key); 413 as on one node"
    )
    func webPushCrossNode() throws {
        let nodes = try cluster()
        defer { for node in nodes { _ = node.stop() } }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try #require(try WebPushCLITests.sender(["vapid-key", directory + "/right.pem"])["k"] as? String)
        _ = try WebPushCLITests.sender(["vapid-key", directory + "/other.pem"])
        let agent = try AgentProcess(
            server: nodes[0].urls[0],
            identity: directory + "/device.json",
            topic: Self.topic,
            arguments: ["--webpush", "inbox", "--webpush-vapid-key", key]
        )
        #expect(try agent.next()["type"] as? String == "registered")
        let line = try agent.next()
        var subscription = try #require(line["subscription"] as? [String: Any])
        #expect(try agent.next()["type"] as? String == "connected")
        let endpoint = try #require(subscription["endpoint"] as? String)
        #expect(endpoint.hasPrefix(nodes[0].urls[0] + "/webpush/"))

        for (index, node) in nodes.enumerated().dropFirst() {
            // The same subscription, reached through another node.
            subscription["endpoint"] = node.urls[0] + endpoint.dropFirst(nodes[0].urls[0].count)
            let json = String(decoding: try JSONSerialization.data(withJSONObject: subscription), as: UTF8.self)
            let text = "through n\(index + 1) ✓"
            let sent = try WebPushCLITests.sender(
                ["send", json, "--data", text, "--ttl", "120", "--vapid", directory + "/right.pem"]
            )
            #expect(sent["status"] as? Int == 201, "\(sent)")
            #expect(sent["ttl"] as? String == "120")
            #expect((sent["location"] as? String)?.contains("/webpush/messages/") == true, "\(sent)")
            var message = try agent.next()
            while message["type"] as? String != "webpush" { message = try agent.next() }
            #expect(message["name"] as? String == "inbox" && message["data"] as? String == text)

            let other = try WebPushCLITests.sender(["send", json, "--data", "x", "--vapid", directory + "/other.pem"])
            #expect(other["status"] as? Int == 403 && other["reason"] as? String == "BadJwtToken", "\(other)")
            let tooLarge = try WebPushCLITests.sender(
                ["send", json, "--size", "3994", "--vapid", directory + "/right.pem"]
            )
            #expect(tooLarge["status"] as? Int == 413 && tooLarge["reason"] as? String == "PayloadTooLarge")
        }
    }

    @Test(
        "with provider tokens required, a connection that proves the cluster's secret gets the full stream limit at once: pushes forwarded on it do not wait on one another"
    )
    func provenPeerStreams() throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try ProviderAuthCLITests.makeSigningKey(in: directory)
        let node = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--database-url", server.url(database: database), "--node-name", "n1",
                "--provider-key", "\(ProviderAuthCLITests.teamID):\(ProviderAuthCLITests.keyID):\(key):\(Self.topic)",
            ],
            listeners: 1,
            storeInSQLite: true
        )
        defer { _ = node.stop() }
        let secret = try server.psql("SELECT secret FROM pushgate_cluster", database: database)
        struct Streams: Decodable {
            var before: Int
            var after: Int
            var first: Int
            var statuses: [Int]
        }
        let streams = try PythonClient.json(
            Streams.self,
            "peer_streams.py",
            ["--url", node.urls[0], "--secret", secret]
        )
        // One stream until a connection proves something, as APNs allows a provider before its
        // token.
        #expect(streams.before == 1)
        #expect(streams.after > 8)
        #expect(streams.first == 204 && streams.statuses == Array(repeating: 204, count: 8))
    }

    @Test("a node with TLS listeners only is reached by the others on a loopback listener of its own")
    func tlsOnlyNode() throws {
        let server = try PostgresServer.shared()
        let url = server.url(database: try server.createDatabase())
        let cleartext = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--database-url", url, "--node-name", "n1"],
            listeners: 1,
            storeInSQLite: true
        )
        defer { _ = cleartext.stop() }
        let tls = try GatewayProcess(
            arguments: [
                "--tls-listen", "127.0.0.1:0", "--tls-cert", Fixtures.tls("server.pem"), "--tls-key",
                Fixtures.tls("server-key.pem"), "--database-url", url, "--node-name", "n2",
            ],
            listeners: 1,
            storeInSQLite: true
        )
        defer { _ = tls.stop() }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(
            server: tls.urls[0],
            identity: directory + "/device.json",
            topic: Self.topic,
            arguments: ["--cacert", Fixtures.tls("ca.pem")]
        )
        let token = try #require(try agent.next()["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")
        let answer = try send(cleartext, token, #"{"aps":{"alert":"over loopback"}}"#)
        #expect(answer.status == 200 && answer.headers["pushgate-disposition"] == "delivered", "\(answer.raw)")
        #expect((try agent.next()["payload"] as? [String: Any]).map { "\($0)" }?.contains("over loopback") == true)
        #expect(try Self.nodes(cleartext).first { $0.name == "n2" }?.address.hasPrefix("http://127.0.0.1:") == true)
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

    @Test(
        "operators: every node lists the live nodes and names a device's owner; a node killed -9 leaves every list"
    )
    func operatorsSeeTheCluster() throws {
        let nodes = try cluster()
        defer { for node in nodes { _ = node.stop() } }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(server: nodes[0].urls[0], identity: directory + "/device.json", topic: Self.topic)
        _ = try agent.next()  // registered
        #expect(try agent.next()["type"] as? String == "connected")
        let identity = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: directory + "/device.json"))
        )
        let deviceID = try #require((identity as? [String: Any])?["deviceId"] as? String)

        // Each node lists all three, itself marked; n1's renewals (every second) count the device.
        for (index, node) in nodes.enumerated() {
            try waitUntil("n\(index + 1) lists three nodes, n1 holding the device") {
                let listed = try Self.nodes(node)
                return listed.map(\.name) == ["n1", "n2", "n3"] && listed.first?.devicesHeld == 1
            }
            let listed = try Self.nodes(node)
            #expect(listed.filter(\.this).map(\.name) == ["n\(index + 1)"])
            #expect(listed.allSatisfy { $0.leaseExpiresAt > $0.startedAt && $0.address.hasPrefix("http://127.0.0.1:") })
            #expect(try Self.get(node, "/readyz").status == 200)
        }

        // The device's view from a node that does not hold it is its owner's, naming it.
        let view = try Self.get(nodes[2], "/v1/admin/devices/\(deviceID)")
        #expect(view.status == 200, "\(view.body)")
        let device = try JSONSerialization.jsonObject(with: Data(view.body.utf8)) as? [String: Any]
        #expect(device?["owner"] as? String == "n1")
        #expect(device?["connected"] as? Bool == true)

        // Stats say whose figures they are.
        let stats =
            try JSONSerialization.jsonObject(with: Data(try Self.get(nodes[1], "/v1/admin/stats").body.utf8))
            as? [String: Any]
        #expect(stats?["scope"] as? String == "node" && stats?["node"] as? String == "n2")
        #expect((stats?["nodes"] as? [Any])?.count == 3)

        // Metrics carry the node's name.
        // (The live nodes are counted at joining and every 2 s.)
        var metrics = ""
        try waitUntil("n1 counts three live nodes") {
            metrics = try Self.get(nodes[0], "/metrics").body
            return metrics.contains(#"pushgate_cluster_nodes{node="n1"} 3"#)
        }
        func value(_ series: String) -> Double? {
            metrics.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap {
                Double($0.split(separator: " ")[1])
            }
        }
        #expect(value(#"pushgate_cluster_member{node="n1"}"#) == 1)
        #expect(value(#"pushgate_cluster_devices_held{node="n1"}"#) == 1)
        #expect(value(#"pushgate_cluster_nodes{node="n1"}"#) == 3)
        // Claimed once, by its registration (a takeover) or its stream, whichever came first.
        let claims = [
            value(#"pushgate_cluster_claims_total{node="n1",reason="stream"}"#),
            value(#"pushgate_cluster_claims_total{node="n1",reason="takeover"}"#),
        ]
        #expect(claims.compactMap { $0 }.reduce(0, +) == 1, "\(claims)")

        // Killed -9, n3 leaves the others' lists once its lease has expired (5 s).
        kill(nodes[2].process.processIdentifier, SIGKILL)
        for node in nodes.prefix(2) {
            try waitUntil("n3 gone from the list", seconds: 30) { try Self.nodes(node).map(\.name) == ["n1", "n2"] }
        }
    }

    @Test(
        "the owner paused (SIGSTOP) past its lease: the device moves, pushes reach it without the paused node, which takes nothing back when resumed"
    )
    func ownerPaused() throws {
        let nodes = try cluster(["--heartbeat-interval", "2"])
        defer {
            kill(nodes[0].process.processIdentifier, SIGCONT)
            for node in nodes { _ = node.stop() }
        }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(
            server: nodes[0].urls[0],
            identity: directory + "/device.json",
            topic: Self.topic,
            arguments: ["--server", nodes[1].urls[0]]
        )
        let token = try #require(try agent.next()["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")
        var received: [String] = []
        func push(_ node: GatewayProcess, _ text: String) throws -> CurlResponse {
            try curlPush(
                node.urls[0],
                token: token,
                topic: Self.topic,
                apnsID: nil,
                pushType: "alert",
                body: #"{"aps":{"alert":"\#(text)"}}"#
            )
        }
        func receive(_ text: String) throws {
            while true {
                let event = try agent.next(timeout: .seconds(30))
                guard let payload = event["payload"] else { continue }
                let said = "\(payload)"
                received.append(said)
                if said.contains(text) { return }
            }
        }
        let before = try push(nodes[2], "before")
        #expect(before.headers["pushgate-disposition"] == "delivered", "\(before.raw)")
        try receive("before")

        kill(nodes[0].process.processIdentifier, SIGSTOP)
        // The agent hears nothing for twice the heartbeat and moves to n2, which claims the device.
        #expect(try agent.next(timeout: .seconds(30))["type"] as? String == "connected")
        for index in 1...5 {
            let answer = try push(nodes[2], "paused \(index)")
            #expect(answer.status == 200, "\(answer.raw)")
            try receive("paused \(index)")
        }

        kill(nodes[0].process.processIdentifier, SIGCONT)
        try waitUntil("n1 a member again", seconds: 30) { try Self.get(nodes[0], "/readyz").status == 200 }
        let after = try push(nodes[0], "after")
        #expect(after.headers["pushgate-disposition"] == "delivered", "\(after.raw)")
        try receive("after")
        #expect(nodes[0].logged.contains("cluster lease lost"), "n1 never said it let its devices go")
        // Each push once: nothing acknowledged came again, from n1 or n2.
        #expect(Set(received).count == received.count, "\(received)")
        #expect(received.count == 7, "\(received)")
    }

    @Test(
        "drain under load: the owner's SIGTERM ends its streams, the agent moves to another node, every push answered 200 arrives"
    )
    func drainUnderLoad() throws {
        let nodes = try cluster(["--drain-grace-seconds", "1"])
        defer { for node in nodes { _ = node.stop() } }
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try AgentProcess(
            server: nodes[0].urls[0],
            identity: directory + "/device.json",
            topic: Self.topic,
            arguments: ["--server", nodes[1].urls[0]]
        )
        let token = try #require(try agent.next()["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")

        let burst = try PythonClient.json(
            BurstResult.self,
            "provider_burst.py",
            [
                "--url", nodes[2].urls[0], "--token", token, "--topic", Self.topic, "--count", "400",
                "--concurrency", "8", "--run-after", "100",
                "--run", #"["kill", "-TERM", "\#(nodes[0].process.processIdentifier)"]"#,
            ]
        )
        nodes[0].process.waitUntilExit()
        #expect(nodes[0].process.terminationStatus == 0, "\(nodes[0].logged.suffix(2000))")
        #expect(burst.ok.count >= 100)
        #expect(burst.unknown.isEmpty, "\(burst.unknown.prefix(3))")
        #expect(burst.rejected.allSatisfy { $0.status == 503 }, "\(burst.rejected.prefix(3))")
        let answered = Set(burst.ok)
        var received = Set<String>()
        var reconnected = false
        while !answered.isSubset(of: received) {
            let event = try agent.next(timeout: .seconds(30))
            if let id = event["apnsId"] as? String { received.insert(id) }
            if event["type"] as? String == "connected" { reconnected = true }
        }
        while !reconnected { reconnected = try agent.next(timeout: .seconds(30))["type"] as? String == "connected" }
        let later = try send(nodes[2], token, #"{"aps":{"alert":"after the drain"}}"#)
        #expect(later.headers["pushgate-disposition"] == "delivered", "\(later.raw)")
        // The drained node left the cluster at once.
        #expect(try Self.nodes(nodes[1]).map(\.name) == ["n2", "n3"])
    }

    struct Node: Decodable {
        var name: String
        var address: String
        var startedAt: Int64
        var leaseExpiresAt: Int64
        var devicesHeld: Int
        var this: Bool
    }

    /// The node's list; empty while it answers other than 200 (joining).
    static func nodes(_ node: GatewayProcess) throws -> [Node] {
        struct Nodes: Decodable { var nodes: [Node] }
        let answer = try get(node, "/v1/admin/nodes")
        guard answer.status == 200 else { return [] }
        return try JSONDecoder().decode(Nodes.self, from: Data(answer.body.utf8)).nodes
    }

    /// An operator's GET (no admin token: loopback is trusted), over HTTP/1.1.
    static func get(_ node: GatewayProcess, _ path: String) throws -> (status: Int, body: String) {
        let result = try run("curl", ["-sS", "--max-time", "10", "-w", "\n%{http_code}", node.urls[0] + path])
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? -1, lines.dropLast().joined(separator: "\n"))
    }
}
