import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PushgateDeviceClient
import PushgateModel
import PushgateTransport

/// One device agent: identity, registrations, then the event stream for as long as it runs.
final class Agent: Sendable {
    private let client: ClientOptions
    private let identityPath: String
    private let topics: [String]
    private let keepaliveSeconds: Int
    private let requestTimeout: Duration
    private let registrationSecret: String?
    /// Retry even what retrying cannot fix (a supervised agent, whose gateway may be fixed).
    private let retryForever: Bool
    private let group: any EventLoopGroup
    /// Changed by stdin commands; reported again on every connect.
    private let state: NIOLockedValueBox<DeviceStateReport>
    private let link = AgentLink()
    private let fetch: AgentFetch
    private let webPushWanted: [AgentWebPush.Wanted]
    /// Set once the identity is loaded or created.
    private let webPush = NIOLockedValueBox<AgentWebPush?>(nil)

    init(
        client: ClientOptions,
        identityPath: String,
        topics: [String],
        state: DeviceStateReport,
        keepaliveSeconds: Int,
        requestTimeout: Duration,
        fetchCommand: String?,
        registrationSecret: String?,
        retryForever: Bool,
        webPush: [AgentWebPush.Wanted] = [],
        group: any EventLoopGroup
    ) {
        self.webPushWanted = webPush
        self.client = client
        self.identityPath = identityPath
        self.topics = topics
        self.state = NIOLockedValueBox(state)
        self.keepaliveSeconds = keepaliveSeconds
        self.requestTimeout = requestTimeout
        fetch = AgentFetch(command: fetchCommand, link: link)
        self.registrationSecret = registrationSecret
        self.retryForever = retryForever
        self.group = group
    }

    func run() async throws {
        let commands = Task { await readCommands() }
        defer { commands.cancel() }
        let fetches = Task { await fetch.run() }
        defer { fetches.cancel() }
        var backoff = ReconnectDelay()
        var lastSeq: UInt64?
        var identity: DeviceIdentity?
        var registered = false
        var subscribed = false
        // The gateways to try, in turn: the one that failed is left for the next.
        let servers = client.servers.isEmpty ? [ClientOptions.defaultServer] : client.servers
        var turn = 0
        // Failures that retrying the same gateway cannot fix, in a row: the agent gives up once
        // every gateway has failed so (unless --retry-forever).
        var permanentFailures = 0
        while true {
            let server = servers[turn % servers.count]
            do {
                let connection = try await connect(server)
                defer {
                    link.disconnected()
                    Task { await connection.close() }
                }
                if identity == nil { identity = try await loadOrCreateIdentity(connection, server) }
                let device = DeviceRequests(server: server, identity: identity!)
                if !registered {
                    for topic in topics { try await register(topic, device, connection) }
                    registered = true
                }
                if !subscribed, let webPush = webPush.withLockedValue({ $0 }) {
                    do {
                        try await webPush.subscribe(device, on: connection) { what, request in
                            try await self.answer(what, on: connection, request)
                        }
                    } catch is UnknownDevice {
                        throw unknownDevice
                    }
                    subscribed = true
                }
                link.connected((connection, device))
                // The gateway answered (a TLS handshake completes with the first request).
                permanentFailures = 0
                let report = state.withLockedValue { $0 }
                if !report.isEmpty { try await sendState(report, device, connection) }
                try await holdStream(connection, device, lastSeq: &lastSeq, backoff: &backoff)
            } catch let failure as ClientFailure {
                throw failure
            } catch  where ConnectionFailure.isPermanent(error) {
                permanentFailures += 1
                if !retryForever && permanentFailures >= servers.count {
                    throw ClientFailure(
                        description: "\(error); retrying will not fix this (--retry-forever retries anyway)"
                    )
                }
                turn += 1
                try await wait(after: error, at: server, next: servers[turn % servers.count], &backoff)
            } catch {
                turn += 1
                try await wait(after: error, at: server, next: servers[turn % servers.count], &backoff)
            }
        }
    }

    /// The back-off before the next connection, said on stderr (naming the next gateway when
    /// there are several).
    private func wait(
        after error: any Error,
        at server: ServerURL,
        next: ServerURL,
        _ backoff: inout ReconnectDelay
    ) async throws {
        let delay = backoff.next()
        let target = next.description == server.description ? "reconnecting" : "connecting to \(next)"
        printError("connection to \(server) lost (\(error)); \(target) in \(delay) ms")
        try await Task.sleep(for: .milliseconds(delay))
    }

    private func connect(_ server: ServerURL) async throws -> HTTP2ClientConnection {
        try await HTTP2ClientConnection.connect(
            host: server.host,
            port: server.port,
            tls: try client.tlsContext(for: server),
            group: group
        )
    }

    private func loadOrCreateIdentity(
        _ connection: HTTP2ClientConnection,
        _ server: ServerURL
    ) async throws -> DeviceIdentity {
        let identity = try await readOrCreateIdentity(connection, server)
        webPush.withLockedValue {
            $0 = AgentWebPush(wanted: webPushWanted, identityFile: IdentityFile(path: identityPath, identity: identity))
        }
        return identity
    }

    private func readOrCreateIdentity(
        _ connection: HTTP2ClientConnection,
        _ server: ServerURL
    ) async throws -> DeviceIdentity {
        if let data = FileManager.default.contents(atPath: identityPath) {
            guard let identity = try? JSONDecoder().decode(DeviceIdentity.self, from: data) else {
                throw ClientFailure(
                    description: "\(identityPath) is not an agent identity file (expected {\"deviceId\",\"secret\"})"
                )
            }
            return identity
        }
        let secret = registrationSecret
        let identity = try await answer("the device's creation", on: connection) {
            try await DeviceSetup.createDevice(on: connection, server: server, registrationSecret: secret)
        }
        try IdentityFile.write(try JSONEncoder().encode(identity), to: identityPath)
        return identity
    }

    private var unknownDevice: ClientFailure {
        ClientFailure(
            description:
                "the gateway does not know this device or its secret (401); delete \(identityPath) to start as a new device"
        )
    }

    private func register(_ topic: String, _ device: DeviceRequests, _ connection: HTTP2ClientConnection) async throws {
        let token: String
        do {
            token = try await answer("registering \(topic)", on: connection) {
                try await DeviceSetup.register(topic, device, on: connection)
            }
        } catch is UnknownDevice {
            // The same words as on the event stream: the identity file names a device the gateway no longer has.
            throw unknownDevice
        }
        emit(
            "{\"type\":\"registered\",\"deviceId\":\(JSONText.quote(device.identity.deviceId)),\"topic\":\(JSONText.quote(topic)),\"token\":\(JSONText.quote(token))}"
        )
    }

    private func holdStream(
        _ connection: HTTP2ClientConnection,
        _ device: DeviceRequests,
        lastSeq: inout UInt64?,
        backoff: inout ReconnectDelay
    ) async throws {
        let request = device.events(lastEventID: lastSeq)
        let response = try await answer("the event stream request", on: connection) {
            try await connection.stream(request)
        }
        if response.status == 401 { throw unknownDevice }
        guard response.status == 200 else {
            let body = await Self.start(of: response.body)
            throw RetryableRefusal.refusal(
                of: "the event stream",
                status: response.status,
                body: body,
                failure: "event stream refused"
            )
        }
        backoff.reset()
        emit("{\"type\":\"connected\",\"deviceId\":\(JSONText.quote(device.identity.deviceId))}")
        let keepalives =
            keepaliveSeconds > 0
            ? Task { [keepaliveSeconds] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(keepaliveSeconds))
                    if Task.isCancelled { break }
                    do {
                        try await self.sendKeepalive(device, connection)
                    } catch  where !Task.isCancelled {
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
            StreamSilence(
                heartbeatIntervalHeader: response.headers.first(name: "pushgate-heartbeat-interval"),
                openedAt: .now
            )
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
                } catch  where !Task.isCancelled && !(error is Unanswered) {
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
                    for event in parser.feed(chunk) {
                        switch event.type {
                        case "notification":
                            emit(event.data)
                            fetch.received(event.data, at: receivedAt)
                        case "webpush":
                            guard let (line, notification) = webPush.withLockedValue({ $0 })?.message(event.data)
                            else { continue }
                            emit(line)
                            fetch.received(notification, at: receivedAt)
                        default:
                            continue
                        }
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
            while let result = await acks.nextResult() {
                if case .failure(let error as Unanswered) = result { unanswered = error }
            }
            let watch = silence.withLockedValue { $0 }
            throw unanswered ?? (watch.isDead(at: .now) ? watch.failure : ended)
        }
    }

    /// The start of a refusal's body, for the message. Waits at most 5 s: a proxy that sends a
    /// head and never ends its body must not hold the agent.
    private static func start(of body: HTTPClientResponseBody) async -> String {
        let text = try? await firstWithin(.seconds(5)) {
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
        return text ?? ""
    }

    private func ack(upTo seq: UInt64, _ device: DeviceRequests, _ connection: HTTP2ClientConnection) async throws {
        let ack = try await answer("the ack up to \(seq)", on: connection) {
            try await connection.send(device.ack(upTo: seq))
        }
        if ack.status != 204 { printError("ack up to \(seq) answered \(ack.status)") }
    }

    /// A wake event: what the gateway held comes back in the response; printed and acked like
    /// notifications from the stream.
    private func sendKeepalive(_ device: DeviceRequests, _ connection: HTTP2ClientConnection) async throws {
        let response = try await answer("the keep-alive", on: connection) {
            try await connection.send(device.keepalive)
        }
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
                if let (line, message) = webPush.withLockedValue({ $0 })?.message(json) {
                    emit(line)
                    fetch.received(message, at: receivedAt)
                } else {
                    emit(json)
                    fetch.received(json, at: receivedAt)
                }
            }
            if let seq = (notification["seq"] as? NSNumber)?.uint64Value { newest = max(newest ?? 0, seq) }
        }
        if let newest { try await ack(upTo: newest, device, connection) }
    }

    private func sendState(
        _ report: DeviceStateReport,
        _ device: DeviceRequests,
        _ connection: HTTP2ClientConnection
    ) async throws {
        let response = try await answer("the state report", on: connection) {
            try await connection.send(device.state(report))
        }
        // 200 with what is in force (an app reported background stays terminated until it
        // reports foreground, for one); 204, with no body, from a gateway that predates that.
        guard response.status == 200 || response.status == 204 else {
            printError("state report answered \(response.status) \(String(buffer: response.body))")
            return
        }
        let applied = response.status == 200 ? ",\"applied\":" + String(buffer: response.body) : ""
        emit("{\"type\":\"state\",\"reported\":\(report.json)\(applied)}")
    }

    /// `request`'s answer. A gateway that took the connection and then went silent (its host
    /// lost power, a NAT dropped the mapping) would hold the agent until TCP gives up, many
    /// minutes later, or for ever where something on the way still acknowledges the bytes: when
    /// no answer comes within the request timeout, the connection is closed, which fails its
    /// requests and its stream, and the agent starts over. Cancelled, this waits for the request
    /// all the same (a NIO future ignores cancellation): its callers close the connection when
    /// they cancel, which ends it.
    private func answer<T: Sendable>(
        _ what: String,
        on connection: HTTP2ClientConnection,
        _ request: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let answer = try await firstWithin(requestTimeout, request, whenLate: { await connection.close() })
        guard let answer else { throw Unanswered(request: what, timeout: requestTimeout) }
        return answer
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
            var unsubscribe: String?
            switch words.first {
            case "power" where words.count == 2 && DevicePower(rawValue: words[1]) != nil:
                report = state.withLockedValue {
                    $0.power = DevicePower(rawValue: words[1])
                    return $0
                }
            case "app" where words.count == 3 && AppState(rawValue: words[2]) != nil:
                report = state.withLockedValue {
                    $0.apps[words[1]] = AppState(rawValue: words[2])
                    return $0
                }
            case "keepalive" where words.count == 1:
                break
            case "unsubscribe" where words.count == 2:
                unsubscribe = words[1]
            default:
                printError(
                    "unknown command \"\(line)\": power idle|awake|lowPower, app TOPIC foreground|background|terminated, keepalive, unsubscribe NAME"
                )
                continue
            }
            guard let (connection, device) = link.current else {
                let skipped =
                    unsubscribe != nil
                    ? "unsubscribe skipped" : report == nil ? "keep-alive skipped" : "the state is reported on connect"
                printError("not connected; \(skipped)")
                continue
            }
            do {
                if let unsubscribe {
                    try await webPush.withLockedValue({ $0 })?.unsubscribe(unsubscribe, device, on: connection)
                } else if let report {
                    try await sendState(report, device, connection)
                } else {
                    try await sendKeepalive(device, connection)
                }
            } catch {
                printError(
                    "\(unsubscribe != nil ? "unsubscribe" : report == nil ? "keep-alive" : "state report") failed (\(error))"
                )
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
