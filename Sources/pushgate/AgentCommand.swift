import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PushgateTransport

struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run a device agent: hold the event stream, print and acknowledge notifications.",
        discussion: """
            Creates the device on first run and keeps its id and secret in --identity (mode 0600).
            Prints one JSON line per event on stdout: {"type":"registered",...} for each topic,
            then each notification's JSON object as the gateway sent it. Reconnects with jittered
            back-off, resuming with Last-Event-ID so nothing acknowledged is sent again.
            """
    )

    @OptionGroup var client: ClientOptions

    @Option(help: "File holding this device's id and secret; created if missing.")
    var identity: String

    @Option(help: "Register this topic (an app's bundle id). Repeatable.")
    var topic: [String] = []

    func run() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let agent = Agent(client: client, identityPath: identity, topics: topic, group: group)
        try await agent.run()
    }
}

/// The agent's identity on disk.
struct AgentIdentity: Codable {
    var deviceId: String
    var secret: String
}

struct AgentFailure: Error, CustomStringConvertible {
    var description: String
}

/// One device agent: identity, registrations, then the event stream for as long as it runs.
final class Agent: Sendable {
    private let client: ClientOptions
    private let identityPath: String
    private let topics: [String]
    private let group: any EventLoopGroup

    init(client: ClientOptions, identityPath: String, topics: [String], group: any EventLoopGroup) {
        self.client = client
        self.identityPath = identityPath
        self.topics = topics
        self.group = group
    }

    func run() async throws {
        var backoff = Backoff()
        var lastSeq: UInt64?
        var identity: AgentIdentity?
        var registered = false
        while true {
            do {
                let connection = try await connect()
                defer { Task { await connection.close() } }
                if identity == nil { identity = try await loadOrCreateIdentity(connection) }
                if !registered {
                    for topic in topics { try await register(topic, identity!, connection) }
                    registered = true
                }
                try await holdStream(connection, identity!, lastSeq: &lastSeq, backoff: &backoff)
            } catch let failure as AgentFailure {
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

    private func request(_ method: String, _ path: String, secret: String?, body: String? = nil) -> HTTPClientRequest {
        var headers = HTTPHeaders()
        if let secret { headers.add(name: "authorization", value: "bearer \(secret)") }
        if body != nil { headers.add(name: "content-type", value: "application/json") }
        return HTTPClientRequest(
            method: method,
            path: path,
            authority: client.server.authority,
            scheme: client.server.scheme,
            headers: headers,
            body: body.map { ByteBuffer(string: $0) }
        )
    }

    private func loadOrCreateIdentity(_ connection: HTTP2ClientConnection) async throws -> AgentIdentity {
        if let data = FileManager.default.contents(atPath: identityPath) {
            guard let identity = try? JSONDecoder().decode(AgentIdentity.self, from: data) else {
                throw AgentFailure(description: "\(identityPath) is not an agent identity file (expected {\"deviceId\",\"secret\"})")
            }
            return identity
        }
        let response = try await connection.send(request("POST", "/v1/devices", secret: nil))
        guard response.status == 201,
              let identity = try? JSONDecoder().decode(AgentIdentity.self, from: Data(response.body.readableBytesView))
        else { throw AgentFailure(description: "device creation failed: \(response.status) \(String(buffer: response.body))") }
        let data = try JSONEncoder().encode(identity)
        guard FileManager.default.createFile(atPath: identityPath, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw AgentFailure(description: "cannot write the identity file \(identityPath)")
        }
        return identity
    }

    private func register(_ topic: String, _ identity: AgentIdentity, _ connection: HTTP2ClientConnection) async throws {
        let body = "{\"topic\":\(jsonString(topic))}"
        let response = try await connection.send(request("POST", "/v1/devices/\(identity.deviceId)/registrations", secret: identity.secret, body: body))
        guard response.status == 201 || response.status == 200 else {
            throw AgentFailure(description: "registering \(topic) failed: \(response.status) \(String(buffer: response.body))")
        }
        struct Registered: Decodable { var token: String }
        let token = (try? JSONDecoder().decode(Registered.self, from: Data(response.body.readableBytesView)))?.token ?? "?"
        emit("{\"type\":\"registered\",\"deviceId\":\(jsonString(identity.deviceId)),\"topic\":\(jsonString(topic)),\"token\":\(jsonString(token))}")
    }

    private func holdStream(
        _ connection: HTTP2ClientConnection,
        _ identity: AgentIdentity,
        lastSeq: inout UInt64?,
        backoff: inout Backoff
    ) async throws {
        var streamRequest = request("GET", "/v1/devices/\(identity.deviceId)/events", secret: identity.secret)
        if let lastSeq { streamRequest.headers.add(name: "last-event-id", value: String(lastSeq)) }
        let response = try await connection.stream(streamRequest)
        if response.status == 401 {
            throw AgentFailure(description: "the gateway does not know this device or its secret (401); delete \(identityPath) to start as a new device")
        }
        guard response.status == 200 else {
            throw AgentFailure(description: "event stream refused: \(response.status)")
        }
        backoff.reset()
        var parser = EventStreamParser()
        for try await chunk in response.body {
            var newest: UInt64?
            for event in parser.feed(chunk) where event.type == "notification" {
                emit(event.data)
                if let seq = event.id.flatMap(UInt64.init) { newest = seq }
            }
            if let newest {
                lastSeq = newest
                let ack = try await connection.send(
                    request("POST", "/v1/devices/\(identity.deviceId)/ack", secret: identity.secret, body: "{\"upTo\":\(newest)}")
                )
                if ack.status != 204 { printError("ack up to \(newest) answered \(ack.status)") }
            }
        }
        throw StreamEnded()
    }
}

/// Not fatal: the gateway ended the stream (e.g. it is draining); the agent reconnects.
struct StreamEnded: Error, CustomStringConvertible {
    var description: String { "the gateway ended the event stream" }
}

/// Exponential back-off with full jitter, 250 ms to 30 s.
struct Backoff {
    private var attempt = 0

    mutating func next() -> Int {
        let ceiling = min(30_000, 250 << min(attempt, 7))
        attempt += 1
        return Int.random(in: ceiling / 2...ceiling)
    }

    mutating func reset() { attempt = 0 }
}

private func emit(_ line: String) {
    print(line)
    fflush(nil)
}

private func printError(_ message: String) {
    FileHandle.standardError.write(Data("pushgate agent: \(message)\n".utf8))
}

private func jsonString(_ string: String) -> String {
    let data = (try? JSONEncoder().encode(string)) ?? Data("\"\"".utf8)
    return String(decoding: data, as: UTF8.self)
}
