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
        let run = try runPushgate(
            [
                "send", "--server", "http://127.0.0.1:\(port)", "--token", token, "--topic", "com.example.app",
                "--request-timeout", "1", #"{"aps":{"alert":"hi"}}"#,
            ],
            timeout: .seconds(30)
        )
        #expect(run.status == 1)
        #expect(run.stderr.contains("pushgate send: no answer within 1 s (--request-timeout)"), "\(run.stderr)")
        #expect(silent.requests == 1)
        await server.shutdownGracefully(deadline: .milliseconds(100))
        try await group.shutdownGracefully()
    }
}

/// `pushgate send` that cannot read what it was given: it ran and failed (exit 1, as its help
/// says for anything but a 200), not a usage error (64, with the usage).
@Suite("pushgate send: unreadable files", .timeLimit(.minutes(1)))
struct SendFileCLITests {
    @Test("a payload file or a signing key that cannot be read ends send with exit 1 and says which")
    func unreadableFiles() throws {
        let token = String(repeating: "ab", count: 32)
        let payload = try runPushgate(
            [
                "send", "--server", "http://127.0.0.1:1", "--token", token, "--topic", "com.example.app",
                "@/nonexistent/payload.json",
            ],
            timeout: .seconds(30)
        )
        #expect(payload.status == 1, "\(payload.stderr)")
        #expect(payload.stderr.contains("cannot read the payload file /nonexistent/payload.json"), "\(payload.stderr)")
        #expect(!payload.stderr.contains("Usage:"), "\(payload.stderr)")
        let key = try runPushgate(
            [
                "send", "--server", "http://127.0.0.1:1", "--token", token, "--key", "/nonexistent/AuthKey.p8",
                "--key-id", "KEY0000001", "--team-id", "TEAM000001",
                "--topic", "com.example.app", #"{"aps":{"alert":"hi"}}"#,
            ],
            timeout: .seconds(30)
        )
        #expect(key.status == 1, "\(key.stderr)")
        #expect(key.stderr.contains("cannot read the signing key /nonexistent/AuthKey.p8"), "\(key.stderr)")
    }
}

/// `pushgate send` against a real gateway that refuses the push: the refusal's reason and detail,
/// as its help says, and exit 1.
@Suite("pushgate send: a refusal", .timeLimit(.minutes(1)))
struct SendRefusalCLITests {
    @Test("a refused push prints its reason and detail, and send exits 1")
    func refusal() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        let token = String(repeating: "ab", count: 32)
        let sent = try runPushgate([
            "send", "--server", gateway.urls[0], "--token", token, "--topic", "com.example.app",
            #"{"aps":{"alert":"hi"}}"#,
        ])
        #expect(sent.status == 1)
        #expect(sent.stdout.hasPrefix("status: 400\napns-id: "), "\(sent.stdout)")
        #expect(
            sent.stdout.contains("\nreason: BadDeviceToken\ndetail: no device has the token \(token)\n"),
            "\(sent.stdout)"
        )
        #expect(gateway.stop() == 0)
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
