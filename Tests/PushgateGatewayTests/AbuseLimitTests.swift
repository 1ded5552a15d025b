import Foundation
import NIOCore
import NIOPosix
import PushgateGateway
import PushgateTestKit
import PushgateTransport
import Testing

/// The security review's floods, through the whole gateway from a non-loopback address (loopback
/// clients are exempt from the per-address limits): 100,000 devices created in 6 s from one
/// client, and 20,000 idle connections from one client reaching the file limit.
@Suite("Abuse limits per client address", .timeLimit(.minutes(1)))
struct AbuseLimitTests {
    private static func create(_ connection: HTTP2ClientConnection) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(method: "POST", path: "/v1/devices")
        request.headers.add(name: "content-type", value: "application/json")
        return try await connection.send(request)
    }

    @Test(
        "past deviceCreationsPerAddressPerHour one address gets 429 TooManyRequests with retry-after; loopback and other addresses still create; the hour refills it; counted"
    )
    func deviceCreation() async throws {
        let address = try #require(
            try nonLoopbackAddress(),
            "this machine has no non-loopback IPv4 address to test from"
        )
        let clock = TestClock(1_700_000_000_000)
        try await withGateway(
            clock: clock,
            configure: { $0.deviceCreationsPerAddressPerHour = 3 },
            listenHost: "0.0.0.0"
        ) { gateway in
            let remote = try await gateway.connect(host: address)
            for _ in 0..<3 { #expect(try await Self.create(remote).status == 201) }
            let refused = try await Self.create(remote)
            #expect(refused.status == 429)
            #expect(refused.headers.first(name: "retry-after") == "1200")
            let body = try JSONSerialization.jsonObject(with: Data(String(buffer: refused.body).utf8)) as? [String: Any]
            #expect(body?["reason"] as? String == "TooManyRequests")
            #expect(
                (body?["detail"] as? String)?.contains("deviceCreationsPerAddressPerHour") == true,
                "\(String(describing: body))"
            )

            let local = try await gateway.connect()
            for _ in 0..<5 { #expect(try await Self.create(local).status == 201, "loopback is not limited") }

            clock.advance(by: 1_200_000)
            #expect(try await Self.create(remote).status == 201)
            #expect(try await Self.create(remote).status == 429)
            let metrics = try await gateway.operatorGet("/metrics")
            #expect(metrics.body.contains("pushgate_device_creations_refused_total 2"), "\(metrics.body.prefix(200))")
            await remote.close()
            await local.close()
        }
    }

    @Test(
        "past maxConnectionsPerAddress one address's connections are closed on arrival; its open ones and loopback are served; counted"
    )
    func connectionsPerAddress() async throws {
        let address = try #require(
            try nonLoopbackAddress(),
            "this machine has no non-loopback IPv4 address to test from"
        )
        try await withGateway(configure: { $0.maxConnectionsPerAddress = 2 }, listenHost: "0.0.0.0") { gateway in
            let first = try await gateway.connect(host: address)
            let second = try await gateway.connect(host: address)
            #expect(try await first.send(HTTPClientRequest(path: "/healthz")).status == 200)
            #expect(try await second.send(HTTPClientRequest(path: "/healthz")).status == 200)
            // Closed by the server without a byte, before the client has sent one.
            let refused = try await ClientBootstrap(group: gateway.group).connect(host: address, port: gateway.port)
                .get()
            try await refused.closeFuture.get()
            #expect(try await first.send(HTTPClientRequest(path: "/healthz")).status == 200)
            let metrics = try await gateway.operatorGet("/metrics")
            #expect(metrics.body.contains(#"pushgate_connections_refused_total{reason="address_full"} 1"#))
            #expect(metrics.body.contains(#"pushgate_connections_refused_total{reason="server_full"} 0"#))
            await first.close()
            await second.close()
        }
    }
}
