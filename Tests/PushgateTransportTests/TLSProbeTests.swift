import NIOCore
import NIOPosix
import Testing

@testable import PushgateTransport

/// The probe that tells a TLS port from a cleartext one, on the ways a probe ends without an
/// answer.
@Suite("TLS probe: no answer is false, never a promise left behind")
struct TLSProbeTests {
    @Test("a port nothing listens on (connection refused) is not TLS, and the probe ends")
    func refused() async throws {
        // A port just freed: nothing listens on it when the probe connects.
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(listener.localAddress?.port)
        try await listener.close()
        let answers = await TLSProbe.answers(
            host: "127.0.0.1",
            port: port,
            group: MultiThreadedEventLoopGroup.singleton
        )
        #expect(!answers)
    }
}
