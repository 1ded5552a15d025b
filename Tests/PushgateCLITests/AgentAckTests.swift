import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushgateTransport
import Testing

/// The real `pushgate agent` against a stand-in gateway that withholds ack answers, which the
/// real one cannot be made to do: the agent must keep reading its stream while an ack is
/// unanswered, and send only the newest handled seq once it may ack again.
@Suite("pushgate agent: acks beside reads", .serialized, .timeLimit(.minutes(2)))
struct AgentAckTests {
    @Test("notifications arriving while an ack is unanswered are printed at once and share the next ack")
    func readsOnWhileAnAckIsUnanswered() async throws {
        let directory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let identity = directory + "/device.json"
        try Data(#"{"deviceId":"\#(AckHoldingGateway.deviceID)","secret":"s"}"#.utf8).write(to: URL(fileURLWithPath: identity))

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let gateway = AckHoldingGateway(eventLoop: group.next())
        let server = HTTPServer(
            listeners: [ListenerConfiguration(host: "127.0.0.1", port: 0)],
            application: gateway,
            group: group,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let port = try #require(try await server.start()[0].port)
        var failure: (any Error)?
        do {
            let agent = try AgentProcess(server: "http://127.0.0.1:\(port)", identity: identity, topic: "com.example.acks")
            #expect(try agent.next()["type"] as? String == "registered")
            #expect(try agent.next()["type"] as? String == "connected")
            let stream = try await gateway.stream.futureResult.get()
            func notify(_ seq: Int) async throws {
                let written = try await stream.eventLoop.submit {
                    stream.write(ByteBuffer(string: "id: \(seq)\nevent: notification\ndata: {\"seq\":\(seq)}\n\n"))
                }.get()
                #expect(written == .accepted)
            }

            try await notify(1)
            #expect(try agent.next()["seq"] as? Int == 1)
            try await gateway.waitForAck(upTo: 1)
            // Ack 1 stays unanswered. An agent that waits for its answer before reading on
            // prints nothing more (the deadline then kills it).
            try await notify(2)
            #expect(try agent.next(timeout: .seconds(20))["seq"] as? Int == 2)
            try await notify(3)
            #expect(try agent.next()["seq"] as? Int == 3)
            // Printing 4 comes after 2 and 3 were handed to the acker, so 2 has been
            // superseded whenever the acker next looks.
            try await notify(4)
            #expect(try agent.next()["seq"] as? Int == 4)
            gateway.answerAcks()
            try await gateway.waitForAck(upTo: 4)
            let acked = gateway.ackedSeqs
            #expect(acked.first == 1)
            #expect(!acked.contains(2), "2 was acked on its own: \(acked)")
            #expect(acked.count <= 3, "\(acked)")
        } catch {
            failure = error
        }
        await server.shutdownGracefully(deadline: .milliseconds(100))
        try await group.shutdownGracefully()
        if let failure { throw failure }
    }
}

/// Answers the agent's registration and event stream like the gateway, and holds every ack's
/// answer until `answerAcks`; acks after that are answered at once.
final class AckHoldingGateway: HTTPServerHandler {
    static let deviceID = String(repeating: "ab", count: 16)
    let stream: EventLoopPromise<ResponseBodyWriter>
    private let eventLoop: any EventLoop
    private let state = NIOLockedValueBox(State())

    private struct State {
        var acked: [UInt64] = []
        var held: [HTTPResponder] = []
        var holding = true
        var waiter: (upTo: UInt64, promise: EventLoopPromise<Void>)?
    }

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        stream = eventLoop.makePromise()
    }

    var ackedSeqs: [UInt64] { state.withLockedValue { $0.acked } }

    func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        let device = "/v1/devices/\(Self.deviceID)"
        switch (request.method, request.path) {
        case ("POST", device + "/registrations"):
            responder.respond(HTTPServerResponse(status: 201, text: #"{"token":"\#(String(repeating: "0", count: 64))"}"#))
        case ("GET", device + "/events"):
            let stream = self.stream
            responder.startStream(ResponseHead(status: 200, headers: ["content-type": "text/event-stream"]))
                .whenComplete { stream.completeWith($0) }
        case ("POST", device + "/ack"):
            let body = String(buffer: request.body)
            let upTo = body.split(whereSeparator: { !$0.isNumber }).last.flatMap { UInt64($0) } ?? 0
            let (answer, woken) = state.withLockedValue { state -> (Bool, EventLoopPromise<Void>?) in
                state.acked.append(upTo)
                if state.holding { state.held.append(responder) }
                guard let waiter = state.waiter, upTo >= waiter.upTo else { return (!state.holding, nil) }
                state.waiter = nil
                return (!state.holding, waiter.promise)
            }
            if answer { responder.respond(HTTPServerResponse(status: 204)) }
            woken?.succeed()
        default:
            responder.respond(HTTPServerResponse(status: 404, text: "not part of this stand-in"))
        }
    }

    /// Returns once an ack up to `seq` or beyond has arrived.
    func waitForAck(upTo seq: UInt64) async throws {
        let promise = eventLoop.makePromise(of: Void.self)
        let arrived = state.withLockedValue { state -> Bool in
            if state.acked.contains(where: { $0 >= seq }) { return true }
            state.waiter = (seq, promise)
            return false
        }
        if arrived { promise.succeed() }
        try await promise.futureResult.get()
    }

    func answerAcks() {
        let held = state.withLockedValue { state -> [HTTPResponder] in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for responder in held { responder.respond(HTTPServerResponse(status: 204)) }
    }
}
