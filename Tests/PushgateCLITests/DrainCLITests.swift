import Foundation
import NIOConcurrencyHelpers
import Testing

/// PRODUCT.md section 7 and docs/deployment.md "Stopping and reloading": the drain on SIGTERM, against the
/// real binary run unprivileged. A device holds its event stream open with nghttp (which prints
/// every frame it receives, GOAWAY included); a Python provider sends SIGTERM, sees `/readyz`
/// turn 503 and still gets 200s during the grace; the stream then sees `retry:` and the
/// `shutdown` event, then GOAWAY; the process exits 0; a restart on the same data directory gives back every
/// push that was answered 200 (none was acknowledged, so all are sent again).
@Suite("Drain: SIGTERM against pushgate serve", .serialized, .timeLimit(.minutes(3)))
struct DrainCLITests {
    @Test(
        "SIGTERM: /readyz 503 at once, pushes still 200 during the grace, then GOAWAY and a retry hint, exit 0, nothing lost"
    )
    func drainSequence() throws {
        let dataDirectory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let grace = 4
        let arguments = ["--data-dir", dataDirectory, "--listen", "127.0.0.1:0", "--drain-grace-seconds", "\(grace)"]
        let topic = "com.example.drain"

        let gateway = try GatewayProcess(arguments: arguments, listeners: 1)
        let url = gateway.urls[0]
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [url, topic])
        let stream = try NghttpStream(
            url: url + "/v1/devices/\(device.deviceId)/events",
            headers: ["authorization: bearer \(device.secret)"]
        )
        #expect(stream.waitFor(":status: 200"), "the event stream opened: \(stream.output.suffix(2000))")

        let probe = try PythonClient.json(
            DrainProbe.self,
            "drain_probe.py",
            ["--url", url, "--pid", "\(gateway.process.processIdentifier)", "--token", device.token, "--topic", topic]
        )
        #expect(probe.readyBefore == 200)
        #expect(
            probe.readyzStatus == 503,
            "/readyz after SIGTERM: \(String(describing: probe.readyzStatus)) after \(probe.readyzPolls) polls"
        )
        #expect(probe.readyzAfterMs < 1000, "/readyz turned 503 \(probe.readyzAfterMs) ms after SIGTERM")
        #expect(
            probe.pushes.count == 4 && probe.pushes.allSatisfy { $0.status == 200 },
            "pushes during the grace: \(probe.pushes)"
        )
        #expect(
            probe.pushedAfterMs < grace * 1000,
            "the probe finished within the grace (\(probe.pushedAfterMs) ms), so its 200s prove it"
        )

        // nghttp exits once the gateway has closed the connection.
        let seen = stream.waitForExit()
        let goAway = seen.range(of: "recv GOAWAY")
        let retry = seen.range(of: "retry: 1000")
        #expect(goAway != nil, "nghttp saw GOAWAY: \(seen.suffix(3000))")
        #expect(
            retry != nil && seen.contains("event: shutdown"),
            "the stream ended with a retry hint: \(seen.suffix(3000))"
        )
        // The GOAWAY waits until the stream has been answered to its end: clients built on
        // Python's h2 drop every frame after one.
        if let goAway, let retry { #expect(retry.lowerBound < goAway.lowerBound, "the stream ended before the GOAWAY") }
        for push in probe.pushes {
            #expect(seen.contains(push.apnsId), "delivered on the open stream during the grace: \(push.apnsId)")
        }

        gateway.process.waitUntilExit()
        #expect(
            gateway.process.terminationReason == .exit && gateway.process.terminationStatus == 0,
            "exit status \(gateway.process.terminationStatus)"
        )

        // Nothing was acked: everything answered 200 comes back on the restarted gateway's stream.
        let restarted = try GatewayProcess(arguments: arguments, listeners: 1)
        let drained = try PythonClient.json(
            DrainResult.self,
            "drain_stream.py",
            [
                "--url", restarted.urls[0], "--device-id", device.deviceId, "--secret", device.secret, "--token",
                device.token, "--topic", topic,
            ]
        )
        let arrived = Set(drained.events.compactMap(\.apnsId))
        let lost = probe.pushes.map(\.apnsId).filter { !arrived.contains($0) }
        #expect(lost.isEmpty, "answered 200 during the grace, missing after the restart: \(lost)")
        #expect(restarted.stop() == 0)
    }
}

/// `python/drain_probe.py`'s output.
struct DrainProbe: Decodable {
    struct Push: Decodable, CustomStringConvertible {
        var apnsId: String
        var status: Int
        var newConnection: Bool
        var description: String { "\(status)\(newConnection ? " (new connection)" : "")" }
    }
    var readyBefore: Int
    var readyzPolls: Int
    var readyzStatus: Int?
    var readyzAfterMs: Int
    var pushes: [Push]
    var pushedAfterMs: Int
}

/// `nghttp -v` holding one GET open: its frames and the body, as printed, for the test to read.
final class NghttpStream: @unchecked Sendable {
    private let process = Process()
    private let collected = NIOLockedValueBox(Data())
    private let changed = NIOLockedValueBox<[DispatchSemaphore]>([])
    private let ended = DispatchSemaphore(value: 0)
    private let watchdog: DispatchWorkItem

    init(url: String, headers: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/nghttp") else { throw ToolMissing(tool: "nghttp") }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/nghttp")
        process.arguments = ["-v"] + headers.flatMap { ["-H", $0] } + [url]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        watchdog = killAfter(.seconds(90), process)
        let handle = out.fileHandleForReading
        Thread { [collected, changed, ended] in
            while true {
                let chunk = handle.availableData
                if !chunk.isEmpty { collected.withLockedValue { $0.append(chunk) } }
                for waiter in changed.withLockedValue({ $0 }) { waiter.signal() }
                if chunk.isEmpty { break }
            }
            ended.signal()
        }.start()
    }

    var output: String { String(decoding: collected.withLockedValue { $0 }, as: UTF8.self) }

    /// Waits (on arriving output, never on a clock) until the output contains `text`; false if
    /// nghttp ended without it.
    func waitFor(_ text: String) -> Bool {
        let signal = DispatchSemaphore(value: 0)
        changed.withLockedValue { $0.append(signal) }
        while !output.contains(text) {
            if !process.isRunning, ended.wait(timeout: .now()) == .success {
                ended.signal()
                return output.contains(text)
            }
            _ = signal.wait(timeout: .now() + .seconds(1))  // bounded: re-checks whether nghttp ended
        }
        return true
    }

    /// Everything nghttp printed, once it has exited.
    func waitForExit() -> String {
        process.waitUntilExit()
        ended.wait()
        ended.signal()
        watchdog.cancel()
        return output
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}
