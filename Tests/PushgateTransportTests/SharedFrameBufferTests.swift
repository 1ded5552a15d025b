import CNGHTTP2
import NIOCore
import NIOPosix
import Testing

@testable import PushgateTransport

@Suite("Server sessions of one event loop share nghttp2's frame buffer", .timeLimit(.minutes(1)))
struct SharedFrameBufferTests {
    @Test("sessions made on a loop thread share its buffer; elsewhere each keeps its own")
    func sharingFollowsTheThread() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loops = Array(group.makeIterator())
        let delegate = SilentDelegate()

        func sharedBuffers(on loop: any EventLoop) async throws -> [ObjectIdentifier?] {
            try await loop.submit {
                let sessions = try (0..<2).map { _ in
                    try NGHTTP2Session(
                        role: .server,
                        limits: HTTP2SessionLimits(),
                        sharingFrameBuffer: true,
                        delegate: delegate
                    )
                }
                return sessions.map { $0.sharedFrameBuffer.map(ObjectIdentifier.init) }
            }.get()
        }
        // If libnghttp2 ever allocates its frame buffer with another size, nothing is shared
        // and this fails: the idle-memory saving would be gone without a word otherwise.
        let first = try await sharedBuffers(on: loops[0])
        #expect(first[0] != nil)
        #expect(first[0] == first[1])
        let second = try await sharedBuffers(on: loops[1])
        #expect(second[0] != nil && second[0] != first[0])

        let offLoop = try NGHTTP2Session(
            role: .server,
            limits: HTTP2SessionLimits(),
            sharingFrameBuffer: true,
            delegate: delegate
        )
        #expect(offLoop.sharedFrameBuffer == nil)
        try await group.shutdownGracefully()
    }

    @Test("multi-frame responses on 12 connections served by two threads arrive byte for byte")
    func interleavedResponsesStayIntact() async throws {
        try await withTestServer { server in
            var connections: [HTTP2ClientConnection] = []
            for _ in 0..<12 { connections.append(try await server.connect()) }
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for (index, connection) in connections.enumerated() {
                    for request in 0..<3 {
                        // Sizes that end mid-frame, so frames of every length go through.
                        let size = 20_000 + index * 977 + request * 131
                        group.addTask {
                            let response = try await connection.send(HTTPClientRequest(path: "/bytes?n=\(size)"))
                            return response.status == 200 && response.body == TestApplication.pattern(size)
                        }
                    }
                }
                var all: [Bool] = []
                for try await result in group { all.append(result) }
                return all
            }
            #expect(results.count == 36)
            #expect(results.allSatisfy { $0 })
            for connection in connections { await connection.close() }
        }
    }
}

private final class SilentDelegate: NGHTTP2SessionDelegate, @unchecked Sendable {
    func sessionBeginHeaders(streamID: Int32, category: nghttp2_headers_category) -> Bool { true }
    func sessionHeader(
        streamID: Int32,
        category: nghttp2_headers_category,
        name: UnsafeBufferPointer<UInt8>,
        value: UnsafeBufferPointer<UInt8>
    ) -> Bool { true }
    func sessionHeadersComplete(streamID: Int32, category: nghttp2_headers_category, endStream: Bool) {}
    func sessionData(streamID: Int32, bytes: UnsafeRawBufferPointer) -> Bool { true }
    func sessionDataFrame(streamID: Int32, endStream: Bool) {}
    func sessionStreamClosed(streamID: Int32, errorCode: UInt32) {}
    func sessionGoAwayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {}
    func sessionPingAckReceived() {}
    func sessionSettingsReceived() {}
    func sessionBodyDrained(streamID: Int32, remaining: Int) {}
    func sessionEndStreamSent(streamID: Int32) {}
    func sessionGoAwaySent(errorCode: UInt32) {}
    func sessionWastedFrame() -> Bool { true }
}
