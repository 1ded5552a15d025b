import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import PushgateTransport
import Testing

/// `pushgate send` against a stand-in gateway that takes the connection and the request and
/// never answers: what a hung gateway, or one behind a middlebox that acknowledges the bytes,
/// looks like to a provider's tool.
@Suite("pushgate send: an unanswered push", .timeLimit(.minutes(1)))
struct SendCLITests {
    @Test("a push left unanswered for --request-timeout ends send with exit 1, naming the limit")
    func unansweredPush() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let silent = SilentGateway()
        let server = HTTPServer(
            listeners: [ListenerConfiguration(host: "127.0.0.1", port: 0)],
            application: silent,
            group: group,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let port = try #require(try await server.start()[0].port)
        let token = String(repeating: "ab", count: 32)
        let run = try runPushgate([
            "send", "--server", "http://127.0.0.1:\(port)", "--token", token, "--topic", "com.example.app",
            "--request-timeout", "1", #"{"aps":{"alert":"hi"}}"#,
        ], timeout: .seconds(30))
        #expect(run.status == 1)
        #expect(run.stderr.contains("pushgate send: no answer within 1 s (--request-timeout)"), "\(run.stderr)")
        #expect(silent.requests == 1)
        await server.shutdownGracefully(deadline: .milliseconds(100))
        try await group.shutdownGracefully()
    }
}

/// Takes every request and answers none; keeps the responders so that none is answered for it.
final class SilentGateway: HTTPServerHandler {
    private let held = NIOLockedValueBox<[HTTPResponder]>([])

    var requests: Int { held.withLockedValue { $0.count } }

    func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        held.withLockedValue { $0.append(responder) }
    }
}
