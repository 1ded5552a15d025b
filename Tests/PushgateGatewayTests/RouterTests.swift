import Foundation
import Logging
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateDeviceClient
import PushgateGateway
import PushgateHTTP
import PushgateOperator
import PushgateStore
import PushgateStoreSQLite
import PushgateStoreTestKit
import PushgateTestKit
import PushgateTransport
import Testing

@Suite("Gateway routing over both HTTP versions", .timeLimit(.minutes(1)))
struct RouterTests {
    @Test("health and readiness over HTTP/2; readiness follows the gateway's state")
    func healthAndReadiness() async throws {
        try await withGateway { gateway in
            let connection = try await gateway.connect()
            let health = try await connection.send(HTTPClientRequest(path: "/healthz"))
            #expect(health.status == 200)
            #expect(String(buffer: health.body) == "ok\n")

            // Started: ready.
            #expect(try await connection.send(HTTPClientRequest(path: "/readyz")).status == 200)
            gateway.readiness.set(false)
            #expect(try await connection.send(HTTPClientRequest(path: "/readyz")).status == 503)
            gateway.readiness.set(true)
            #expect(try await connection.send(HTTPClientRequest(path: "/readyz")).status == 200)
            gateway.readiness.beginDraining()
            #expect(try await connection.send(HTTPClientRequest(path: "/readyz")).status == 503)
            await connection.close()
        }
    }

    @Test("HEAD gets a GET route's head alone: a monitor's probe over either version leaves the connection usable")
    func headRequests() async throws {
        try await withGateway { gateway in
            let connection = try await gateway.connect()
            let head = try await connection.send(HTTPClientRequest(method: "HEAD", path: "/healthz"))
            #expect(head.status == 200)
            #expect(head.body.readableBytes == 0)
            let health = try await connection.send(HTTPClientRequest(path: "/healthz"))
            #expect(health.status == 200 && String(buffer: health.body) == "ok\n")
            await connection.close()

            // Over HTTP/1.1 on one connection: the GET's answer follows the HEAD's head directly.
            let text = try await gateway.http1(
                "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            let answers = text.components(separatedBy: "\r\n\r\n")
            #expect(
                answers.count == 3 && answers[0].hasPrefix("HTTP/1.1 200")
                    && answers[0].lowercased().contains("content-length: 3"),
                "\(text)"
            )
            #expect(answers.count == 3 && answers[1].hasPrefix("HTTP/1.1 200") && answers[2] == "ok\n", "\(text)")
            // A refusal to HEAD has no body either; and the allow of a GET route names HEAD.
            let refused = try await gateway.http1("HEAD /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(refused.hasPrefix("HTTP/1.1 404") && refused.hasSuffix("\r\n\r\n"), "\(refused)")
            let post = try await gateway.http1(
                "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            #expect(post.hasPrefix("HTTP/1.1 405") && post.lowercased().contains("allow: get, head"), "\(post)")
        }
    }

    @Test(
        "HTTP/1.1 to the provider API and the device event stream gets 505 with a hint (and the provider API its apns-id); operator and device JSON routes answer"
    )
    func http1Routes() async throws {
        try await withGateway { gateway in
            for path in ["/3/device/abc", "/v1/devices/x/events"] {
                let text = try await gateway.http1("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                #expect(text.hasPrefix("HTTP/1.1 505"), "\(path): \(text)")
                #expect(text.contains(#""reason":"HTTPVersionNotSupported""#))
                #expect(text.contains("--http2-prior-knowledge"))
            }
            // The provider API's answers all carry an apns-id, this one too: the request's own.
            let provider = try await gateway.http1(
                "POST /3/device/abc HTTP/1.1\r\nHost: x\r\napns-id: 123e4567-e89b-12d3-a456-4266554400a0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            #expect(provider.hasPrefix("HTTP/1.1 505"), "\(provider)")
            #expect(provider.lowercased().contains("apns-id: 123e4567-e89b-12d3-a456-4266554400a0\r\n"), "\(provider)")
            // A device set up and acked over HTTP/1.1 (plain curl, provisioning scripts).
            let created = try await gateway.http1(
                "POST /v1/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            #expect(created.hasPrefix("HTTP/1.1 201"), "\(created)")
            let json = try #require(created.range(of: "\r\n\r\n").map { Data(created[$0.upperBound...].utf8) })
            let device = try JSONDecoder().decode([String: String].self, from: json)
            let id = try #require(device["deviceId"])
            let secret = try #require(device["secret"])
            let body = #"{"topic":"com.example.http1"}"#
            let registered = try await gateway.http1(
                "POST /v1/devices/\(id)/registrations HTTP/1.1\r\nHost: x\r\nAuthorization: bearer \(secret)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            )
            #expect(registered.hasPrefix("HTTP/1.1 201") && registered.contains("com.example.http1"), "\(registered)")
            let ack = #"{"upTo":0}"#
            let acked = try await gateway.http1(
                "POST /v1/devices/\(id)/ack HTTP/1.1\r\nHost: x\r\nAuthorization: bearer \(secret)\r\nContent-Length: \(ack.utf8.count)\r\nConnection: close\r\n\r\n\(ack)"
            )
            #expect(acked.hasPrefix("HTTP/1.1 204"), "\(acked)")
            let stream = try await gateway.http1(
                "GET /v1/devices/\(id)/events HTTP/1.1\r\nHost: x\r\nAuthorization: bearer \(secret)\r\nConnection: close\r\n\r\n"
            )
            #expect(stream.hasPrefix("HTTP/1.1 505"), "\(stream)")
            // Bytes that are not HTTP/1.1 get the 400 in the one error format, then the close.
            let garbage = try await gateway.http1("GET / HTTP/9.9\r\nHost: x\r\n\r\n")
            #expect(garbage.hasPrefix("HTTP/1.1 400"), "\(garbage)")
            #expect(
                garbage.contains(#""reason":"BadRequest""#) && garbage.contains("not an HTTP/1.1 request"),
                "\(garbage)"
            )
            #expect(garbage.lowercased().contains("connection: close"), "\(garbage)")
            let health = try await gateway.http1("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(health.hasPrefix("HTTP/1.1 200 OK"))
            #expect(health.hasSuffix("ok\n"))
        }
    }

    @Test(
        "header fields larger than the gateway reads get 431 RequestHeaderFieldsTooLarge as JSON: over HTTP/2 on that stream (a provider's with its apns-id), over HTTP/1.1 before the close"
    )
    func headerFieldsTooLarge() async throws {
        try await withGateway { gateway in
            let connection = try await gateway.connect()
            let apnsID = "9b3a1a4e-0b5c-4f43-9d5e-6a1f2b3c4d5e"
            let huge = String(repeating: "a", count: 40 * 1024)
            let push = try await connection.send(
                HTTPClientRequest(
                    method: "POST",
                    path: "/3/device/" + String(repeating: "a", count: 64),
                    headers: ["apns-id": apnsID, "apns-topic": "com.example.app", "x-huge": huge],
                    body: ByteBuffer(string: "{}")
                )
            )
            #expect(push.status == 431)
            #expect(push.headers.first(name: "apns-id") == apnsID, "\(push.headers)")
            #expect(
                String(buffer: push.body)
                    == #"{"reason":"RequestHeaderFieldsTooLarge","detail":"the request's header fields come to more than 32768 bytes"}"#
            )
            let device = try await connection.send(
                HTTPClientRequest(
                    method: "POST",
                    path: "/v1/devices",
                    headers: ["x-huge": huge],
                    body: ByteBuffer(string: "{}")
                )
            )
            #expect(
                device.status == 431 && String(buffer: device.body).contains(#""reason":"RequestHeaderFieldsTooLarge""#)
            )
            #expect(try await connection.send(HTTPClientRequest(path: "/healthz")).status == 200)
            await connection.close()

            let http1 = try await gateway.http1(
                "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: \(String(repeating: "a", count: 100 * 1024))\r\n\r\n"
            )
            #expect(http1.hasPrefix("HTTP/1.1 431"), "\(http1.prefix(200))")
            #expect(
                http1.contains(
                    #"{"reason":"RequestHeaderFieldsTooLarge","detail":"the request's header fields come to more than 81920 bytes"}"#
                ),
                "\(http1)"
            )
            #expect(http1.lowercased().contains("connection: close"), "\(http1)")
        }
    }

    @Test("unknown route 404 and wrong method 405, as JSON with reason and detail")
    func unknownRouteAndMethod() async throws {
        try await withGateway { gateway in
            let connection = try await gateway.connect()
            let missing = try await connection.send(HTTPClientRequest(path: "/nope?x=1"))
            #expect(missing.status == 404)
            #expect(missing.headers.first(name: "content-type") == "application/json")
            #expect(String(buffer: missing.body) == #"{"reason":"NotFound","detail":"no route for /nope"}"#)

            let wrongMethod = try await connection.send(HTTPClientRequest(method: "POST", path: "/healthz"))
            #expect(wrongMethod.status == 405)
            #expect(wrongMethod.headers.first(name: "allow") == "GET, HEAD")
            await connection.close()
        }
    }

    @Test(
        "a wrong method on the device and provider routes (prefix routes, which answer it themselves) gets 405 with allow"
    )
    func wrongMethodOnPrefixRoutes() async throws {
        try await withGateway { gateway in
            let connection = try await gateway.connect()
            let cases: [(method: String, path: String, allow: String)] = [
                ("TRACE", "/v1/devices/0123/ack", "POST"),
                ("GET", "/v1/devices/0123/state", "PUT"),
                ("POST", "/v1/devices/0123/events", "GET"),
                ("PUT", "/v1/devices/0123", "DELETE"),
                ("GET", "/v1/devices/0123/registrations/abc", "DELETE"),
                ("GET", "/3/device/" + String(repeating: "a", count: 64), "POST"),
            ]
            for (method, path, allow) in cases {
                let response = try await connection.send(
                    HTTPClientRequest(
                        method: method,
                        path: path,
                        headers: ["authorization": "bearer x", "apns-topic": "com.example.app"]
                    )
                )
                #expect(response.status == 405, "\(method) \(path)")
                #expect(response.headers.first(name: "allow") == allow, "\(method) \(path): \(response.headers)")
                #expect(String(buffer: response.body).contains(#""reason":"MethodNotAllowed""#), "\(method) \(path)")
            }
            await connection.close()
        }
    }

    @Test("an exact route wins over prefixes, and the longest matching prefix over shorter ones")
    func longestPrefix() async throws {
        var router = Router()
        func answer(_ text: String) -> RouteHandler {
            { _, responder in responder.respond(HTTPServerResponse(status: 200, text: text)) }
        }
        router.addPrefix(nil, "/a/", protocols: .http1AndHTTP2, role: .operator, handler: answer("a"))
        router.addPrefix(nil, "/a/b/", protocols: .http1AndHTTP2, role: .operator, handler: answer("ab"))
        router.add("GET", "/a/b/exact", protocols: .http1AndHTTP2, role: .operator, handler: answer("exact"))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = HTTPServer(
            listeners: [ListenerConfiguration(host: "127.0.0.1", port: 0)],
            configuration: HTTPServerConfiguration(),
            application: router,
            group: group,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        var failure: (any Error)?
        do {
            let port = try #require(try await server.start().first?.port)
            let connection = try await HTTP2ClientConnection.connect(host: "127.0.0.1", port: port, group: group)
            var bodies: [String] = []
            // A query is not part of the path, even when it looks like one.
            for path in [
                "/a/x", "/a/b/x", "/a/b/exact", "/a/b/exact/more", "/a/bb", "/a/b/exact?next=/a/b/x", "/a/b?/a/b/",
            ] {
                bodies.append(String(buffer: try await connection.send(HTTPClientRequest(path: path)).body))
            }
            #expect(bodies == ["a", "ab", "exact", "ab", "a", "exact", "a"])
            await connection.close()
        } catch {
            failure = error
        }
        await server.shutdownGracefully(deadline: .milliseconds(100))
        try await group.shutdownGracefully()
        if let failure { throw failure }
    }
}
