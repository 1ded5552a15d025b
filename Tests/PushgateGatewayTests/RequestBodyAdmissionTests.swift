import NIOCore
import PushgateCrypto
import PushgateGateway
import PushgateProviderAuth
import PushgateTestKit
import PushgateTransport
import Testing

/// The security review's unauthenticated memory exhaustion (issue 24): clients that open
/// provider streams and send body bytes without ever ending them. Through the real server, with
/// a client that writes its frames by hand: nothing of a body is held for a provider that has
/// not proven who it is, no body larger than a push may be is held, and what bodies hold in all
/// is bounded.
@Suite("Request bodies through the gateway: refused on their head, past their route's limit, over the budget")
struct RequestBodyAdmissionTests {
    static let token = String(repeating: "ab", count: 32)
    static let topic = ProviderAuthRouteTests.topic
    static let noError: UInt32 = 0
    static let refusedStream: UInt32 = 7

    static func pushHead(_ extra: [(String, String)] = []) -> [(String, String)] {
        [
            (":method", "POST"), (":scheme", "http"), (":path", "/3/device/\(token)"), (":authority", "localhost"),
            ("apns-topic", topic),
        ] + extra
    }

    /// Sends a provider request's head and `frames` DATA frames of 1,000 bytes, never ending
    /// it; returns what came back on its stream once answered and reset.
    static func unfinishedPush(
        _ client: RawHTTP2Client,
        stream: UInt32,
        headers: [(String, String)],
        frames: Int
    ) async throws -> [WireFrame] {
        try await client.sendHeaders(streamID: stream, pushHead(headers), endStream: false)
        for _ in 0..<frames {
            try await client.sendData(streamID: stream, Array(repeating: 0x20, count: 1000), endStream: false)
        }
        // Body still coming after the answer is what the reset stops (the frames above may all
        // have arrived before it).
        _ = try await client.frames { $0.answered(stream) }
        try await client.sendData(streamID: stream, Array(repeating: 0x20, count: 1000), endStream: false)
        return try await client.frames { $0.answered(stream) && $0.reset(of: stream) != nil }.filter {
            $0.streamID == stream
        }
    }

    @Test(
        "no token, an invalid or an expired one: 403 with APNs' reason while the body is still coming, then the stream is reset when more body comes"
    )
    func refusedOnTheHead() async throws {
        let keys = ProviderAuthRouteTests.Keys()
        let now = ProviderAuthRouteTests.start
        try await withGateway(clock: TestClock(now), access: try keys.access()) { gateway in
            let client = try await RawHTTP2Client.connect(port: gateway.port, group: gateway.group)
            let cases: [(headers: [(String, String)], reason: String)] = [
                ([], "MissingProviderToken"),
                ([("authorization", "bearer \(keys.token(keys.stranger, at: now))")], "InvalidProviderToken"),
                ([("authorization", "bearer \(keys.token(keys.first, at: now - 3_601_000))")], "ExpiredProviderToken"),
            ]
            // One stream at a time: the connection is gated to one until it authenticates.
            for (index, refused) in cases.enumerated() {
                let stream = UInt32(1 + 2 * index)
                let frames = try await Self.unfinishedPush(client, stream: stream, headers: refused.headers, frames: 20)
                #expect(frames.body(of: stream).contains(#""reason":"\#(refused.reason)""#), "\(frames)")
                #expect(frames.reset(of: stream) == Self.noError)
            }
            await client.close()
        }
    }

    @Test(
        "a provider body past 5,120 bytes: 413 PayloadTooLarge before it ends, counted as a rejection; a push within it is served"
    )
    func payloadTooLarge() async throws {
        let keys = ProviderAuthRouteTests.Keys()
        let now = ProviderAuthRouteTests.start
        try await withGateway(clock: TestClock(now), access: try keys.access()) { gateway in
            let authorization = ("authorization", "bearer \(keys.token(keys.first, at: now))")
            let client = try await RawHTTP2Client.connect(port: gateway.port, group: gateway.group)
            let frames = try await Self.unfinishedPush(
                client,
                stream: 1,
                headers: [authorization, ("apns-push-type", "voip")],
                frames: 6
            )
            #expect(frames.body(of: 1).contains(#""reason":"PayloadTooLarge""#), "\(frames)")
            #expect(frames.body(of: 1).contains("larger than 5120 bytes"), "\(frames)")
            #expect(frames.reset(of: 1) == Self.noError)
            await client.close()
            #expect(try await scrape(gateway)[#"pushgate_notifications_rejected_total{reason="PayloadTooLarge"}"#] == 1)

            let provider = try await API(gateway)
            let token = try await ProviderAuthRouteTests.deviceToken(gateway)
            let payload = #"{"aps":{"alert":"\#(String(repeating: "x", count: 4000))"}}"#
            let pushed = try await provider.push(
                token: token,
                topic: Self.topic,
                headers: [authorization],
                payload: payload
            )
            #expect(pushed.status == 200, "\(pushed.text)")
            await provider.close()
        }
    }

    @Test(
        "bodies past the server's budget get REFUSED_STREAM, counted; requests without a body are served, and bodies once the budget has room"
    )
    func budget() async throws {
        // 13 bodies of 5,000 bytes fit in 64 KiB; the 14th does not.
        try await withGateway(configure: { $0.requestBodyBudgetBytes = 64 * 1024 }) { gateway in
            let other = try await API(gateway)
            let device = try await other.registeredDevice(topic: Self.topic)
            let hog = try await RawHTTP2Client.connect(port: gateway.port, group: gateway.group)
            let streams = (0..<14).map { UInt32(1 + 2 * $0) }
            for stream in streams {
                try await hog.sendHeaders(streamID: stream, Self.pushHead(), endStream: false)
                try await hog.sendData(streamID: stream, Array(repeating: 0x20, count: 5000), endStream: false)
            }
            let refused = try await hog.frames { $0.reset(of: streams.last!) != nil }
            #expect(refused.reset(of: streams.last!) == Self.refusedStream)
            #expect(streams.dropLast().allSatisfy { refused.reset(of: $0) == nil }, "\(refused)")

            #expect(try await other.send("GET", "/healthz").status == 200)
            let alert = #"{"aps":{"alert":"\#(String(repeating: "x", count: 1000))"}}"#
            await #expect(throws: HTTP2ClientError.refused) {
                try await other.push(token: device.token, topic: Self.topic, payload: alert)
            }
            let exhausted = try await scrape(gateway)
            #expect(exhausted["pushgate_request_body_budget_refusals_total"] == 2)
            #expect(exhausted["pushgate_request_body_bytes"] == Double(13 * 5000))

            // The hog's bodies end (they are handed over, and answered): the budget has room again.
            for stream in streams.dropLast() { try await hog.sendData(streamID: stream, [], endStream: true) }
            _ = try await hog.frames { frames in streams.dropLast().allSatisfy { frames.answered($0) } }
            #expect(try await other.push(token: device.token, topic: Self.topic, payload: alert).status == 200)
            #expect(try await scrape(gateway)["pushgate_request_body_bytes"] == 0)
            await hog.close()
            await other.close()
        }
    }
}
