import Foundation
import PushgateTestKit
import Testing

/// The real `pushgate agent` against the real `pushgate serve`: its JSON lines show how each push
/// came (`delivery`, `carrier`), and its stdin commands change power and app state and send
/// keep-alives while it runs. Every wait is for a line the agent prints.
@Suite("pushgate agent: scheduler deliveries, power and app state on stdin", .serialized, .timeLimit(.minutes(3)))
struct AgentCLITests {
    static let topic = "com.example.agent"

    @Test("piggyback with carrier, lowPower hold and keep-alive release, terminated discard, as the agent sees them")
    func agentSeesTheScheduler() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // One silent push per app per hour: the second is held.
        let config = directory + "/pushgate.json"
        try Data(#"{"scheduler": {"appBurst": 1, "appRefillPerHour": 1}}"#.utf8).write(to: URL(fileURLWithPath: config))
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0", "--config", config], listeners: 1)
        let agent = try AgentProcess(server: gateway.urls[0], identity: directory + "/device.json", topic: Self.topic)

        let registered = try agent.next()
        #expect(registered["type"] as? String == "registered")
        let token = try #require(registered["token"] as? String)
        #expect(try agent.next()["type"] as? String == "connected")

        func send(_ extra: [String], _ payload: String) throws -> (disposition: String?, apnsID: String?) {
            let apnsID = UUID().uuidString.lowercased()
            let result = try runPushgate(
                ["send", "--server", gateway.urls[0], "--token", token, "--topic", Self.topic, "--apns-id", apnsID]
                    + extra + [payload]
            )
            let disposition = result.stdout.split(separator: "\n").first { $0.hasPrefix("disposition: ") }.map {
                String($0.dropFirst(13))
            }
            return (disposition, apnsID)
        }
        let silent = ["--push-type", "background", "--priority", "5"]
        let silentPayload = #"{"aps":{"content-available":1}}"#

        let first = try send(silent, silentPayload)
        #expect(first.disposition == "delivered")
        let immediate = try agent.next()
        #expect(immediate["apnsId"] as? String == first.apnsID)
        #expect(immediate["delivery"] as? String == "immediate")

        let held = try send(silent, silentPayload)
        #expect(held.disposition == "held")
        let alert = try send([], #"{"aps":{"alert":"wake up"}}"#)
        #expect(alert.disposition == "delivered")
        let piggyback = try agent.next()
        #expect(piggyback["apnsId"] as? String == held.apnsID)
        #expect(piggyback["delivery"] as? String == "piggyback")
        #expect(piggyback["carrier"] as? String == alert.apnsID)
        let carrier = try agent.next()
        #expect(carrier["apnsId"] as? String == alert.apnsID)
        #expect(carrier["delivery"] as? String == "immediate")

        agent.command("power lowPower")
        #expect((try agent.next()["applied"] as? [String: Any])?["power"] as? String == "lowPower")
        let lowPower = try send(silent, silentPayload)
        #expect(lowPower.disposition == "held")
        agent.command("keepalive")
        let released = try agent.next()
        #expect(released["apnsId"] as? String == lowPower.apnsID)
        #expect(released["delivery"] as? String == "keepalive")

        agent.command("app \(Self.topic) terminated")
        #expect(Self.appliedApp(try agent.next())?["state"] == "terminated")
        #expect(try send(silent, silentPayload).disposition == "discarded")
        // Reported background, kept terminated (as iOS keeps a force-quit app): the agent prints
        // what the gateway applied, and why, not what it reported.
        agent.command("app \(Self.topic) background")
        let kept = try agent.next()
        #expect(((kept["reported"] as? [String: Any])?["apps"] as? [String: String])?[Self.topic] == "background")
        let app = Self.appliedApp(kept)
        #expect(app?["state"] == "terminated" && app?["reported"] == "background")
        #expect(app?["reason"]?.contains("until it reports foreground") == true)
        #expect(try send([], #"{"aps":{"alert":"still shown"}}"#).disposition == "delivered")
        #expect(gateway.stop() == 0)
    }

    /// The app's entry in a state line's `applied`: what the gateway put in force.
    static func appliedApp(_ line: [String: Any]) -> [String: String]? {
        ((line["applied"] as? [String: Any])?["apps"] as? [String: [String: String]])?[topic]
    }

    @Test(
        "against a gateway with a registration secret, the agent creates its device with PUSHGATE_REGISTRATION_SECRET"
    )
    func registrationSecretFromEnvironment() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = "agent-registration-secret"
        let gateway = try GatewayProcess.withRegistrationSecret(secret, in: directory)
        defer { _ = gateway.stop() }
        let agent = try AgentProcess(
            server: gateway.urls[0],
            identity: directory + "/device.json",
            topic: Self.topic,
            environment: ["PUSHGATE_REGISTRATION_SECRET": secret]
        )
        #expect(try agent.next()["type"] as? String == "registered")
        #expect(try agent.next()["type"] as? String == "connected")
    }

    @Test(
        "a gateway that goes silent without closing (stopped, its connection kept) is given up after twice its heartbeat interval and 5 s, and the agent comes back"
    )
    func silentGatewayIsGivenUp() throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--heartbeat-interval", "2"],
            listeners: 1
        )
        defer { _ = gateway.stop() }
        let agent = try AgentProcess(
            server: gateway.urls[0],
            identity: directory + "/device.json",
            topic: Self.topic,
            capturingErrors: true
        )
        #expect(try agent.next()["type"] as? String == "registered")
        #expect(try agent.next()["type"] as? String == "connected")

        // Stopped, the gateway's kernel still holds the connection open and takes new ones into
        // the listen queue: what a dead host behind a live NAT looks like to the agent.
        let pid = gateway.process.processIdentifier
        let port = try #require(gateway.urls[0].split(separator: ":").last.map(String.init))
        let stopped = ContinuousClock.now
        kill(pid, SIGSTOP)
        var stoppedProcess: pid_t? = pid
        defer { if let stoppedProcess { kill(stoppedProcess, SIGCONT) } }
        // The agent's next connection waits in the listen queue until the gateway runs again.
        try waitUntil("the agent to give the silent connection up", seconds: 60) {
            try Self.listenQueue(port: port) != 0
        }
        let gaveUpAfter = ContinuousClock.now - stopped
        // The 9 s run from the last bytes before the stop: a stream is silent for at most 2 s, so
        // 7 s after the stop at the soonest (5 s here, for a gateway slowed by a loaded machine),
        // and well before half a minute.
        #expect(
            gaveUpAfter >= .seconds(5) && gaveUpAfter < .seconds(30),
            "given up \(gaveUpAfter) after the stop, for a 9 s limit"
        )
        kill(pid, SIGCONT)
        stoppedProcess = nil
        #expect(try agent.next()["type"] as? String == "connected")
        #expect(
            agent.exitMessages().contains(
                "nothing arrived on the event stream for 9 s, though the gateway writes to it at least every 2 s"
            )
        )
    }

    /// Connections waiting in the listen queue of the socket on 127.0.0.1:`port` (ss's Recv-Q).
    static func listenQueue(port: String) throws -> Int {
        let listing = try run("ss", ["-Hltn", "sport = :\(port)"])
        let fields = listing.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" })
        return fields.count > 1 ? Int(fields[1]) ?? 0 : 0
    }
}

/// A running `pushgate agent`, read line by line; commands go to its stdin.
final class AgentProcess: @unchecked Sendable {
    private let process: Process
    private let input = Pipe()
    private let output = Pipe()
    /// Set when the test reads what the agent says on stderr (`exitMessages`).
    private let errors: Pipe?
    private var pending = Data()
    /// Lines read while looking for another kind (`next` or `nextFetch`), in order.
    private var unread: [[String: Any]] = []

    /// `environment` is added to this process's own; `arguments` go after the usual ones.
    init(
        server: String,
        identity: String,
        topic: String,
        arguments: [String] = [],
        environment: [String: String] = [:],
        capturingErrors: Bool = false
    ) throws {
        errors = capturingErrors ? Pipe() : nil
        process = Unprivileged.process(
            ["agent", "--server", server, "--identity", identity, "--topic", topic] + arguments
        )
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors ?? FileHandle.nullDevice
        try process.run()
    }

    /// Everything the agent wrote on stderr (`capturingErrors` only). For an agent that should
    /// have exited: one still running is killed first, so that a test of a wrong agent fails
    /// instead of waiting for ever.
    func exitMessages() -> String {
        guard let errors else { return "" }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// The next JSON line but fetch lines; throws if the agent exits first, or prints nothing for
    /// `timeout` (it is then killed: a blocking read would outlast the test's time limit). Fetch
    /// lines come whenever a report is answered, between any others: `nextFetch` reads them.
    func next(timeout: DispatchTimeInterval = .seconds(60)) throws -> [String: Any] {
        try next(timeout: timeout) { $0["type"] as? String != "fetch" }
    }

    /// The next `{"type":"fetch",...}` line, as `next` reads.
    func nextFetch(timeout: DispatchTimeInterval = .seconds(60)) throws -> [String: Any] {
        try next(timeout: timeout) { $0["type"] as? String == "fetch" }
    }

    private func next(timeout: DispatchTimeInterval, where wanted: ([String: Any]) -> Bool) throws -> [String: Any] {
        if let index = unread.firstIndex(where: wanted) { return unread.remove(at: index) }
        let watchdog = killAfter(timeout, process)
        defer { watchdog.cancel() }
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[pending.startIndex..<newline]
                pending = Data(pending[(newline + 1)...])
                guard let object = try JSONSerialization.jsonObject(with: line) as? [String: Any] else {
                    throw AgentExited(output: String(decoding: line, as: UTF8.self))
                }
                if wanted(object) { return object }
                unread.append(object)
                continue
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw AgentExited(output: String(decoding: pending, as: UTF8.self)) }
            pending.append(chunk)
        }
    }

    func command(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    struct AgentExited: Error, CustomStringConvertible {
        var output: String
        var description: String { "the agent stopped printing JSON lines; last output: \(output)" }
    }

    /// Ends the agent (SIGKILL, as a device that loses power) and waits for it.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit {
        stop()
    }
}
