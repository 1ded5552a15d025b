import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import PushgateModel
import PushgateDeviceClient
import PushgateTransport
import NIOConcurrencyHelpers

struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run a device agent: hold the event stream, print and acknowledge notifications.",
        discussion: """
            Creates the device on first run and keeps its id and secret in --identity (mode 0600). \
            Prints one JSON line per event on stdout: {"type":"registered",...} for each topic, \
            {"type":"connected"} when the event stream is open, {"type":"state",...} when a state \
            report was accepted, {"type":"fetch",...} when a fetch ended (below), and each \
            notification's JSON object as the gateway sent it (its "delivery" says how it came: \
            immediate, stored, piggyback with "carrier", keepalive, budget, online). Reconnects \
            with jittered back-off (after a draining gateway's retry: hint, that long plus \
            jitter), resuming with Last-Event-ID so nothing acknowledged is sent \
            again. Reports --power, --app-state and --fetch-interval on every connect, sends a \
            keep-alive every --keepalive seconds, and takes commands on stdin while it runs, one \
            per line:
              power idle|awake|lowPower
              app TOPIC foreground|background|terminated
              keepalive

            Background fetch: each silent push (pushType "background") gives its app a fetch \
            window of the notification's fetchWindowSeconds (30 when it has none), counted from \
            its arrival. With --fetch-command CMD the agent runs /bin/sh -c CMD for it, beside the \
            stream, in a process group of its own: on stdin the notification's JSON object as \
            printed, a newline, then EOF; in the environment PUSHGATE_TOPIC, PUSHGATE_SEQ and \
            PUSHGATE_APNS_ID; its stdout and stderr go to the agent's stderr. Exit 0 reports \
            newData, exit 1 noData, any other exit or a death by signal failed. Still running a \
            second before the window ends (half-way through a window of 2 s or less: the gateway \
            opened it when it sent the push, and the report must reach it in time), its process \
            group is killed (SIGKILL) and nothing is reported: the gateway counts the timeout. At most 16 commands run at once; the others wait their \
            turn, their windows running. Without --fetch-command each silent push is reported as \
            newData at once. A silent push sent again within its window is not fetched again.

            Each fetch ends with one line, {"type":"fetch","seq":N,"topic":"T","result":R,...}: \
            with "exitStatus" and "durationMs" when the command exited, "signal" and "durationMs" \
            when a signal ended it, "killedAfterMs" when it was killed (R is then "timeout"), \
            "waitedMs" when the window ended before its turn (R "timeout" too), "error" when it \
            could not run; durations count from the notification's arrival. A report the gateway \
            refuses adds "refused":{"status","reason","detail"}, one that found no connection \
            before the window ended adds "unreported" with why; neither stops the agent.
            """
    )

    @OptionGroup var client: ClientOptions

    @Option(help: "File holding this device's id and secret; created if missing.")
    var identity: String

    @Option(help: "Register this topic (an app's bundle id). Repeatable.")
    var topic: [String] = []

    @Option(help: "Power state to report: awake, idle or lowPower (default: report none, which the gateway treats as awake).")
    var power: String?

    @Option(name: .customLong("app-state"), help: "An app's state to report, TOPIC=foreground|background|terminated. Repeatable.")
    var appStates: [String] = []

    @Option(help: "Send a keep-alive (a wake event) every this many seconds; 0: never.")
    var keepalive: Int = 0

    @Option(
        name: .customLong("fetch-command"),
        help: "Run this with /bin/sh -c for each silent push, within its fetch window: exit 0 reports newData, 1 noData, anything else failed; killed at the window's end, unreported (see below). Default: report newData."
    )
    var fetchCommand: String?

    @Option(
        name: .customLong("fetch-interval"),
        help: "An app's fetch interval to report, TOPIC=minimum|never|SECONDS (1 to 604800): how often the gateway may release its held silent pushes on budget. Repeatable.",
        transform: { argument in try FetchIntervalSetting.parse(argument) }
    )
    var fetchIntervals: [(topic: String, interval: FetchInterval)] = []

    @Option(
        name: .customLong("request-timeout"),
        help: "Seconds (1 to 3600) to wait for the answer to each request (device creation, registration, state report, the event stream's head, an ack, a keep-alive) before taking the connection as dead and reconnecting."
    )
    var requestTimeout: Int = 30

    @OptionGroup var deviceCreation: DeviceCreationOptions

    func validate() throws {
        if let power, DevicePower(rawValue: power) == nil {
            throw ValidationError("--power must be one of \(DevicePower.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        for entry in appStates where Self.appState(entry) == nil {
            throw ValidationError("--app-state must be TOPIC=foreground|background|terminated, got \(entry)")
        }
        if keepalive < 0 { throw ValidationError("--keepalive cannot be negative") }
        if !(1...3600).contains(requestTimeout) { throw ValidationError("--request-timeout must be 1 to 3600 seconds, got \(requestTimeout)") }
    }

    func run() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        var state = DeviceStateReport(power: power.flatMap(DevicePower.init))
        for entry in appStates {
            if let (topic, value) = Self.appState(entry) { state.apps[topic] = value }
        }
        for (topic, interval) in fetchIntervals { state.fetchIntervals[topic] = interval }
        let agent = Agent(
            client: client,
            identityPath: identity,
            topics: topic,
            state: state,
            keepaliveSeconds: keepalive,
            requestTimeout: .seconds(requestTimeout),
            fetchCommand: fetchCommand,
            registrationSecret: deviceCreation.registrationSecret,
            group: group
        )
        try await agent.run()
    }
}

extension AgentCommand {
    /// `TOPIC=foreground|background|terminated`.
    static func appState(_ entry: String) -> (String, AppState)? {
        guard let equals = entry.lastIndex(of: "="), equals != entry.startIndex,
            let state = AppState(rawValue: String(entry[entry.index(after: equals)...]))
        else { return nil }
        return (String(entry[..<equals]), state)
    }
}

/// One device agent: identity, registrations, then the event stream for as long as it runs.
final class Agent: Sendable {
    private let client: ClientOptions
    private let identityPath: String
    private let topics: [String]
    private let keepaliveSeconds: Int
    private let requestTimeout: Duration
    private let registrationSecret: String?
    private let group: any EventLoopGroup
    /// Changed by stdin commands; reported again on every connect.
    private let state: NIOLockedValueBox<DeviceStateReport>
    private let link = AgentLink()
    private let fetch: AgentFetch

    init(
        client: ClientOptions,
        identityPath: String,
        topics: [String],
        state: DeviceStateReport,
        keepaliveSeconds: Int,
        requestTimeout: Duration,
        fetchCommand: String?,
        registrationSecret: String?,
        group: any EventLoopGroup
    ) {
        self.client = client
        self.identityPath = identityPath
        self.topics = topics
        self.state = NIOLockedValueBox(state)
        self.keepaliveSeconds = keepaliveSeconds
        self.requestTimeout = requestTimeout
        fetch = AgentFetch(command: fetchCommand, link: link)
        self.registrationSecret = registrationSecret
        self.group = group
    }

    func run() async throws {
        let commands = Task { await readCommands() }
        defer { commands.cancel() }
        let fetches = Task { await fetch.run() }
        defer { fetches.cancel() }
        var backoff = ReconnectDelay()
        var lastSeq: UInt64?
        var device: DeviceRequests?
        var registered = false
        while true {
            do {
                let connection = try await connect()
                defer {
                    link.disconnected()
                    Task { await connection.close() }
                }
                if device == nil { device = DeviceRequests(server: client.server, identity: try await loadOrCreateIdentity(connection)) }
                if !registered {
                    for topic in topics { try await register(topic, device!, connection) }
                    registered = true
                }
                link.connected((connection, device!))
                let report = state.withLockedValue { $0 }
                if !report.isEmpty { try await sendState(report, device!, connection) }
                try await holdStream(connection, device!, lastSeq: &lastSeq, backoff: &backoff)
            } catch let failure as ClientFailure {
                throw failure
            } catch {
                let delay = backoff.next()
                printError("connection lost (\(error)); reconnecting in \(delay) ms")
                try await Task.sleep(for: .milliseconds(delay))
            }
        }
    }

    private func connect() async throws -> HTTP2ClientConnection {
        try await HTTP2ClientConnection.connect(
            host: client.server.host,
            port: client.server.port,
            tls: try client.tlsContext(),
            group: group
        )
    }

    private func loadOrCreateIdentity(_ connection: HTTP2ClientConnection) async throws -> DeviceIdentity {
        if let data = FileManager.default.contents(atPath: identityPath) {
            guard let identity = try? JSONDecoder().decode(DeviceIdentity.self, from: data) else {
                throw ClientFailure(description: "\(identityPath) is not an agent identity file (expected {\"deviceId\",\"secret\"})")
            }
            return identity
        }
        let (server, secret) = (client.server, registrationSecret)
        let identity = try await answer("the device's creation", on: connection) {
            try await DeviceSetup.createDevice(on: connection, server: server, registrationSecret: secret)
        }
        let data = try JSONEncoder().encode(identity)
        guard FileManager.default.createFile(atPath: identityPath, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw ClientFailure(description: "cannot write the identity file \(identityPath)")
        }
        return identity
    }

    private func register(_ topic: String, _ device: DeviceRequests, _ connection: HTTP2ClientConnection) async throws {
        let token = try await answer("registering \(topic)", on: connection) { try await DeviceSetup.register(topic, device, on: connection) }
        emit("{\"type\":\"registered\",\"deviceId\":\(JSONText.quote(device.identity.deviceId)),\"topic\":\(JSONText.quote(topic)),\"token\":\(JSONText.quote(token))}")
    }

    private func holdStream(
        _ connection: HTTP2ClientConnection,
        _ device: DeviceRequests,
        lastSeq: inout UInt64?,
        backoff: inout ReconnectDelay
    ) async throws {
        let request = device.events(lastEventID: lastSeq)
        let response = try await answer("the event stream request", on: connection) { try await connection.stream(request) }
        if response.status == 401 {
            throw ClientFailure(description: "the gateway does not know this device or its secret (401); delete \(identityPath) to start as a new device")
        }
        guard response.status == 200 else {
            let body = await Self.start(of: response.body)
            throw RetryableRefusal.refusal(of: "the event stream", status: response.status, body: body, failure: "event stream refused")
        }
        backoff.reset()
        emit("{\"type\":\"connected\",\"deviceId\":\(JSONText.quote(device.identity.deviceId))}")
        let keepalives = keepaliveSeconds > 0 ? Task { [keepaliveSeconds] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(keepaliveSeconds))
                if Task.isCancelled { break }
                do {
                    try await self.sendKeepalive(device, connection)
                } catch where !Task.isCancelled {
                    printError("keep-alive failed (\(error))")
                }
            }
        } : nil
        defer { keepalives?.cancel() }
        // Stream acks run beside the reads, one in flight at a time: waiting for each ack's
        // answer before reading on would hold every later notification back a round trip. Acks
        // are cumulative, so the newest seq handled meanwhile is the only one worth sending next.
        let (handled, handledSink) = AsyncStream<UInt64>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let silence = NIOLockedValueBox(
            StreamSilence(heartbeatIntervalHeader: response.headers.first(name: "pushgate-heartbeat-interval"), openedAt: .now)
        )
        try await withThrowingTaskGroup(of: Void.self) { acks in
            // A connection that went dead without a word would otherwise be read from forever:
            // closing it ends the read below, and the agent reconnects.
            acks.addTask {
                while true {
                    let deadline = silence.withLockedValue { $0.deadline }
                    try await Task.sleep(until: deadline, clock: .continuous)
                    if silence.withLockedValue({ $0.isDead(at: .now) }) {
                        await connection.close()
                        return
                    }
                }
            }
            acks.addTask {
                do {
                    for await seq in handled { try await self.ack(upTo: seq, device, connection) }
                } catch where !Task.isCancelled && !(error is Unanswered) {
                    // Reading on without acking would stall once the gateway's unacked window
                    // is full: start over on a new connection, as a lost stream does.
                    printError("ack failed (\(error)); reconnecting")
                    await connection.close()
                    throw error
                }
            }
            let ended: any Error
            var parser = EventStreamParser()
            do {
                for try await chunk in response.body {
                    let receivedAt = ContinuousClock.now
                    silence.withLockedValue { $0.heard(at: receivedAt) }
                    var newest: UInt64?
                    for event in parser.feed(chunk) where event.type == "notification" {
                        emit(event.data)
                        fetch.received(event.data, at: receivedAt)
                        if let seq = event.id.flatMap(UInt64.init) { newest = seq }
                    }
                    if let newest {
                        lastSeq = max(lastSeq ?? 0, newest)
                        handledSink.yield(newest)
                    }
                }
                ended = StreamEnded()
            } catch {
                ended = error
            }
            // A draining gateway says when to come back (`retry:`); the wait adds jitter.
            if let retry = parser.retryMillis { backoff.serverAsked(millis: retry) }
            // However the stream ended, the agent starts over: the next stream's Last-Event-ID
            // acknowledges everything handled here, and closing the connection ends an ack in
            // flight at once (a send does not heed cancellation).
            acks.cancelAll()
            await connection.close()
            // An unanswered ack closed the connection, which ended the read: that is the reason to tell.
            var unanswered: Unanswered?
            while true {
                do {
                    if try await acks.next() == nil { break }
                } catch let error as Unanswered {
                    unanswered = error
                } catch {
                    continue
                }
            }
            let watch = silence.withLockedValue { $0 }
            throw unanswered ?? (watch.isDead(at: .now) ? watch.failure : ended)
        }
    }

    /// The start of a refusal's body, for the message. Waits at most 5 s: a proxy that sends a
    /// head and never ends its body must not hold the agent.
    private static func start(of body: HTTPClientResponseBody) async -> String {
        await withTaskGroup(of: String?.self) { group in
            group.addTask {
                var text = ""
                do {
                    for try await chunk in body {
                        text += String(buffer: chunk)
                        if text.utf8.count >= 300 { break }
                    }
                } catch {
                    // A body cut short still says what it said before the cut.
                }
                return text
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? ""
        }
    }

    private func ack(upTo seq: UInt64, _ device: DeviceRequests, _ connection: HTTP2ClientConnection) async throws {
        let ack = try await answer("the ack up to \(seq)", on: connection) { try await connection.send(device.ack(upTo: seq)) }
        if ack.status != 204 { printError("ack up to \(seq) answered \(ack.status)") }
    }

    /// A wake event: what the gateway held comes back in the response; printed and acked like
    /// notifications from the stream.
    private func sendKeepalive(_ device: DeviceRequests, _ connection: HTTP2ClientConnection) async throws {
        let response = try await answer("the keep-alive", on: connection) { try await connection.send(device.keepalive) }
        let receivedAt = ContinuousClock.now
        guard response.status == 200 else {
            printError("keep-alive answered \(response.status) \(String(buffer: response.body))")
            return
        }
        let body = (try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))) as? [String: Any]
        var newest: UInt64?
        for notification in body?["notifications"] as? [[String: Any]] ?? [] {
            if let data = try? JSONSerialization.data(withJSONObject: notification, options: [.sortedKeys]) {
                let json = String(decoding: data, as: UTF8.self)
                emit(json)
                fetch.received(json, at: receivedAt)
            }
            if let seq = (notification["seq"] as? NSNumber)?.uint64Value { newest = max(newest ?? 0, seq) }
        }
        if let newest { try await ack(upTo: newest, device, connection) }
    }

    private func sendState(_ report: DeviceStateReport, _ device: DeviceRequests, _ connection: HTTP2ClientConnection) async throws {
        let response = try await answer("the state report", on: connection) { try await connection.send(device.state(report)) }
        guard response.status == 204 else {
            printError("state report answered \(response.status) \(String(buffer: response.body))")
            return
        }
        emit("{\"type\":\"state\",\"state\":\(report.json)}")
    }

    /// `request`'s answer. A gateway that took the connection and then went silent (its host
    /// lost power, a NAT dropped the mapping) would hold the agent until TCP gives up, many
    /// minutes later, or for ever where something on the way still acknowledges the bytes: when
    /// no answer comes within the request timeout, the connection is closed, which fails its
    /// requests and its stream, and the agent starts over. `T` must not be optional (nil stands
    /// for the timeout). Cancelled, this waits for the request all the same (a NIO future ignores
    /// cancellation): its callers close the connection when they cancel, which ends it.
    private func answer<T: Sendable>(
        _ what: String, on connection: HTTP2ClientConnection, _ request: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let timeout = requestTimeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await request() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            if let answered = try await group.next(), let answer = answered { return answer }
            await connection.close()
            throw Unanswered(request: what, timeout: timeout)
        }
    }

    /// Commands on stdin change what the agent reports, or send a keep-alive, at once.
    private func readCommands() async {
        // readLine blocks: it gets a thread of its own, not a slot of the cooperative pool.
        let lines = AsyncStream<String> { continuation in
            Thread {
                while let line = readLine() { continuation.yield(line) }
                continuation.finish()
            }.start()
        }
        for await line in lines {
            let words = line.split(separator: " ").map(String.init)
            var report: DeviceStateReport?
            switch words.first {
            case "power" where words.count == 2 && DevicePower(rawValue: words[1]) != nil:
                report = state.withLockedValue { $0.power = DevicePower(rawValue: words[1]); return $0 }
            case "app" where words.count == 3 && AppState(rawValue: words[2]) != nil:
                report = state.withLockedValue { $0.apps[words[1]] = AppState(rawValue: words[2]); return $0 }
            case "keepalive" where words.count == 1:
                break
            default:
                printError("unknown command \"\(line)\": power idle|awake|lowPower, app TOPIC foreground|background|terminated, keepalive")
                continue
            }
            guard let (connection, device) = link.current else {
                printError("not connected; \(report == nil ? "keep-alive skipped" : "the state is reported on connect")")
                continue
            }
            do {
                if let report {
                    try await sendState(report, device, connection)
                } else {
                    try await sendKeepalive(device, connection)
                }
            } catch {
                printError("\(report == nil ? "keep-alive" : "state report") failed (\(error))")
            }
        }
    }
}

/// Not fatal: the gateway ended the stream (e.g. it is draining); the agent reconnects.
struct StreamEnded: Error, CustomStringConvertible {
    var description: String { "the gateway ended the event stream" }
}

/// Not fatal: the agent reconnects.
struct Unanswered: Error, CustomStringConvertible {
    var request: String
    var timeout: Duration
    var description: String {
        "the gateway did not answer \(request) within \(timeout.components.seconds) s (--request-timeout): the connection is taken as dead"
    }
}

/// One line on stdout, unbuffered. Not `print` + `fflush(nil)`: flushing every stream would
/// wait for stdin's lock, which the command reader holds while it blocks in `readLine`. Lines
/// come from the stream, stdin commands and fetches at once: the lock keeps each whole (a pipe
/// takes a long line in several writes).
func emit(_ line: String) {
    emitting.withLock { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
}

private let emitting = NIOLock()

private func printError(_ message: String) {
    FileHandle.standardError.write(Data("pushgate agent: \(message)\n".utf8))
}
