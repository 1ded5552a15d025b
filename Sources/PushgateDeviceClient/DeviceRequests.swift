import Foundation
import NIOCore
import NIOHTTP1
import PushgateModel
import PushgateTransport

/// A device's id and secret, as `POST /v1/devices` answers them; the agent keeps them in its
/// identity file in this shape, with its Web Push subscriptions' keys by name.
public struct DeviceIdentity: Codable, Sendable {
    public var deviceId: String
    public var secret: String
    public var webpush: [String: WebPushSubscriptionKeys]?

    public init(deviceId: String, secret: String, webpush: [String: WebPushSubscriptionKeys]? = nil) {
        self.deviceId = deviceId
        self.secret = secret
        self.webpush = webpush
    }
}

/// A Web Push subscription as the device keeps it: its endpoint, and the keys that never leave
/// the device (RFC 8291: the P-256 key pair, as SEC 1 DER, and the auth secret), base64url.
public struct WebPushSubscriptionKeys: Codable, Sendable, Equatable {
    public var endpoint: String
    public var token: String
    public var privateKey: String
    public var auth: String
    /// The application server key the subscription is restricted to, when it is.
    public var applicationServerKey: String?

    public init(endpoint: String, token: String, privateKey: String, auth: String, applicationServerKey: String?) {
        self.endpoint = endpoint
        self.token = token
        self.privateKey = privateKey
        self.auth = auth
        self.applicationServerKey = applicationServerKey
    }
}

/// A client command's failure, told as the person running it needs to hear it. Retrying the
/// same request would not help.
public struct ClientFailure: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) {
        self.description = description
    }
}

/// The gateway answered 401 to the device's own secret: it no longer has the device (deleted,
/// or a store that was started over), and asking again will not change that.
public struct UnknownDevice: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the gateway does not know this device or its secret (401)" }
}

/// The gateway, or a proxy in front of it, answered 429 or a 5xx: it is starting, draining or
/// overloaded, or the proxy cannot reach it. Unlike other refusals, worth another try after a
/// back-off.
public struct RetryableRefusal: Error, CustomStringConvertible {
    public var request: String
    public var status: Int
    /// The start of the answer's body: the gateway's JSON error says what happened.
    public var detail: String

    public var description: String { "\(request) answered \(status)" + (detail.isEmpty ? "" : ": \(detail)") }

    public static func applies(to status: Int) -> Bool { status == 429 || status >= 500 }

    /// Why `request` was refused with `status`: retryable, or a `ClientFailure` saying `failure`.
    public static func refusal(of request: String, status: Int, body: String, failure: String) -> any Error {
        let detail = oneLine(body)
        if applies(to: status) { return RetryableRefusal(request: request, status: status, detail: detail) }
        return ClientFailure(description: "\(failure): \(status)" + (detail.isEmpty ? "" : " \(detail)"))
    }

    /// The start of a response body, on one line, for a message.
    public static func oneLine(_ body: String) -> String {
        String(body.prefix(300).map { $0.isNewline ? " " : $0 }).trimmingCharacters(in: .whitespaces)
    }
}

/// A device's report of its power, its apps' states and their fetch intervals: the
/// `PUT /v1/devices/{id}/state` body. What is nil or empty is left out, and the gateway keeps
/// what it last heard of it.
public struct DeviceStateReport: Sendable, Equatable {
    public var power: DevicePower?
    public var apps: [String: AppState]
    public var fetchIntervals: [String: FetchInterval]

    public init(
        power: DevicePower? = nil,
        apps: [String: AppState] = [:],
        fetchIntervals: [String: FetchInterval] = [:]
    ) {
        self.power = power
        self.apps = apps
        self.fetchIntervals = fetchIntervals
    }

    public var isEmpty: Bool { power == nil && apps.isEmpty && fetchIntervals.isEmpty }

    /// Topics in order, so that the same report is the same text.
    public var json: String {
        var fields: [String] = []
        if let power { fields.append("\"power\":\(JSONText.quote(power.rawValue))") }
        if !apps.isEmpty { fields.append("\"apps\":" + Self.object(apps) { JSONText.quote($0.rawValue) }) }
        if !fetchIntervals.isEmpty {
            fields.append(
                "\"fetchIntervals\":"
                    + Self.object(fetchIntervals) { interval in
                        // Seconds are a JSON number; the two words are strings.
                        if case .seconds = interval { interval.word } else { JSONText.quote(interval.word) }
                    }
            )
        }
        return "{" + fields.joined(separator: ",") + "}"
    }

    private static func object<Value>(_ entries: [String: Value], _ value: (Value) -> String) -> String {
        "{"
            + entries.sorted { $0.key < $1.key }.map { JSONText.quote($0.key) + ":" + value($0.value) }.joined(
                separator: ","
            ) + "}"
    }
}

/// One app's fetch result for the silent push `seq` woke it with. Only what an app can report:
/// a timeout is the absence of a report, which the gateway records itself.
public struct FetchReport: Sendable, Hashable {
    public var seq: UInt64
    public var result: FetchResult

    public init(seq: UInt64, result: FetchResult) {
        precondition(
            FetchResult.reportable.contains(result),
            "a timeout is not reported: the gateway records it when the window ends"
        )
        self.seq = seq
        self.result = result
    }
}

/// One device's requests to the device API, for the agent and the bench alike. The ack request
/// is built once: the bench sends thousands per second.
public struct DeviceRequests: Sendable {
    public let identity: DeviceIdentity
    private let server: ServerURL
    private let ackTemplate: HTTPClientRequest

    public init(server: ServerURL, identity: DeviceIdentity) {
        self.server = server
        self.identity = identity
        // Any body, so that the template carries the JSON content type; `ack` replaces it.
        ackTemplate = Self.request(server, identity, "POST", "ack", body: "")
    }

    /// The event stream, resuming after `lastEventID` when given.
    public func events(lastEventID: UInt64? = nil) -> HTTPClientRequest {
        var request = Self.request(server, identity, "GET", "events")
        if let lastEventID { request.headers.add(name: "last-event-id", value: String(lastEventID)) }
        return request
    }

    /// The cumulative ack of everything up to `seq`.
    public func ack(upTo seq: UInt64) -> HTTPClientRequest {
        var request = ackTemplate
        request.body = ByteBuffer(string: "{\"upTo\":\(seq)}")
        return request
    }

    public var keepalive: HTTPClientRequest { Self.request(server, identity, "POST", "keepalive") }

    /// A state report; `json` is the `PUT /v1/devices/{id}/state` body.
    public func state(_ json: String) -> HTTPClientRequest {
        Self.request(server, identity, "PUT", "state", body: json)
    }

    public func state(_ report: DeviceStateReport) -> HTTPClientRequest { state(report.json) }

    /// What apps did with the wakes silent pushes gave them, one result per seq.
    public func fetchResults(_ results: [FetchReport]) -> HTTPClientRequest {
        let items = results.map { "{\"seq\":\($0.seq),\"result\":\(JSONText.quote($0.result.rawValue))}" }
        return Self.request(
            server,
            identity,
            "POST",
            "fetch-results",
            body: "{\"results\":[" + items.joined(separator: ",") + "]}"
        )
    }

    /// A Web Push subscription named `name`, restricted to `applicationServerKey` (base64url)
    /// when given.
    public func subscription(name: String, applicationServerKey: String?) -> HTTPClientRequest {
        let key = applicationServerKey.map(JSONText.quote) ?? "null"
        return Self.request(
            server,
            identity,
            "POST",
            "subscriptions",
            body: "{\"name\":\(JSONText.quote(name)),\"applicationServerKey\":\(key)}"
        )
    }

    public func unsubscribe(token: String) -> HTTPClientRequest {
        Self.request(server, identity, "DELETE", "subscriptions/\(token)")
    }

    public func registration(topic: String) -> HTTPClientRequest {
        Self.request(server, identity, "POST", "registrations", body: "{\"topic\":\(JSONText.quote(topic))}")
    }

    private static func request(
        _ server: ServerURL,
        _ identity: DeviceIdentity,
        _ method: String,
        _ route: String,
        body: String? = nil
    ) -> HTTPClientRequest {
        server.request(
            method,
            "/v1/devices/\(identity.deviceId)/\(route)",
            bearer: identity.secret,
            headers: body == nil ? [:] : ["content-type": "application/json"],
            body: body.map { ByteBuffer(string: $0) }
        )
    }
}

/// The steps before a device holds its stream: creating it and registering its topics.
public enum DeviceSetup {
    /// Creates a device; `registrationSecret` is needed when the gateway has one.
    public static func createDevice(
        on connection: HTTP2ClientConnection,
        server: ServerURL,
        registrationSecret: String?
    ) async throws -> DeviceIdentity {
        let response = try await connection.send(server.request("POST", "/v1/devices", bearer: registrationSecret))
        guard response.status == 201 else {
            throw RetryableRefusal.refusal(
                of: "device creation",
                status: response.status,
                body: String(buffer: response.body),
                failure: "device creation failed"
            )
        }
        guard let identity = try? JSONDecoder().decode(DeviceIdentity.self, from: Data(response.body.readableBytesView))
        else {
            throw ClientFailure(
                description:
                    "device creation answered 201 without a deviceId and secret: \(RetryableRefusal.oneLine(String(buffer: response.body)))"
            )
        }
        return identity
    }

    /// Subscribes the device to Web Push as `name` (restricted to `applicationServerKey`,
    /// base64url, when given); returns the endpoint's token and URL.
    public static func subscribe(
        _ name: String,
        applicationServerKey: String?,
        _ device: DeviceRequests,
        on connection: HTTP2ClientConnection
    ) async throws -> (token: String, endpoint: String) {
        struct Subscribed: Decodable {
            var token: String
            var endpoint: String
        }
        let response = try await connection.send(
            device.subscription(name: name, applicationServerKey: applicationServerKey)
        )
        if response.status == 401 { throw UnknownDevice() }
        guard response.status == 201 else {
            throw RetryableRefusal.refusal(
                of: "subscribing \(name)",
                status: response.status,
                body: String(buffer: response.body),
                failure: "subscribing \(name) failed"
            )
        }
        guard let subscribed = try? JSONDecoder().decode(Subscribed.self, from: Data(response.body.readableBytesView))
        else {
            throw ClientFailure(
                description:
                    "subscribing \(name) answered 201 without a token and endpoint: \(RetryableRefusal.oneLine(String(buffer: response.body)))"
            )
        }
        return (subscribed.token, subscribed.endpoint)
    }

    /// Registers `topic` for the device; returns the token providers send to.
    public static func register(
        _ topic: String,
        _ device: DeviceRequests,
        on connection: HTTP2ClientConnection
    ) async throws -> String {
        struct Registered: Decodable { var token: String }
        let response = try await connection.send(device.registration(topic: topic))
        if response.status == 401 { throw UnknownDevice() }
        guard response.status == 201 else {
            throw RetryableRefusal.refusal(
                of: "registering \(topic)",
                status: response.status,
                body: String(buffer: response.body),
                failure: "registering \(topic) failed"
            )
        }
        guard let registered = try? JSONDecoder().decode(Registered.self, from: Data(response.body.readableBytesView))
        else {
            throw ClientFailure(
                description:
                    "registering \(topic) answered 201 without a token: \(RetryableRefusal.oneLine(String(buffer: response.body)))"
            )
        }
        return registered.token
    }
}
