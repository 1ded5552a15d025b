import Foundation
import Testing

/// `pushgate serve` as a user runs it, driven by curl, nghttp and h2load.
@Suite("External HTTP clients against pushgate serve", .serialized, .timeLimit(.minutes(5)))
struct ExternalClientTests {
    @Test("curl: h2c with prior knowledge, HTTP/1.1, and HTTP/2 over TLS with the test CA")
    func curl() throws {
        let gateway = try GatewayProcess.cleartextAndTLS()
        let h2c = try run("curl", ["-sS", "-i", "--http2-prior-knowledge", gateway.urls[0] + "/healthz"])
        #expect(h2c.status == 0, "\(h2c.stderr)")
        #expect(h2c.stdout.hasPrefix("HTTP/2 200"))
        #expect(h2c.stdout.hasSuffix("ok\n"))

        let http1 = try run("curl", ["-sS", "-i", gateway.urls[0] + "/healthz"])
        #expect(http1.stdout.hasPrefix("HTTP/1.1 200 OK"))
        #expect(http1.stdout.hasSuffix("ok\n"))

        let http1ToH2Route = try run("curl", ["-sS", "-i", gateway.urls[0] + "/3/device/00"])
        #expect(http1ToH2Route.stdout.hasPrefix("HTTP/1.1 505"))
        #expect(http1ToH2Route.stdout.contains("--http2-prior-knowledge"))
        // curl without flags sets a device up: the device API's JSON routes answer HTTP/1.1.
        let device = try run("curl", ["-sS", "-i", "-X", "POST", gateway.urls[0] + "/v1/devices"])
        #expect(device.stdout.hasPrefix("HTTP/1.1 201"), "\(device.stdout)")

        // The certificate names localhost; curl must verify it against the test CA.
        let tlsURL = gateway.urls[1].replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let tls = try run("curl", ["-sS", "-i", "--http2", "--cacert", Fixtures.tls("ca.pem"), tlsURL + "/readyz"])
        #expect(tls.status == 0, "\(tls.stderr)")
        #expect(tls.stdout.hasPrefix("HTTP/2 200"))

        let tlsHTTP1 = try run(
            "curl",
            ["-sS", "-i", "--http1.1", "--cacert", Fixtures.tls("ca.pem"), tlsURL + "/healthz"]
        )
        #expect(tlsHTTP1.stdout.hasPrefix("HTTP/1.1 200 OK"))

        #expect(gateway.stop(signal: SIGTERM) == 0)
    }

    @Test("nghttp -v sees the SETTINGS and a 200")
    func nghttp() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        let result = try run("nghttp", ["-v", gateway.urls[0] + "/healthz"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1000"))
        #expect(result.stdout.contains(":status: 200"))
        #expect(gateway.stop(signal: SIGINT) == 0)
    }

    @Test("h2load: 100,000 requests over h2c and 20,000 over TLS, none failed")
    func h2load() throws {
        let gateway = try GatewayProcess.cleartextAndTLS()
        let h2c = try run("h2load", ["-n", "100000", "-c", "16", "-m", "100", gateway.urls[0] + "/healthz"])
        #expect(h2c.status == 0, "\(h2c.stderr)")
        #expect(h2c.stdout.contains("100000 succeeded, 0 failed, 0 errored, 0 timeout"), "\(h2c.stdout)")

        let tls = try run("h2load", ["-n", "20000", "-c", "8", "-m", "50", gateway.urls[1] + "/healthz"])
        #expect(tls.status == 0, "\(tls.stderr)")
        #expect(tls.stdout.contains("20000 succeeded, 0 failed, 0 errored, 0 timeout"), "\(tls.stdout)")
        #expect(tls.stdout.contains("Application protocol: h2"))
        #expect(gateway.stop() == 0)
    }

    @Test("SIGTERM exits 0")
    func sigterm() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        #expect(gateway.stop(signal: SIGTERM) == 0)
    }

    @Test("an unusable TLS key is refused at start with the path in the message")
    func badKeyPath() throws {
        let result = try runPushgate([
            "serve", "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0",
            "--tls-cert", Fixtures.tls("server.pem"), "--tls-key", "/nonexistent/key.pem",
        ])
        #expect(result.status != 0)
        #expect(result.stderr.contains("/nonexistent/key.pem"))
    }

    private func runPushgate(_ arguments: [String]) throws -> ToolRun {
        let process = Unprivileged.process(arguments)
        let err = Pipe()
        process.standardError = err
        process.standardOutput = Pipe()
        try process.run()
        let data = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ToolRun(status: process.terminationStatus, stdout: "", stderr: String(decoding: data, as: UTF8.self))
    }
}
