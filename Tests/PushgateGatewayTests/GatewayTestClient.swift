import Foundation
import NIOCore
import NIOHTTP1
import PushgateDelivery
import PushgateDeviceClient
import PushgateTestKit
import PushgateTransport
import Synchronization
import Testing

/// Clients, clock and event-stream reader shared by the gateway tests.

// MARK: - Client helpers

struct Device: Sendable {
    var id: String
    var secret: String

    var identity: DeviceIdentity { DeviceIdentity(deviceId: id, secret: secret) }
}

struct Reply {
    var status: Int
    var headers: HTTPHeaders
    var text: String

    var json: [String: Any] {
        guard let data = text.data(using: .utf8), !data.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return object
    }

    var apnsID: String? { headers.first(name: "apns-id") }
    var disposition: String? { headers.first(name: "pushgate-disposition") }

    init(_ response: HTTPClientResponse) {
        status = response.status
        headers = response.headers
        text = String(buffer: response.body)
    }
}

/// A provider and agent talking to one gateway over one HTTP/2 connection.
final class API: @unchecked Sendable {
    let gateway: RunningGateway
    private(set) var connection: HTTP2ClientConnection

    init(_ gateway: RunningGateway) async throws {
        self.gateway = gateway
        self.connection = try await gateway.connect()
    }

    func reconnect() async throws {
        await connection.close()
        connection = try await gateway.connect()
    }

    func close() async { await connection.close() }

    func send(
        _ method: String,
        _ path: String,
        headers: [(String, String)] = [],
        body: String? = nil
    ) async throws -> Reply {
        var request = HTTPClientRequest(method: method, path: path)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = ByteBuffer(string: body)
        }
        return Reply(try await connection.send(request))
    }

    func createDevice() async throws -> Device {
        let identity = try await DeviceSetup.createDevice(
            on: connection,
            server: gateway.serverURL,
            registrationSecret: nil
        )
        return Device(id: identity.deviceId, secret: identity.secret)
    }

    /// The device API's requests for `device`, as the agent and the bench send them.
    func requests(_ device: Device) -> DeviceRequests {
        DeviceRequests(server: gateway.serverURL, identity: device.identity)
    }

    /// A device API call; `device` nil sends no authorization (then `id` names the device).
    func device(
        _ device: Device?,
        id: String? = nil,
        _ method: String,
        _ route: String,
        headers: [(String, String)] = [],
        body: String? = nil
    ) async throws -> Reply {
        let deviceID = device?.id ?? id ?? ""
        var all = headers
        if let device { all.append(("authorization", "bearer \(device.secret)")) }
        let path = "/v1/devices/\(deviceID)" + (route.isEmpty ? "" : "/\(route)")
        return try await send(method, path, headers: all, body: body)
    }

    func register(_ device: Device, topic: String) async throws -> Reply {
        Reply(try await connection.send(requests(device).registration(topic: topic)))
    }

    func registeredToken(_ device: Device, topic: String) async throws -> String {
        let reply = try await register(device, topic: topic)
        try #require(reply.status == 201, "register \(topic): \(reply.status) \(reply.text)")
        return try #require(reply.json["token"] as? String)
    }

    /// A new device with one registration: the set-up most delivery tests start from.
    func registeredDevice(topic: String) async throws -> (device: Device, token: String) {
        let device = try await createDevice()
        return (device, try await registeredToken(device, topic: topic))
    }

    /// A keep-alive that must succeed: the notifications its response releases.
    func keepalive(_ device: Device) async throws -> [[String: Any]] {
        let reply = Reply(try await connection.send(requests(device).keepalive))
        try #require(reply.status == 200, "keep-alive: \(reply.status) \(reply.text)")
        return try #require(reply.json["notifications"] as? [[String: Any]], "\(reply.text)")
    }

    func unregister(_ device: Device, token: String) async throws -> Reply {
        try await self.device(device, "DELETE", "registrations/\(token)")
    }

    func ack(_ device: Device, upTo: UInt64) async throws -> Reply {
        Reply(try await connection.send(requests(device).ack(upTo: upTo)))
    }

    func push(
        token: String,
        topic: String,
        apnsID: String? = newAPNsID(),
        headers: [(String, String)] = [],
        payload: String = #"{"aps":{"alert":"hello"}}"#
    ) async throws -> Reply {
        var all = [("apns-topic", topic)]
        if let apnsID { all.append(("apns-id", apnsID)) }
        all += headers
        return try await send("POST", "/3/device/\(token)", headers: all, body: payload)
    }

    /// Opens the device's event stream and returns once the gateway has attached it, so that a
    /// push sent afterwards finds the device connected.
    ///
    /// The gateway registers the stream before it sends the head, so the head should be enough;
    /// `streamIsAttachedWhenItsHeadArrives` checks exactly that. The other tests do not rely on
    /// it: a no-op ack (`upTo: 0`) on the same connection is a barrier. Its answer leaves the
    /// device's shard after the stream's attachment was queued there (the shard runs one task at
    /// a time, and the stream's head was sent from a task queued before), and the connection's
    /// loop writes it after anything the stream queued there earlier.
    func openEvents(_ device: Device, lastEventID: UInt64? = nil) async throws -> EventStream {
        let stream = try await openEventsWithoutBarrier(device, lastEventID: lastEventID)
        let barrier = try await ack(device, upTo: 0)
        try #require(barrier.status == 204, "ack 0: \(barrier.status) \(barrier.text)")
        return stream
    }

    /// Opens the device's event stream; returns as soon as the response head is in.
    func openEventsWithoutBarrier(_ device: Device, lastEventID: UInt64? = nil) async throws -> EventStream {
        let response = try await connection.stream(requests(device).events(lastEventID: lastEventID))
        try #require(response.status == 200, "GET events: \(response.status)")
        return EventStream(response)
    }
}

// MARK: - Event stream

/// One open event stream, read event by event.
final class EventStream: @unchecked Sendable {
    let status: Int
    let streamID: Int32
    let contentType: String?
    private var iterator: HTTPClientResponseBody.AsyncIterator
    private var parser = EventStreamParser()
    private var pending: [EventStreamParser.Event] = []
    private var ended = false

    init(_ response: HTTPClientStreamingResponse) {
        status = response.status
        streamID = response.streamID
        contentType = response.headers.first(name: "content-type")
        iterator = response.body.makeAsyncIterator()
    }

    /// The next event; nil when the body ended cleanly. Throws if the stream was reset or the
    /// connection closed, or if nothing arrives within `seconds`.
    func nextEvent(within seconds: Int = 30) async throws -> EventStreamParser.Event? {
        try await withThrowingTaskGroup(of: EventStreamParser.Event?.self) { group in
            group.addTask { try await self.readEvent() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw TimedOut(what: "an event on stream \(self.streamID) (\(seconds) s)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// The next event, which must be a notification.
    func nextNotification() async throws -> PushEvent {
        let event = try await nextEvent()
        let notification = try #require(
            event.map(PushEvent.init),
            "the event stream ended; a notification was expected"
        )
        return notification
    }

    private func readEvent() async throws -> EventStreamParser.Event? {
        while pending.isEmpty {
            if ended { return nil }
            var it = iterator
            let chunk = try await it.next()
            iterator = it
            guard let chunk else {
                ended = true
                return nil
            }
            pending += parser.feed(chunk)
        }
        return pending.removeFirst()
    }
}

/// A notification event, decoded.
struct PushEvent: Sendable {
    static let fields: Set<String> = [
        "seq", "apnsId", "token", "topic", "pushType", "priority", "collapseId", "payload", "acceptedAt", "delivery",
        "carrier",
    ]
    /// A silent push's only: how long its app has to report its fetch result.
    static let silentFields: Set<String> = ["fetchWindowSeconds"]

    var eventType: String
    var idField: String?
    var seq: Int
    var apnsID: String?
    var token: String?
    var topic: String?
    var pushType: String?
    var priority: Int?
    var collapseID: String?
    /// Canonical JSON text (sorted keys) of the payload object.
    var payload: String?
    var acceptedAt: Int64?
    var delivery: String?
    /// The apns-id of the priority-10 push a piggybacked push rode on; nil otherwise (JSON null).
    var carrier: String?
    /// A silent push's fetch window, in seconds; nil for the others.
    var fetchWindowSeconds: Int?
    var missingKeys: Set<String>
    /// Fields beyond the contract's.
    var unexpectedKeys: Set<String>

    init(_ event: EventStreamParser.Event) {
        eventType = event.type
        idField = event.id
        let json = (try? JSONSerialization.jsonObject(with: Data(event.data.utf8))) as? [String: Any] ?? [:]
        seq = (json["seq"] as? NSNumber)?.intValue ?? -1
        apnsID = json["apnsId"] as? String
        token = json["token"] as? String
        topic = json["topic"] as? String
        pushType = json["pushType"] as? String
        priority = (json["priority"] as? NSNumber)?.intValue
        collapseID = json["collapseId"] as? String
        payload = json["payload"].map { canonicalJSON(object: $0) }
        acceptedAt = int64(json["acceptedAt"])
        delivery = json["delivery"] as? String
        carrier = json["carrier"] as? String
        fetchWindowSeconds = (json["fetchWindowSeconds"] as? NSNumber)?.intValue
        let keys = Set(json.keys)
        let expected = pushType == "background" ? Self.fields.union(Self.silentFields) : Self.fields
        missingKeys = expected.subtracting(keys)
        unexpectedKeys = keys.subtracting(expected)
    }
}

// MARK: - Small helpers

func canonicalJSON(_ text: String) -> String? {
    guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]) else {
        return nil
    }
    return canonicalJSON(object: object)
}

func canonicalJSON(object: Any) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
    else {
        return "<not JSON: \(object)>"
    }
    return String(decoding: data, as: UTF8.self)
}

func int64(_ value: Any?) -> Int64? {
    (value as? NSNumber)?.int64Value
}

func isToken(_ text: String) -> Bool {
    text.utf8.count == 64
        && text.utf8.allSatisfy {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
        }
}

func isCanonicalUUID(_ text: String) -> Bool {
    let groups = text.split(separator: "-", omittingEmptySubsequences: false)
    return groups.map(\.count) == [8, 4, 4, 4, 12]
        && groups.allSatisfy {
            $0.utf8.allSatisfy {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
            }
        }
}

func newAPNsID() -> String { UUID().uuidString.lowercased() }

func randomHex(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<bytes).map { _ in
        let byte = UInt8.random(in: 0...255, using: &generator)
        return String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
    }.joined()
}

func temporaryDirectory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-delivery-\(UUID().uuidString)").path
}
