import NIOCore
import PushgateTransport
import Testing

@Suite("Listeners: TLS, ALPN, sniffing, bad input", .timeLimit(.minutes(2)))
struct ListenerTests {
    @Test("TLS with ALPN h2")
    func tlsWithALPN() async throws {
        try await withTestServer(tls: [try Fixtures.serverContext()], cleartext: false) { server in
            let connection = try await server.connect(tls: try Fixtures.clientContext())
            let response = try await connection.send(HTTPClientRequest(path: "/conn", scheme: "https"))
            #expect(String(buffer: response.body) == "version=HTTP/2 tls=true alpn=h2 uid=none")
            await connection.close()
        }
    }

    @Test("a TLS client that offers no ALPN and speaks HTTP/2 is served by sniffing")
    func tlsWithoutALPN() async throws {
        try await withTestServer(tls: [try Fixtures.serverContext()], cleartext: false) { server in
            let connection = try await server.connect(tls: try Fixtures.clientContext(alpn: []))
            let response = try await connection.send(HTTPClientRequest(path: "/conn", scheme: "https"))
            #expect(String(buffer: response.body) == "version=HTTP/2 tls=true alpn=none uid=none")
            await connection.close()
        }
    }

    @Test("a client certificate from the configured CA is accepted and visible to the application")
    func clientCertificateAccepted() async throws {
        try await withTestServer(tls: [try Fixtures.serverContext(clientCA: true)], cleartext: false) { server in
            let connection = try await server.connect(tls: try Fixtures.clientContext(certificate: "client"))
            let response = try await connection.send(HTTPClientRequest(path: "/conn", scheme: "https"))
            #expect(String(buffer: response.body) == "version=HTTP/2 tls=true alpn=h2 uid=com.example.app")
            await connection.close()
        }
    }

    @Test("a client certificate from another CA is refused; the listener keeps serving")
    func clientCertificateRefused() async throws {
        try await withTestServer(tls: [try Fixtures.serverContext(clientCA: true)], cleartext: false) { server in
            let refused = try await server.connect(tls: try Fixtures.clientContext(certificate: "untrusted-client"))
            await #expect(throws: (any Error).self) {
                try await refused.send(HTTPClientRequest(path: "/conn", scheme: "https"))
            }
            let accepted = try await server.connect(tls: try Fixtures.clientContext(certificate: "client"))
            let response = try await accepted.send(HTTPClientRequest(path: "/hello", scheme: "https"))
            #expect(response.status == 200)
            await accepted.close()
        }
    }

    @Test("HTTP/1.1 on the cleartext listener")
    func http1BySniffing() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            try await raw.send("GET /conn HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            let text = String(buffer: try await raw.receiveUntilClosed())
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(text.hasSuffix("version=HTTP/1.1 tls=false alpn=none uid=none"))
        }
    }

    @Test(
        "HTTP/1.1 targets in absolute form are served as their origin form, their authority taking Host's place (RFC 9112 3.2.2)"
    )
    func http1AbsoluteForm() async throws {
        try await withTestServer { server in
            for (target, expected) in [
                ("http://example.com:8080/target?x=1", "path=/target?x=1 authority=example.com:8080"),
                ("HTTPS://example.com/target", "path=/target authority=example.com"),
                ("/target", "path=/target authority=localhost"),
            ] {
                let raw = try await RawConnection.connect(port: server.port, group: server.group)
                try await raw.send("GET \(target) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                let text = String(buffer: try await raw.receiveUntilClosed())
                #expect(text.hasPrefix("HTTP/1.1 200"), "\(target): \(text)")
                #expect(text.hasSuffix(expected), "\(target): \(text)")
            }
        }
    }

    @Test("garbage bytes get a 400 and a closed connection; others are unaffected")
    func garbageClosesOnlyThatConnection() async throws {
        try await withTestServer { server in
            let healthy = try await server.connect()
            #expect(try await healthy.send(HTTPClientRequest(path: "/hello")).status == 200)

            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            try await raw.send([0x16, 0x03, 0x01, 0xFF, 0x00, 0x13, 0x37] + Array("\r\n\r\n\u{0}garbage\r\n\r\n".utf8))
            let text = String(buffer: try await raw.receiveUntilClosed())
            #expect(text.hasPrefix("HTTP/1.1 400"))

            #expect(try await healthy.send(HTTPClientRequest(path: "/hello")).status == 200)
            await healthy.close()
        }
    }

    @Test("a truncated HTTP/2 preface is closed after the setup timeout; others are unaffected")
    func truncatedPreface() async throws {
        try await withTestServer(configure: { $0.connectionSetupTimeout = .seconds(1) }) { server in
            let healthy = try await server.connect()
            #expect(try await healthy.send(HTTPClientRequest(path: "/hello")).status == 200)
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            // On a loaded machine the timeout may already have closed the connection.
            try? await raw.send("PRI * HTTP/2.0\r\n\r\n")
            let received = try await raw.receiveUntilClosed()
            #expect(received.readableBytes == 0)
            #expect(server.server.statistics.timedOut(.connectionSetup) == 1)
            #expect(try await healthy.send(HTTPClientRequest(path: "/hello")).status == 200)
            await healthy.close()
        }
    }

    @Test("garbage after a valid preface gets GOAWAY and a closed connection")
    func garbageAfterPreface() async throws {
        try await withTestServer { server in
            let healthy = try await server.connect()
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            // A valid preface, then a frame header claiming a 16 MiB HEADERS frame on stream 0.
            try await raw.send(
                Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0xFF, 0xFF, 0xFF, 0x01, 0x04, 0, 0, 0, 0]
                    + Array(repeating: 0x41, count: 64)
            )
            var received = try await raw.receiveUntilClosed()
            // Server SETTINGS first, then a GOAWAY frame (type 7) somewhere after it.
            var sawGoAway = false
            while received.readableBytes >= 9 {
                let length =
                    Int(received.getInteger(at: received.readerIndex, as: UInt16.self)!) << 8
                    | Int(received.getInteger(at: received.readerIndex + 2, as: UInt8.self)!)
                let type = received.getInteger(at: received.readerIndex + 3, as: UInt8.self)!
                if type == 7 { sawGoAway = true }
                received.moveReaderIndex(forwardBy: min(received.readableBytes, 9 + length))
            }
            #expect(sawGoAway)
            #expect(try await healthy.send(HTTPClientRequest(path: "/hello")).status == 200)
            await healthy.close()
        }
    }
}

@Suite("Abuse: clients that would make the server hold resources", .timeLimit(.minutes(1)))
struct AbuseTests {
    @Test("HTTP/1.1 CONNECT is answered and the connection closed, not parsed forever")
    func http1Connect() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            try await raw.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
            try? await raw.send(String(repeating: "x", count: 64 * 1024))
            let text = String(buffer: try await raw.receiveUntilClosed())
            #expect(text.hasPrefix("HTTP/1.1 404"))
            #expect(text.lowercased().contains("connection: close"))
        }
    }

    @Test("an HTTP/1.1 client stalled mid-request is closed after the idle timeout")
    func http1Stalled() async throws {
        try await withTestServer(configure: { $0.http2.idleTimeout = .milliseconds(200) }) { server in
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            try await raw.send("GET /hel")
            #expect(try await raw.receiveUntilClosed().readableBytes == 0)
        }
    }

    @Test("an HTTP/2 request that never finishes is reset after the request timeout")
    func http2RequestTimeout() async throws {
        try await withTestServer(configure: {
            $0.http2.requestTimeout = .milliseconds(200)
            $0.http2.idleTimeout = .milliseconds(200)
        }) { server in
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            // Preface, empty SETTINGS, then HEADERS (END_HEADERS, no END_STREAM) for POST /echo.
            let block: [UInt8] =
                [0x83, 0x86, 0x44, 0x05] + Array("/echo".utf8) + [0x01, 0x09] + Array("localhost".utf8)
            let headers: [UInt8] = [0, 0, UInt8(block.count), 0x01, 0x04, 0, 0, 0, 1] + block
            try await raw.send(
                Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 0x04, 0, 0, 0, 0, 0] + headers
            )
            var received = try await raw.receiveUntilClosed()
            var resetStream1 = false
            while received.readableBytes >= 9 {
                let length =
                    Int(received.getInteger(at: received.readerIndex, as: UInt16.self)!) << 8
                    | Int(received.getInteger(at: received.readerIndex + 2, as: UInt8.self)!)
                let type = received.getInteger(at: received.readerIndex + 3, as: UInt8.self)!
                let stream = received.getInteger(at: received.readerIndex + 5, as: UInt32.self)! & 0x7FFF_FFFF
                if type == 3, stream == 1 { resetStream1 = true }
                received.moveReaderIndex(forwardBy: min(received.readableBytes, 9 + length))
            }
            #expect(resetStream1)
        }
    }

    @Test("request bodies over the connection's budget are refused; the connection survives")
    func http2BodyBudget() async throws {
        try await withTestServer(configure: {
            $0.http2.maxBufferedRequestBytes = 100 * 1024
            // Small stream windows make the client interleave the bodies instead of sending them
            // one after another, so they are buffered at the same time.
            $0.http2.session.initialStreamWindowSize = 16 * 1024
        }) { server in
            let connection = try await server.connect()
            let body = TestApplication.pattern(60 * 1024)
            let outcomes = await withTaskGroup(of: String.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        do {
                            let response = try await connection.send(
                                HTTPClientRequest(method: "POST", path: "/echo", body: body)
                            )
                            return response.status == 200 && response.body == body ? "ok" : "bad \(response.status)"
                        } catch HTTP2ClientError.refused {
                            return "refused"
                        } catch {
                            return "error \(error)"
                        }
                    }
                }
                var outcomes: [String] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes.allSatisfy { $0 == "ok" || $0 == "refused" }, "\(outcomes)")
            #expect(outcomes.contains("refused"))
            #expect(try await connection.send(HTTPClientRequest(path: "/hello")).status == 200)
            await connection.close()
        }
    }

    @Test(
        "HTTP/1.1: a body that does not fit in the server's budget gets 503 with retry-after, the connection closes, the budget is whole again; a request without a body is served"
    )
    func http1BodyBudget() async throws {
        let budget = RequestBodyBudget(limit: 1024)
        try await withTestServer(configure: { $0.requestBodyBudget = budget }) { server in
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            try await raw.send(
                "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000\r\n\r\n"
                    + String(repeating: "x", count: 2000)
            )
            let text = String(buffer: try await raw.receiveUntilClosed())
            #expect(text.hasPrefix("HTTP/1.1 503"), "\(text)")
            #expect(text.lowercased().contains("retry-after: 1\r\n"), "\(text)")
            #expect(budget.refusedBodies == 1)
            #expect(budget.heldBytes == 0)

            let get = try await RawConnection.connect(port: server.port, group: server.group)
            try await get.send("GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(String(buffer: try await get.receiveUntilClosed()).hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test("a client that abandons streamed bodies does not exhaust its connection window")
    func abandonedStreams() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            for _ in 0..<6 {
                let response = try await connection.stream(HTTPClientRequest(path: "/bytes?n=\(512 * 1024)"))
                var body = response.body.makeAsyncIterator()
                _ = try await body.next()
            }
            let after = try await connection.send(HTTPClientRequest(path: "/bytes?n=\(512 * 1024)"))
            #expect(after.body.readableBytes == 512 * 1024)
            await connection.close()
        }
    }
}
