import Foundation
import PushgateTestKit
import Testing

/// Web Push end to end: application servers nobody here wrote (pywebpush with py-vapid and
/// http_ece over HTTP/1.1, httpx with http_ece over HTTP/2, requests for pushes pywebpush never
/// sends) against the real `pushgate serve`, and the real `pushgate agent` subscribing,
/// decrypting and printing. Every wait is for a line the agent prints.
@Suite("Web Push: pywebpush and httpx against the gateway and the agent", .serialized, .timeLimit(.minutes(4)))
struct WebPushCLITests {
    /// An APNs topic the agent registers beside its subscriptions (AgentProcess needs one).
    static let topic = "com.example.webpush"

    /// A gateway, an agent subscribed as `name`, and the subscription JSON it printed.
    final class Setup {
        let directory: String
        let gateway: GatewayProcess
        var agent: AgentProcess
        var subscription: [String: Any] = [:]

        init(name: String = "inbox", agentArguments: [String] = [], gatewayArguments: [String] = []) throws {
            directory = try scratchDirectory()
            gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"] + gatewayArguments, listeners: 1)
            agent = try AgentProcess(
                server: gateway.urls[0],
                identity: directory + "/device.json",
                topic: WebPushCLITests.topic,
                arguments: ["--webpush", name] + agentArguments
            )
            subscription = try awaitSubscription()
        }

        /// Reads the agent's start: registered, subscription, connected; the subscription.
        func awaitSubscription() throws -> [String: Any] {
            #expect(try agent.next()["type"] as? String == "registered")
            let line = try agent.next()
            #expect(line["type"] as? String == "subscription")
            let subscription = try #require(line["subscription"] as? [String: Any])
            // A state report (--power) is answered before the stream opens.
            var next = try agent.next()
            if next["type"] as? String == "state" { next = try agent.next() }
            #expect(next["type"] as? String == "connected")
            return subscription
        }

        var json: String {
            String(decoding: try! JSONSerialization.data(withJSONObject: subscription), as: UTF8.self)
        }

        var endpoint: String { subscription["endpoint"] as! String }

        /// pywebpush's answer to `arguments` (`send` by default).
        func send(_ arguments: [String]) throws -> [String: Any] {
            try WebPushCLITests.sender(["send", json] + arguments)
        }

        /// The next Web Push message the agent printed.
        func nextMessage() throws -> [String: Any] {
            while true {
                let line = try agent.next()
                if line["type"] as? String == "webpush" { return line }
            }
        }

        deinit {
            _ = gateway.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    static func sender(_ arguments: [String]) throws -> [String: Any] {
        let result = try PythonClient.run("webpush_sender.py", arguments)
        let line = try #require(result.stdout.split(separator: "\n").last)
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test(
        "round trip: pywebpush's plaintext is what the agent prints; 3993 bytes delivered, 3994 refused 413; an HTTP/2 sender too; a restarted agent keeps its endpoint and keys; unsubscribe makes it 410; an unknown endpoint is 404"
    )
    func roundTrip() throws {
        let setup = try Setup()
        let keys = try #require(setup.subscription["keys"] as? [String: String])
        #expect(setup.subscription["expirationTime"] is NSNull)
        #expect(setup.endpoint.hasPrefix(setup.gateway.urls[0] + "/webpush/"))
        let vapid = setup.directory + "/vapid.pem"
        _ = try Self.sender(["vapid-key", vapid])

        let sent = try setup.send(["--data", "hello, Web Push ✓", "--vapid", vapid])
        #expect(sent["status"] as? Int == 201)
        #expect(sent["ttl"] as? String == "60")
        #expect((sent["location"] as? String)?.hasPrefix(setup.gateway.urls[0] + "/webpush/messages/") == true)
        let message = try setup.nextMessage()
        #expect(message["name"] as? String == "inbox")
        #expect(message["data"] as? String == "hello, Web Push ✓")
        #expect(message["seq"] is Int)

        #expect(try setup.send(["--size", "3993"])["status"] as? Int == 201)
        #expect((try setup.nextMessage()["data"] as? String)?.utf8.count == 3993)
        let tooLarge = try setup.send(["--size", "3994"])
        #expect(tooLarge["status"] as? Int == 413)
        #expect(tooLarge["reason"] as? String == "PayloadTooLarge")

        let overHTTP2 = try Self.sender(["h2", setup.json, "--data", "over HTTP/2", "--vapid", vapid])
        #expect(overHTTP2["status"] as? Int == 201)
        #expect(overHTTP2["httpVersion"] as? String == "HTTP/2")
        #expect(try setup.nextMessage()["data"] as? String == "over HTTP/2")

        let unknown = setup.gateway.urls[0] + "/webpush/" + String(repeating: "0f", count: 32)
        let notFound = try Self.sender(["raw", unknown, "--header", "TTL: 60"])
        #expect(notFound["status"] as? Int == 404)

        // A restarted agent: the same endpoint and keys, from its identity file (owner-only).
        let attributes = try FileManager.default.attributesOfItem(atPath: setup.directory + "/device.json")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        setup.agent = try AgentProcess(
            server: setup.gateway.urls[0],
            identity: setup.directory + "/device.json",
            topic: Self.topic,
            arguments: ["--webpush", "inbox"]
        )
        let again = try setup.awaitSubscription()
        #expect(again["endpoint"] as? String == setup.endpoint)
        #expect(again["keys"] as? [String: String] == keys)
        #expect(try setup.send(["--data", "after the restart"])["status"] as? Int == 201)
        #expect(try setup.nextMessage()["data"] as? String == "after the restart")

        setup.agent.command("unsubscribe inbox")
        #expect(try setup.agent.next()["type"] as? String == "unsubscribed")
        let gone = try setup.send(["--data", "too late"])
        #expect(gone["status"] as? Int == 410)
        #expect(gone["reason"] as? String == "Unregistered")
    }

    @Test(
        "a restricted subscription: its key 201, another key 403, none 401, a wrong aud 403, exp 48 h ahead 403"
    )
    func restricted() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try #require(try Self.sender(["vapid-key", directory + "/right.pem"])["k"] as? String)
        _ = try Self.sender(["vapid-key", directory + "/other.pem"])
        let setup = try Setup(name: "restricted", agentArguments: ["--webpush-vapid-key", key])
        let right = ["--vapid", directory + "/right.pem"]

        #expect(try setup.send(["--data", "signed"] + right)["status"] as? Int == 201)
        #expect(try setup.nextMessage()["data"] as? String == "signed")
        let other = try setup.send(["--data", "x", "--vapid", directory + "/other.pem"])
        #expect(other["status"] as? Int == 403)
        #expect(other["reason"] as? String == "BadJwtToken")
        let none = try setup.send(["--data", "x"])
        #expect(none["status"] as? Int == 401)
        #expect(none["reason"] as? String == "VapidRequired")
        let audience = try setup.send(["--data", "x", "--aud", "https://push.example.com"] + right)
        #expect(audience["status"] as? Int == 403)
        let future = try setup.send(["--data", "x", "--exp-hours", "48"] + right)
        #expect(future["status"] as? Int == 403)
        #expect(future["reason"] as? String == "BadJwtToken")
    }

    @Test("each 400: no TTL, a TTL not digits, a bad Urgency, a bad Topic, a body without aes128gcm")
    func badRequests() throws {
        let setup = try Setup()
        let cases: [([String], String)] = [
            ([], "BadTTL"),
            (["--header", "TTL: soon"], "BadTTL"),
            (["--header", "TTL: 60", "--header", "Urgency: urgent"], "BadUrgency"),
            (["--header", "TTL: 60", "--header", "Topic: not a topic"], "BadMessageTopic"),
            (["--header", "TTL: 60", "--body", "plaintext"], "BadContentEncoding"),
            (["--header", "TTL: 60", "--header", "Content-Encoding: aesgcm", "--body", "x"], "BadContentEncoding"),
        ]
        for (arguments, reason) in cases {
            let answer = try Self.sender(["raw", setup.endpoint] + arguments)
            #expect(answer["status"] as? Int == 400, "\(arguments)")
            #expect(answer["reason"] as? String == reason, "\(arguments)")
        }
        // An empty body without Content-Encoding is an empty message.
        #expect(try Self.sender(["raw", setup.endpoint, "--header", "TTL: 60"])["status"] as? Int == 201)
        let empty = try setup.nextMessage()
        #expect(empty["data"] as? String == "")
    }

    @Test(
        "offline then online: delivered in order, a Topic's older message replaced, a TTL 0 message never delivered"
    )
    func offlineThenOnline() throws {
        let setup = try Setup()
        setup.agent.stop()
        for text in ["first", "second", "third"] {
            #expect(try setup.send(["--data", text])["status"] as? Int == 201)
        }
        #expect(try setup.send(["--data", "score 1-0", "--topic", "score"])["disposition"] as? String == "held")
        #expect(try setup.send(["--data", "score 2-0", "--topic", "score"])["disposition"] as? String == "coalesced")
        let nowOrNever = try setup.send(["--data", "now or never", "--ttl", "0"])
        #expect(nowOrNever["status"] as? Int == 201)
        #expect(nowOrNever["ttl"] as? String == "0")
        #expect(nowOrNever["disposition"] as? String == "discarded")

        setup.agent = try AgentProcess(
            server: setup.gateway.urls[0],
            identity: setup.directory + "/device.json",
            topic: Self.topic,
            arguments: ["--webpush", "inbox"]
        )
        _ = try setup.awaitSubscription()
        #expect(try setup.send(["--data", "online"])["status"] as? Int == 201)
        var received: [String] = []
        while received.last != "online" { received.append(try #require(try setup.nextMessage()["data"] as? String)) }
        #expect(received == ["first", "second", "third", "score 2-0", "online"])
    }

    @Test(
        "urgency: in lowPower a low message is held and does not ride along with a high one that is delivered; awake releases it"
    )
    func urgency() throws {
        let setup = try Setup(agentArguments: ["--power", "lowPower"])
        let low = try setup.send(["--data", "topic update", "--urgency", "low"])
        #expect(low["status"] as? Int == 201)
        #expect(low["disposition"] as? String == "held")
        let high = try setup.send(["--data", "incoming call", "--urgency", "high"])
        #expect(high["disposition"] as? String == "delivered")
        // A piggybacked message would come first: what was held rides ahead of its carrier.
        #expect(try setup.nextMessage()["data"] as? String == "incoming call")
        setup.agent.command("power awake")
        #expect(try setup.nextMessage()["data"] as? String == "topic update")
    }

    @Test("--fetch-command runs for Web Push messages, with the printed line on stdin; a low one reports its result")
    func fetchCommand() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let setup = try Setup(agentArguments: ["--fetch-command", #"grep -q '"data":"sync now"' && exit 1"#])
        #expect(try setup.send(["--data", "sync now", "--urgency", "low"])["disposition"] as? String == "delivered")
        #expect(try setup.nextMessage()["data"] as? String == "sync now")
        let fetch = try setup.agent.nextFetch()
        #expect(fetch["topic"] as? String == "inbox")
        #expect(fetch["result"] as? String == "noData")
        #expect(fetch["refused"] == nil && fetch["unreported"] == nil)
    }
}
