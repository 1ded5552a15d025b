import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushgateTransport
import Testing

/// The real `pushgate agent` against a stand-in gateway that withholds or resets ack answers,
/// which the real one cannot be made to do: the agent must keep reading its stream while an ack
/// is unanswered, send only the newest handled seq once it may ack again, and start over when an
/// ack fails.
@Suite("pushgate agent: acks beside reads", .serialized, .timeLimit(.minutes(2)))
struct AgentAckTests {
    @Test("notifications arriving while an ack is unanswered are printed at once and share the next ack")
    func readsOnWhileAnAckIsUnanswered() async throws {
        try await withAgent(answeringAcks: .heldUntilReleased) { gateway, agent, stream in
            try await notify(1, on: stream)
            #expect(try agent.next()["seq"] as? Int == 1)
            try await gateway.waitForAck(upTo: 1)
            // Ack 1 stays unanswered. An agent that waits for its answer before reading on
            // prints nothing more (the deadline then kills it).
            try await notify(2, on: stream)
            #expect(try agent.next(timeout: .seconds(20))["seq"] as? Int == 2)
            try await notify(3, on: stream)
            #expect(try agent.next()["seq"] as? Int == 3)
            // Printing 4 comes after 2 and 3 were handed to the acker, so 2 has been
            // superseded whenever the acker next looks; 3 may have gone before 4 arrived.
            try await notify(4, on: stream)
            #expect(try agent.next()["seq"] as? Int == 4)
            gateway.answerAcks()
            try await gateway.waitForAck(upTo: 4)
            let acked = gateway.ackedSeqs
            #expect(acked == [1, 4] || acked == [1, 3, 4], "2 must never be acked on its own: \(acked)")
        }
    }

    @Test("an ack that fails makes the agent reconnect instead of reading on without acks")
    func failedAckReconnects() async throws {
        try await withAgent(answeringAcks: .reset) { gateway, agent, stream in
            try await notify(1, on: stream)
            #expect(try agent.next()["seq"] as? Int == 1)
            // The ack's stream is reset. An agent that reads on never acks again, and the
            // gateway would stop sending once its unacked window is full.
            #expect(try agent.next(timeout: .seconds(20))["type"] as? String == "connected")
            #expect(gateway.lastEventIDs == [nil, "1"])
        }
    }

    @Test("an ack left unanswered for --request-timeout makes the agent give the connection up and resume from it")
    func unansweredAckIsGivenUp() async throws {
        try await withAgent(
            answeringAcks: .heldUntilReleased,
            agentArguments: ["--request-timeout", "2"],
            capturingErrors: true
        ) { gateway, agent, stream in
            try await notify(1, on: stream)
            #expect(try agent.next()["seq"] as? Int == 1)
            try await gateway.waitForAck(upTo: 1)
            // Never answered: an agent without a limit keeps the connection and prints nothing more.
            #expect(try agent.next(timeout: .seconds(20))["type"] as? String == "connected")
            // Resumed after 1 (a loaded machine may time the new stream's head out once more).
            let resumes = gateway.lastEventIDs
            #expect(
                resumes.count >= 2 && resumes.first == .some(nil) && resumes.dropFirst().allSatisfy { $0 == "1" },
                "\(resumes)"
            )
            let messages = agent.exitMessages()
            #expect(
                messages.contains("the gateway did not answer the ack up to 1 within 2 s (--request-timeout)"),
                "\(messages)"
            )
        }
    }

    /// Runs `pushgate agent` against an `AckHoldingGateway` and hands `body` the agent's first
    /// event stream once it is connected.
    private func withAgent(
        answeringAcks answer: AckHoldingGateway.AckAnswer,
        agentArguments: [String] = [],
        capturingErrors: Bool = false,
        _ body: (AckHoldingGateway, AgentProcess, ResponseBodyWriter) async throws -> Void
    ) async throws {
        try await withStandInGateway(
            answeringAcks: answer,
            agentArguments: agentArguments,
            capturingErrors: capturingErrors
        ) { gateway, agent in
            #expect(try agent.next()["type"] as? String == "registered")
            #expect(try agent.next()["type"] as? String == "connected")
            try await body(gateway, agent, try await gateway.firstStream())
        }
    }

    private func notify(_ seq: Int, on stream: ResponseBodyWriter) async throws {
        let written = try await stream.eventLoop.submit {
            stream.write(ByteBuffer(string: "id: \(seq)\nevent: notification\ndata: {\"seq\":\(seq)}\n\n"))
        }.get()
        #expect(written == .accepted)
    }
}

/// Runs `pushgate agent` against an `AckHoldingGateway` on port 0, with an identity file the
/// stand-in knows.
func withStandInGateway(
    answeringAcks answer: AckHoldingGateway.AckAnswer = .heldUntilReleased,
    streamRefusals: [Int] = [],
    registrationRefusals: [Int] = [],
    unansweredRegistrations: Int = 0,
    fetchRefusals: [Int] = [],
    agentArguments: [String] = [],
    capturingErrors: Bool = false,
    _ body: (AckHoldingGateway, AgentProcess) async throws -> Void
) async throws {
    let directory = try scratchDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let identity = directory + "/device.json"
    try Data(#"{"deviceId":"\#(AckHoldingGateway.deviceID)","secret":"s"}"#.utf8).write(
        to: URL(fileURLWithPath: identity)
    )

    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let gateway = AckHoldingGateway(
        eventLoop: group.next(),
        answer: answer,
        streamRefusals: streamRefusals,
        registrationRefusals: registrationRefusals,
        unansweredRegistrations: unansweredRegistrations,
        fetchRefusals: fetchRefusals
    )
    let server = HTTPServer(
        listeners: [ListenerConfiguration(host: "127.0.0.1", port: 0)],
        application: gateway,
        group: group,
        logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    var failure: (any Error)?
    do {
        let port = try #require(try await server.start()[0].port)
        let agent = try AgentProcess(
            server: "http://127.0.0.1:\(port)",
            identity: identity,
            topic: "com.example.acks",
            arguments: agentArguments,
            capturingErrors: capturingErrors
        )
        try await body(gateway, agent)
    } catch {
        failure = error
    }
    gateway.abandonWaits()
    await server.shutdownGracefully(deadline: .milliseconds(100))
    try await group.shutdownGracefully()
    if let failure { throw failure }
}

/// Answers the agent's registration and event streams like the gateway, but for the first
/// event streams, refused as told, and the first registrations, refused or left unanswered as
/// told; answers acks as told; keeps the state reports and fetch
/// results it is sent, and refuses the first fetch results as told. Its waits fail after 20
/// seconds: it cannot see an agent that died.
final class AckHoldingGateway: HTTPServerHandler {
    enum AckAnswer {
        /// Unanswered until `answerAcks`; acks after that are answered at once.
        case heldUntilReleased
        /// The ack's stream is reset after its head.
        case reset
    }

    struct StandInTimeout: Error, CustomStringConvertible {
        var waitingFor: String
        var description: String { "the stand-in gateway waited 20 s for \(waitingFor)" }
    }

    static let deviceID = String(repeating: "ab", count: 16)
    private let eventLoop: any EventLoop
    private let firstStreamPromise: EventLoopPromise<ResponseBodyWriter>
    private let state: NIOLockedValueBox<State>

    private struct State {
        var answer: AckAnswer
        var holding: Bool
        /// Statuses for the next event stream and registration requests, with a JSON error body.
        var streamRefusals: [Int]
        var registrationRefusals: [Int]
        /// The next this many registrations get no answer (their responders are kept here).
        var unansweredRegistrations: Int
        var heldRegistrations: [HTTPResponder] = []
        var fetchRefusals: [Int]
        var stateReports: [String] = []
        var fetchReports: [String] = []
        var keepaliveAnswer = #"{"notifications":[]}"#
        var streamsOpened = 0
        var registrations = 0
        var acked: [UInt64] = []
        var held: [HTTPResponder] = []
        var lastEventIDs: [String?] = []
        var waiter: (upTo: UInt64, promise: EventLoopPromise<Void>)?
    }

    init(
        eventLoop: any EventLoop,
        answer: AckAnswer,
        streamRefusals: [Int] = [],
        registrationRefusals: [Int] = [],
        unansweredRegistrations: Int = 0,
        fetchRefusals: [Int] = []
    ) {
        self.eventLoop = eventLoop
        firstStreamPromise = eventLoop.makePromise()
        state = NIOLockedValueBox(
            State(
                answer: answer,
                holding: answer == .heldUntilReleased,
                streamRefusals: streamRefusals,
                registrationRefusals: registrationRefusals,
                unansweredRegistrations: unansweredRegistrations,
                fetchRefusals: fetchRefusals
            )
        )
    }

    var ackedSeqs: [UInt64] { state.withLockedValue { $0.acked } }
    /// Registration requests, refused or not.
    var registrations: Int { state.withLockedValue { $0.registrations } }
    /// The `Last-Event-ID` of each event stream request, in order.
    var lastEventIDs: [String?] { state.withLockedValue { $0.lastEventIDs } }
    /// The bodies of `PUT .../state` and `POST .../fetch-results` (refused ones too), in order.
    var stateReports: [String] { state.withLockedValue { $0.stateReports } }
    var fetchReports: [String] { state.withLockedValue { $0.fetchReports } }

    /// What keep-alives are answered with from now on: `{"notifications":[...]}`.
    func answerKeepalives(_ body: String) {
        state.withLockedValue { $0.keepaliveAnswer = body }
    }

    /// The writer of the agent's first event stream.
    func firstStream() async throws -> ResponseBodyWriter {
        try await withDeadline(firstStreamPromise.futureResult, "the agent's event stream")
    }

    func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        let device = "/v1/devices/\(Self.deviceID)"
        switch (request.method, request.path) {
        case ("POST", device + "/registrations"):
            let (refusal, unanswered) = state.withLockedValue { state -> (Int?, Bool) in
                state.registrations += 1
                if state.unansweredRegistrations > 0 {
                    state.unansweredRegistrations -= 1
                    state.heldRegistrations.append(responder)
                    return (nil, true)
                }
                return (state.registrationRefusals.isEmpty ? nil : state.registrationRefusals.removeFirst(), false)
            }
            if unanswered { return }
            if let refusal {
                responder.respond(Self.refusal(refusal))
            } else {
                responder.respond(
                    HTTPServerResponse(status: 201, text: #"{"token":"\#(String(repeating: "0", count: 64))"}"#)
                )
            }
        case ("GET", device + "/events"):
            let (refusal, first) = state.withLockedValue { state -> (Int?, Bool) in
                state.lastEventIDs.append(request.headers.first(name: "last-event-id"))
                if !state.streamRefusals.isEmpty { return (state.streamRefusals.removeFirst(), false) }
                state.streamsOpened += 1
                return (nil, state.streamsOpened == 1)
            }
            if let refusal {
                responder.respond(Self.refusal(refusal))
                return
            }
            let stream = responder.startStream(
                ResponseHead(status: 200, headers: ["content-type": "text/event-stream"])
            )
            if first { stream.whenComplete { self.firstStreamPromise.completeWith($0) } }
        case ("POST", device + "/ack"):
            let body = String(buffer: request.body)
            let upTo = body.split(whereSeparator: { !$0.isNumber }).last.flatMap { UInt64($0) } ?? 0
            let (answer, woken) = state.withLockedValue { state -> (AckAnswer?, EventLoopPromise<Void>?) in
                state.acked.append(upTo)
                let answer: AckAnswer? = state.holding ? nil : state.answer
                if state.holding { state.held.append(responder) }
                guard let waiter = state.waiter, upTo >= waiter.upTo else { return (answer, nil) }
                state.waiter = nil
                return (answer, waiter.promise)
            }
            switch answer {
            case nil: break
            case .heldUntilReleased: responder.respond(HTTPServerResponse(status: 204))
            case .reset: responder.startStream(ResponseHead(status: 200)).whenSuccess { $0.cancel() }
            }
            woken?.succeed()
        case ("PUT", device + "/state"):
            state.withLockedValue { $0.stateReports.append(String(buffer: request.body)) }
            responder.respond(HTTPServerResponse(status: 204))
        case ("POST", device + "/fetch-results"):
            let refusal = state.withLockedValue { state -> Int? in
                state.fetchReports.append(String(buffer: request.body))
                return state.fetchRefusals.isEmpty ? nil : state.fetchRefusals.removeFirst()
            }
            responder.respond(refusal.map(Self.refusal) ?? HTTPServerResponse(status: 204))
        case ("POST", device + "/keepalive"):
            responder.respond(HTTPServerResponse(status: 200, text: state.withLockedValue { $0.keepaliveAnswer }))
        default:
            responder.respond(HTTPServerResponse(status: 404, text: "not part of this stand-in"))
        }
    }

    private static func refusal(_ status: Int) -> HTTPServerResponse {
        HTTPServerResponse(status: status, text: #"{"reason":"StandIn","detail":"refused by the stand-in"}"#)
    }

    /// Returns once an ack up to `seq` or beyond has arrived.
    func waitForAck(upTo seq: UInt64) async throws {
        let promise = eventLoop.makePromise(of: Void.self)
        let arrived = state.withLockedValue { state -> Bool in
            if state.acked.contains(where: { $0 >= seq }) { return true }
            precondition(state.waiter == nil, "one waitForAck at a time")
            state.waiter = (seq, promise)
            return false
        }
        if arrived { promise.succeed() }
        try await withDeadline(promise.futureResult, "an ack up to \(seq)")
    }

    /// Answers the held acks, and later ones at once.
    func answerAcks() {
        let held = state.withLockedValue { state -> [HTTPResponder] in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for responder in held { responder.respond(HTTPServerResponse(status: 204)) }
    }

    /// Fails what nobody will complete any more (NIO traps on a promise dropped unfulfilled).
    func abandonWaits() {
        firstStreamPromise.fail(CancellationError())
        state.withLockedValue { state in
            defer { state.waiter = nil }
            return state.waiter?.promise
        }?.fail(CancellationError())
    }

    private func withDeadline<T: Sendable>(_ future: EventLoopFuture<T>, _ what: String) async throws -> T {
        let bounded = eventLoop.makePromise(of: T.self)
        let deadline = eventLoop.scheduleTask(in: .seconds(20)) { bounded.fail(StandInTimeout(waitingFor: what)) }
        future.whenComplete { result in
            deadline.cancel()
            bounded.completeWith(result)
        }
        return try await bounded.futureResult.get()
    }
}
