import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PushgateDelivery
import PushgateScheduler
import PushgateTestKit
import PushgateTransport

/// An operator's request over HTTP/1.1, as curl, Prometheus and browsers send it.
struct OperatorReply {
    var status: Int
    var headers: [String: String]
    var body: String

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }
}

extension RunningGateway {
    /// `GET path` over HTTP/1.1 to `host:port` (the main listener by default).
    func operatorGet(
        _ path: String,
        token: String? = nil,
        host: String = "127.0.0.1",
        port: Int? = nil
    ) async throws -> OperatorReply {
        let authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        let text = try await http1(
            "GET \(path) HTTP/1.1\r\nHost: x\r\n\(authorization)Connection: close\r\n\r\n",
            host: host,
            port: port
        )
        guard let end = text.range(of: "\r\n\r\n") else {
            throw TimedOut(what: "a response head to GET \(path): \(text)")
        }
        let lines = text[..<end.lowerBound].split(separator: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces
            )
        }
        return OperatorReply(status: status, headers: headers, body: String(text[end.upperBound...]))
    }

    /// Opens `GET /v1/admin/events` over HTTP/1.1, as a browser's `fetch` does.
    func adminEvents(token: String? = nil, port: Int? = nil) async throws -> AdminEventStream {
        let stream = AdminEventStream()
        let handler = AdminEventStream.Handler(stream)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: "127.0.0.1", port: port ?? self.port)
            .get()
        var headers = HTTPHeaders([("host", "x"), ("accept", "text/event-stream")])
        if let token { headers.add(name: "authorization", value: "Bearer \(token)") }
        channel.write(
            HTTPClientRequestPart.head(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/v1/admin/events", headers: headers)
            ),
            promise: nil
        )
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        stream.channel = channel
        return stream
    }
}

/// The admin event stream read event by event.
final class AdminEventStream: @unchecked Sendable {
    enum Part: Sendable {
        case head(HTTPResponseHead)
        case event(EventStreamParser.Event)
        case end
    }

    private let (parts, continuation) = AsyncStream<Part>.makeStream()
    private lazy var iterator = parts.makeAsyncIterator()
    var channel: (any Channel)?

    /// The response head.
    func head(within seconds: Int = 10) async throws -> HTTPResponseHead {
        guard case .head(let head) = try await next(within: seconds) else { throw TimedOut(what: "the response head") }
        return head
    }

    /// The next event of `type`, skipping others; nil when the stream ended first.
    func next(_ type: String, within seconds: Int = 10) async throws -> [String: Any]? {
        while true {
            switch try await next(within: seconds) {
            case .event(let event) where event.type == type:
                return (try? JSONSerialization.jsonObject(with: Data(event.data.utf8))) as? [String: Any] ?? [:]
            case .end, nil:
                return nil
            default:
                continue
            }
        }
    }

    /// The next event of any type; nil when the stream ended first.
    func nextEvent(within seconds: Int = 10) async throws -> (type: String, json: [String: Any])? {
        while true {
            switch try await next(within: seconds) {
            case .event(let event):
                return (
                    event.type,
                    (try? JSONSerialization.jsonObject(with: Data(event.data.utf8))) as? [String: Any] ?? [:]
                )
            case .end, nil:
                return nil
            default:
                continue
            }
        }
    }

    /// Events until `predicate` holds for one of type `type`.
    func next(
        _ type: String,
        where predicate: ([String: Any]) -> Bool,
        within seconds: Int = 10
    ) async throws -> [String: Any] {
        while true {
            guard let event = try await next(type, within: seconds) else {
                throw TimedOut(what: "an event \(type) (the stream ended)")
            }
            if predicate(event) { return event }
        }
    }

    /// Whether the stream ends (the server ends it) within `seconds`, skipping events.
    func ended(within seconds: Int) async throws -> Bool {
        while true {
            switch try await next(within: seconds) {
            case .end, nil: return true
            default: continue
            }
        }
    }

    func close() async {
        try? await channel?.close()
    }

    private func next(within seconds: Int) async throws -> Part? {
        try await withThrowingTaskGroup(of: Part?.self) { group in
            group.addTask { await self.iterator.next() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw TimedOut(what: "the admin event stream (\(seconds) s)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPClientResponsePart
        private let stream: AdminEventStream
        private var parser = EventStreamParser()

        init(_ stream: AdminEventStream) {
            self.stream = stream
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): stream.continuation.yield(.head(head))
            case .body(let buffer): for event in parser.feed(buffer) { stream.continuation.yield(.event(event)) }
            case .end: stream.continuation.yield(.end)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            stream.continuation.yield(.end)
            stream.continuation.finish()
        }
    }
}

/// The operator tests' scheduler: one silent push per app per hour (so the next is held), a
/// device budget that never runs out first, `maxHeld` held per app.
func oneTokenBudget(maxHeld: Int = 8) -> DeliveryConfiguration {
    var configuration = DeliveryConfiguration()
    configuration.scheduler = SchedulerConfiguration(
        global: SchedulerPolicy(
            appBurst: 1,
            appRefillPerHour: 1,
            deviceBurst: 100,
            deviceRefillPerHour: 100,
            maxHeldPerApp: maxHeld,
            maxDeferralMillis: 15 * 60 * 1000
        )
    )
    return configuration
}
