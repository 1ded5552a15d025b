import Foundation
import NIOCore
import NIOHTTP1
import PushgateCrypto
import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateTransport

/// The device agents' API (PRODUCT.md section 3). The event stream is HTTP/2 only: a device
/// holds one HTTP/2 connection whose stream carries its pushes while its acks and reports share
/// the connection; over HTTP/1.1 the stream would take a connection of its own and the agent a
/// second one for everything else. The JSON routes (creation, registrations, ack, keep-alive,
/// state, fetch results, deletion) also answer HTTP/1.1, so that provisioning scripts, plain
/// curl and HTTP/1.1-only libraries can set a device up.
///
/// Every route but device creation needs `authorization: bearer <device secret>`; a missing or
/// wrong secret and an unknown device id get the same 401, so the answer never tells whether a
/// device exists.
///
/// On a gateway that authenticates providers, a new connection may open one stream until it has
/// proven who it is (APNs' rule, applied to every connection on the port); a request that
/// passes device authentication (or the registration secret) marks the connection
/// authenticated, which lifts that limit and gives it the full idle timeout.
///
/// What the head alone shows is refused before the body is read: a wrong registration secret,
/// no device secret at all. A device secret itself is checked by the device's shard, with the
/// body (at most `Router.defaultMaxBodySize`).
public enum DeviceRoutes {
    /// `registrationSecret`: when set, `POST /v1/devices` needs `authorization: bearer <it>`;
    /// otherwise anyone who can reach the port may create devices. `creationLimit`: how many
    /// devices one client address may create (checked after the secret, which an app ships and
    /// anyone may extract); nil: no limit.
    public static func register(
        on router: inout Router,
        core: DeliveryCore,
        registrationSecret: String? = nil,
        creationLimit: DeviceCreationGate? = nil
    ) {
        let expectedSecret = registrationSecret.map { SHA256.hash($0.utf8) }
        let creation = RouteAdmission(admits: { head, responder in
            if let expectedSecret {
                guard
                    let given = BearerCredential.credential(in: head.headers.first(name: "authorization")).map(
                        String.init
                    ),
                    constantTimeEquals(SHA256.hash(given.utf8), expectedSecret)
                else {
                    responder.respond(
                        .refusal(
                            Refusal(
                                .unauthorized,
                                "creating a device needs authorization: bearer <registration secret>, as configured on the gateway"
                            )
                        )
                    )
                    return false
                }
                head.connection.markAuthenticated()
            }
            if let refusal = creationLimit?.refusal(for: head.connection.remoteAddress.flatMap(ClientAddress.init)) {
                responder.respond(.refusal(refusal))
                return false
            }
            return true
        })
        router.add("POST", "/v1/devices", protocols: .http1AndHTTP2, role: .device, admission: creation) {
            _,
            responder in
            core.createDevice().whenComplete { result in
                switch result {
                case .success(let created):
                    responder.respond(
                        .json(status: 201, JSONText.object(["deviceId": created.deviceID, "secret": created.secret]))
                    )
                case .failure(let error):
                    responder.respond(.refusal(for: error))
                }
            }
        }
        let device = RouteAdmission(admits: { head, responder in target(of: head, responder) != nil })
        router.addPrefix(nil, devicePrefix, protocols: .http1AndHTTP2, role: .device, admission: device) {
            request,
            responder in
            route(request, responder, core: core)
        }
    }

    private static let devicePrefix = "/v1/devices/"

    /// The device, what is asked of it and the secret offered, from the request's head; nil once
    /// the refusal is answered (no device id, no secret).
    private static func target(
        of request: HTTPServerRequest,
        _ responder: HTTPResponder
    ) -> (path: Substring, deviceID: String, action: Action, secret: String)? {
        // A slice, not `split`: no array per request (acks come with every delivered push).
        let path = request.path[..<(request.path.utf8.firstIndex(of: UInt8(ascii: "?")) ?? request.path.endIndex)]
        let (deviceID, action) = parse(path.dropFirst(devicePrefix.utf8.count))
        guard !deviceID.isEmpty else {
            responder.respond(.refusal(Refusal(.notFound, "no route for \(path)")))
            return nil
        }
        if action == .events, request.connection.httpVersion == .http1_1 {
            responder.respond(.refusal(.http2Required(path)))
            return nil
        }
        guard
            let secret = BearerCredential.credential(in: request.headers.first(name: "authorization")).map(String.init)
        else {
            responder.respond(.refusal(Refusal.unauthorized))
            return nil
        }
        return (path, deviceID, action, secret)
    }

    private static func route(_ request: HTTPServerRequest, _ responder: HTTPResponder, core: DeliveryCore) {
        guard let (path, deviceID, action, secret) = target(of: request, responder) else { return }
        let method = request.method
        let refuse = BodyRefusal(core: core, deviceID: deviceID, secret: secret, responder: responder)
        switch (method, action) {
        case ("DELETE", .device):
            complete(core.deleteDevice(deviceID: deviceID, secret: secret), request, responder) { .init(status: 204) }
        case ("POST", .registrations):
            guard let topic = decode(TopicBody.self, request, refuse)?.topic else { return }
            guard TopicRules.isValid(topic) else {
                refuse(Refusal(.badTopic, TopicRules.explain(topic)))
                return
            }
            complete(core.register(deviceID: deviceID, secret: secret, topic: topic), request, responder) { token in
                .json(status: 201, JSONText.object(["token": token, "topic": topic]))
            }
        case ("DELETE", .registration(let token)):
            complete(core.unregister(deviceID: deviceID, secret: secret, token: token), request, responder) {
                .init(status: 204)
            }
        case ("POST", .ack):
            // Acks come with every delivery: the usual `{"upTo":N}` skips Foundation's decoder.
            guard let upTo = AckBody.fastUpTo(request.body) ?? decode(AckBody.self, request, refuse)?.upTo else {
                return
            }
            guard SequenceNumbers.checked(upTo) != nil else {
                refuse(Refusal(.badRequest, "upTo must be \(SequenceNumbers.range) (a sequence number), got \(upTo)"))
                return
            }
            complete(core.ack(deviceID: deviceID, secret: secret, upTo: upTo), request, responder) {
                .init(status: 204)
            }
        case ("POST", .keepalive):
            complete(core.keepalive(deviceID: deviceID, secret: secret), request, responder) { released in
                let body = EventStreamEncoder.keepaliveBody(released)
                return HTTPServerResponse(status: 200, headers: ["content-type": "application/json"], body: body)
            }
        case ("PUT", .state):
            guard let body = decode(StateBody.self, request, refuse) else { return }
            var power: DevicePower?
            if let name = body.power {
                guard let parsed = DevicePower(rawValue: name) else {
                    refuse(
                        Refusal(.badState, "power must be awake, idle or lowPower, got \"\(name.prefix(40))\"")
                    )
                    return
                }
                power = parsed
            }
            var apps: [(topic: String, state: AppState)] = []
            for (topic, name) in (body.apps ?? [:]).sorted(by: { $0.key < $1.key }) {
                guard let state = AppState(rawValue: name) else {
                    refuse(
                        Refusal(
                            .badState,
                            "apps.\(topic.prefix(100)) must be foreground, background or terminated, got \"\(name.prefix(40))\""
                        )
                    )
                    return
                }
                apps.append((topic, state))
            }
            var intervals: [(topic: String, interval: FetchInterval)] = []
            for (topic, value) in (body.fetchIntervals ?? [:]).sorted(by: { $0.key < $1.key }) {
                guard let interval = value.interval else {
                    refuse(
                        Refusal(
                            .badState,
                            "fetchIntervals.\(topic.prefix(100)) must be \"minimum\", \"never\" or whole seconds from 1 to \(FetchInterval.maxSeconds)"
                        )
                    )
                    return
                }
                intervals.append((topic, interval))
            }
            let state = core.setState(
                deviceID: deviceID,
                secret: secret,
                power: power,
                apps: apps,
                fetchIntervals: intervals
            )
            complete(state, request, responder) { .init(status: 204) }
        case ("POST", .fetchResults):
            guard let body = decode(FetchResultsBody.self, request, refuse) else { return }
            var results: [(seq: UInt64, result: FetchResult)] = []
            for item in body.results {
                guard SequenceNumbers.checked(item.seq) != nil else {
                    refuse(
                        Refusal(
                            .badRequest,
                            "seq must be \(SequenceNumbers.range) (a sequence number), got \(item.seq)"
                        )
                    )
                    return
                }
                guard let result = FetchResult(rawValue: item.result), FetchResult.reportable.contains(result) else {
                    refuse(
                        Refusal(
                            .badRequest,
                            "result of seq \(item.seq) must be newData, noData or failed, got \"\(item.result.prefix(40))\""
                        )
                    )
                    return
                }
                results.append((item.seq, result))
            }
            guard results.count <= Self.maxFetchResults else {
                refuse(
                    Refusal(.badRequest, "at most \(Self.maxFetchResults) results per request, got \(results.count)")
                )
                return
            }
            complete(core.reportFetchResults(deviceID: deviceID, secret: secret, results: results), request, responder)
            {
                .init(status: 204)
            }
        case ("GET", .events):
            openEventStream(request, responder, core: core, deviceID: deviceID, secret: secret)
        case (_, let action) where !action.methods.isEmpty:
            responder.respond(.refusal(.methodNotAllowed(path, allowed: action.methods, not: method)))
        default:
            responder.respond(.refusal(Refusal(.notFound, "no route for \(path)")))
        }
    }

    /// What follows `/v1/devices/{id}`. Parsed without splitting the path into arrays of
    /// strings: acks come with every delivered push.
    enum Action: Equatable {
        case device, registrations
        case registration(String)
        case ack, keepalive, state, events, fetchResults, unknown

        /// What `route` serves for it; none for an unknown path.
        var methods: [String] {
            switch self {
            case .device, .registration: ["DELETE"]
            case .registrations, .ack, .keepalive, .fetchResults: ["POST"]
            case .state: ["PUT"]
            case .events: ["GET"]
            case .unknown: []
            }
        }
    }

    static func parse(_ rest: Substring) -> (deviceID: String, action: Action) {
        guard let slash = rest.firstIndex(of: "/") else { return (String(rest), .device) }
        let deviceID = String(rest[..<slash])
        let tail = rest[rest.index(after: slash)...]
        switch tail {
        case "registrations": return (deviceID, .registrations)
        case "ack": return (deviceID, .ack)
        case "keepalive": return (deviceID, .keepalive)
        case "state": return (deviceID, .state)
        case "events": return (deviceID, .events)
        case "fetch-results": return (deviceID, .fetchResults)
        default:
            let prefix = "registrations/"
            if tail.hasPrefix(prefix) {
                let token = tail.dropFirst(prefix.count)
                // Hex in either case, as the provider path takes it (tokens are stored lowercase).
                if !token.contains("/") { return (deviceID, .registration(token.lowercased())) }
            }
            return (deviceID, .unknown)
        }
    }

    private static func openEventStream(
        _ request: HTTPServerRequest,
        _ responder: HTTPResponder,
        core: DeliveryCore,
        deviceID: String,
        secret: String
    ) {
        var lastEventID: UInt64?
        if let header = request.headers.first(name: "last-event-id") {
            guard let value = UInt64(header.trimmingCharacters(in: .whitespaces)).flatMap(SequenceNumbers.checked)
            else {
                responder.respond(
                    .refusal(
                        Refusal(
                            .badLastEventId,
                            "last-event-id must be \(SequenceNumbers.range) (a sequence number), got \"\(header.prefix(40))\""
                        )
                    )
                )
                return
            }
            lastEventID = value
        }
        // The longest the stream stays silent, in seconds: the agent's measure of a dead connection.
        let heartbeatInterval = String(core.heartbeatIntervalMillis / 1000)
        core.openStream(deviceID: deviceID, secret: secret, lastEventID: lastEventID).whenComplete { result in
            let generation: UInt64
            switch result {
            case .success(let opened):
                generation = opened
                request.connection.markAuthenticated()
            case .failure(let error):
                responder.respond(.refusal(for: error))
                return
            }
            let head = ResponseHead(
                status: 200,
                headers: [
                    "content-type": "text/event-stream", "cache-control": "no-store",
                    "pushgate-heartbeat-interval": heartbeatInterval,
                ]
            )
            responder.startStream(head).whenComplete { started in
                switch started {
                case .success(let writer):
                    writer.onClose = { _ in core.closeStream(deviceID: deviceID, generation: generation) }
                    // Called as the connection is sent GOAWAY: ending the stream with a retry hint
                    // lets the agent reconnect elsewhere while the server drains.
                    writer.onShutdown = {
                        writer.write(EventStreamEncoder.shutdown)
                        writer.finish()
                    }
                    core.bindStream(deviceID: deviceID, generation: generation, sink: EventStreamSink(writer: writer))
                case .failure:
                    core.closeStream(deviceID: deviceID, generation: generation)
                }
            }
        }
    }

    // MARK: Helpers

    private struct TopicBody: Decodable { var topic: String }
    struct AckBody: Decodable {
        var upTo: UInt64

        /// `{"upTo":N}` with optional spaces, and nothing else; nil sends the body to the full
        /// JSON decoder (other valid shapes, and the error message for invalid ones).
        static func fastUpTo(_ body: ByteBuffer) -> UInt64? {
            body.withUnsafeReadableBytes { raw -> UInt64? in
                var i = 0
                func skipSpaces() {
                    while i < raw.count, raw[i] == 0x20 || raw[i] == 0x0A || raw[i] == 0x0D || raw[i] == 0x09 { i += 1 }
                }
                func expect(_ text: StaticString) -> Bool {
                    let bytes = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
                    guard raw.count - i >= bytes.count else { return false }
                    for (offset, byte) in bytes.enumerated() where raw[i + offset] != byte { return false }
                    i += bytes.count
                    return true
                }
                skipSpaces()
                guard expect("{") else { return nil }
                skipSpaces()
                guard expect("\"upTo\"") else { return nil }
                skipSpaces()
                guard expect(":") else { return nil }
                skipSpaces()
                var value: UInt64 = 0
                let start = i
                while i < raw.count, raw[i] >= 0x30, raw[i] <= 0x39 {
                    let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                    let (sum, overflow2) = times.addingReportingOverflow(UInt64(raw[i] - 0x30))
                    guard !overflow1, !overflow2 else { return nil }
                    value = sum
                    i += 1
                }
                guard i > start, i - start == 1 || raw[start] != 0x30 else { return nil }
                skipSpaces()
                guard expect("}") else { return nil }
                skipSpaces()
                return i == raw.count ? value : nil
            }
        }
    }
    private struct StateBody: Decodable {
        var power: String?
        var apps: [String: String]?
        var fetchIntervals: [String: IntervalValue]?
    }

    /// `"minimum"`, `"never"` or whole seconds (a JSON number).
    private struct IntervalValue: Decodable {
        var interval: FetchInterval?

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let word = try? container.decode(String.self) {
                interval = word == "minimum" ? .minimum : word == "never" ? .never : nil
            } else if let seconds = try? container.decode(Int64.self), seconds >= 1,
                seconds <= Int64(FetchInterval.maxSeconds)
            {
                interval = .seconds(UInt32(seconds))
            } else {
                interval = nil
            }
        }
    }

    /// A device reports what it did with the wakes it got; more than this many at once is not
    /// an agent reporting, and the store commits them in one transaction.
    static let maxFetchResults = 256

    private struct FetchResultsBody: Decodable {
        struct Item: Decodable {
            var seq: UInt64
            var result: String
        }

        var results: [Item]
    }

    /// Refuses a body the route cannot use once the secret is proven, and only then says what is
    /// wrong with it: a request with a wrong secret gets its 401, as one without any does, and
    /// learns nothing from its body. The secret lives on the device's shard, so only a refused
    /// body pays for this hop; a good one goes straight to its operation, which checks the
    /// secret itself. A value rather than a capturing closure: one is built for every request,
    /// acks among them, and a value needs no context on the heap.
    private struct BodyRefusal {
        let core: DeliveryCore
        let deviceID: String
        let secret: String
        let responder: HTTPResponder

        func callAsFunction(_ refusal: Refusal) {
            let responder = responder
            core.authenticate(deviceID: deviceID, secret: secret).whenComplete { result in
                switch result {
                case .success: responder.respond(.refusal(refusal))
                case .failure(let error): responder.respond(.refusal(for: error))
                }
            }
        }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ request: HTTPServerRequest, _ refuse: BodyRefusal) -> T?
    {
        do {
            return try JSONDecoder().decode(T.self, from: Data(request.body.readableBytesView))
        } catch {
            // Only a refused body is copied again, to say what is wrong with it.
            let bytes = Array(request.body.readableBytesView)
            refuse(Refusal(.badRequest, "request body is not the expected JSON: \(describe(error, bytes))"))
            return nil
        }
    }

    private static func describe(_ error: any Error, _ bytes: [UInt8]) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing field \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type for \"\(context.codingPath.map(\.stringValue).joined(separator: "."))\""
        case DecodingError.dataCorrupted:
            // Foundation says "not valid JSON" also for a number its integer type cannot hold
            // (-1, 1.5, 1e20); the only numbers these bodies carry are sequence numbers.
            do {
                _ = try JSONDocument(bytes)
            } catch {
                return "not valid JSON (\(error.problem) at \(error.position))"
            }
            return "a sequence number must be \(SequenceNumbers.range)"
        default: return "\(error)"
        }
    }

    /// Answers with `success` or the refusal; a success proves the device's secret, which lifts
    /// a gated connection's stream limit.
    private static func complete<T>(
        _ future: EventLoopFuture<T>,
        _ request: HTTPServerRequest,
        _ responder: HTTPResponder,
        _ success: @escaping @Sendable (T) -> HTTPServerResponse
    ) {
        let connection = request.connection
        future.whenComplete { result in
            switch result {
            case .success(let value):
                connection.markAuthenticated()
                responder.respond(success(value))
            case .failure(let error): responder.respond(.refusal(for: error))
            }
        }
    }
}
