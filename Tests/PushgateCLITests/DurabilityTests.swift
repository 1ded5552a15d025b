import Foundation
import Testing

/// PRODUCT.md sections 2 and 8: a 200 means the push is on disk, so `kill -9` at any moment loses
/// no acknowledged push, and acked deliveries are not redelivered after a restart.
///
/// The pushes come from Python's httpx over one HTTP/2 (h2c) connection with many concurrent
/// streams, each with its own apns-id (`python/provider_burst.py`); after the restart the device
/// reads its backlog with httpx (`python/drain_stream.py`), which pushes a marker right after
/// opening the stream and reads until the marker arrives: seqs are assigned at acceptance, so
/// the whole backlog comes before it, and no test waits on a clock.
@Suite("Durability: kill -9 against pushgate serve", .serialized, .timeLimit(.minutes(5)))
struct DurabilityTests {
    static let pushes = 500
    static let paddingBytes = 600  // ~1.2 KB events: 500 of them overrun the 256 KiB unacked window

    @Test("SIGKILL right after a burst of 200s loses nothing; acked notifications stay acked across another SIGKILL")
    func killAfterBurst() throws {
        let dataDirectory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let arguments = ["--data-dir", dataDirectory, "--listen", "127.0.0.1:0"]
        let topic = "com.example.durable"

        var gateway = try GatewayProcess(arguments: arguments, listeners: 1)
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        // The device never connects before the crash: everything is stored.
        let burst = try burst(gateway, device, killAfter: nil)
        #expect(
            burst.ok.count == Self.pushes,
            "every push answered 200; rejected: \(burst.rejected.prefix(5)), unknown: \(burst.unknown.prefix(5))"
        )
        #expect(burst.rejected.isEmpty, "\(burst.rejected.prefix(10))")
        #expect(burst.unknown.isEmpty, "\(burst.unknown.prefix(10))")
        #expect(burst.dispositions == ["stored": Self.pushes], "\(burst.dispositions)")
        #expect(burst.badEcho.isEmpty, "200s whose apns-id was not the request's: \(burst.badEcho.prefix(5))")
        #expect(burst.httpVersions == ["HTTP/2": Self.pushes], "\(burst.httpVersions)")

        expectKilled(gateway, status: gateway.stop(signal: SIGKILL))
        gateway = try GatewayProcess(arguments: arguments, listeners: 1)
        let drained = try drain(gateway, device, ackFinal: true)
        checkBacklog(burst: burst, drained: drained, exactly: true)
        #expect(drained.finalAck == 204, "ack through the marker: \(String(describing: drained.finalAck))")

        // Everything is acked (the 204 came after the store committed). Crash again: nothing
        // acked may come back; the next push continues the device's sequence.
        expectKilled(gateway, status: gateway.stop(signal: SIGKILL))
        gateway = try GatewayProcess(arguments: arguments, listeners: 1)
        let again = try drain(gateway, device, ackFinal: false)
        #expect(
            again.events.map(\.apnsId) == [again.marker],
            "acked before the crash, redelivered after it: \(again.events.count - 1) notifications, first \(again.events.prefix(3).map { "\($0.seq ?? -1) \($0.apnsId ?? "?")" })"
        )
        if let before = drained.events.last?.seq, let after = again.events.last?.seq {
            #expect(after > before, "seq is strictly increasing per device, across restarts: \(after) after \(before)")
        }
        #expect(gateway.stop(signal: SIGTERM) == 0)
    }

    @Test("SIGKILL in the middle of a burst: every 200 survives, in-flight pushes may or may not")
    func killDuringBurst() throws {
        let dataDirectory = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let arguments = ["--data-dir", dataDirectory, "--listen", "127.0.0.1:0"]
        let topic = "com.example.midburst"

        var gateway = try GatewayProcess(arguments: arguments, listeners: 1)
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], topic])
        // provider_burst.py sends SIGKILL itself once 200 pushes have their 200, with up to 100
        // streams still in flight, and keeps reading whatever 200s were already on the wire.
        let burst = try burst(gateway, device, killAfter: 200)
        gateway.process.waitUntilExit()
        expectKilled(gateway, status: gateway.process.terminationStatus)
        #expect(
            burst.killedAfter != nil && burst.ok.count >= 200,
            "killed after \(String(describing: burst.killedAfter)) of \(burst.ok.count) 200s"
        )
        #expect(burst.rejected.isEmpty, "nothing is refused before the crash: \(burst.rejected.prefix(10))")
        #expect(burst.dispositions == ["stored": burst.ok.count], "\(burst.dispositions)")
        #expect(burst.badEcho.isEmpty, "\(burst.badEcho.prefix(5))")

        gateway = try GatewayProcess(arguments: arguments, listeners: 1)
        let drained = try drain(gateway, device, ackFinal: true)
        checkBacklog(burst: burst, drained: drained, exactly: false)
        #expect(gateway.stop(signal: SIGTERM) == 0)
    }

    // MARK: Steps

    private func burst(_ gateway: GatewayProcess, _ device: DeviceInfo, killAfter: Int?) throws -> BurstResult {
        var arguments = [
            "--url", gateway.urls[0], "--token", device.token, "--topic", device.topic,
            "--count", "\(Self.pushes)", "--concurrency", "100", "--payload-bytes", "\(Self.paddingBytes)",
        ]
        if let killAfter {
            arguments += ["--kill-pid", "\(gateway.process.processIdentifier)", "--kill-after", "\(killAfter)"]
        }
        let result = try PythonClient.json(BurstResult.self, "provider_burst.py", arguments)
        #expect(result.sent.count == Self.pushes && Set(result.sent).count == Self.pushes, "distinct apns-ids")
        return result
    }

    private func drain(_ gateway: GatewayProcess, _ device: DeviceInfo, ackFinal: Bool) throws -> DrainResult {
        var arguments = [
            "--url", gateway.urls[0], "--device-id", device.deviceId, "--secret", device.secret,
            "--token", device.token, "--topic", device.topic, "--ack-every", "64",
        ]
        if ackFinal { arguments.append("--ack-final") }
        let drained = try PythonClient.json(DrainResult.self, "drain_stream.py", arguments)
        #expect(
            drained.status == 200 && drained.httpVersion == "HTTP/2",
            "GET events: \(drained.status) \(drained.httpVersion)"
        )
        #expect(
            drained.contentType?.hasPrefix("text/event-stream") == true,
            "\(String(describing: drained.contentType))"
        )
        #expect(drained.markerStatus == 200)
        #expect(drained.events.last?.apnsId == drained.marker)
        #expect(drained.acks.allSatisfy { $0.count == 2 && $0[1] == 204 }, "acks while reading: \(drained.acks)")
        return drained
    }

    private func expectKilled(
        _ gateway: GatewayProcess,
        status: Int32,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            gateway.process.terminationReason == .uncaughtSignal && status == SIGKILL,
            "pushgate serve should have died of SIGKILL: \(gateway.process.terminationReason == .exit ? "exit" : "signal") \(status)",
            sourceLocation: sourceLocation
        )
    }

    /// Every push answered 200 arrived, exactly once, with its payload; nothing arrived that was
    /// refused or never sent; seqs strictly increase. `exactly`: every push got a 200, so the
    /// backlog is exactly those pushes.
    private func checkBacklog(
        burst: BurstResult,
        drained: DrainResult,
        exactly: Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let backlog = drained.events.dropLast()  // the marker is last (checked in drain)
        let arrived = backlog.map { $0.apnsId ?? "<none>" }
        let arrivedSet = Set(arrived)

        let missing = Set(burst.ok).subtracting(arrivedSet)
        #expect(
            missing.count == 0,
            "\(missing.count) of \(burst.ok.count) pushes answered 200 were lost in the crash, e.g. \(missing.sorted().prefix(5)); \(arrived.count) arrived",
            sourceLocation: sourceLocation
        )

        var counts: [String: Int] = [:]
        for id in arrived { counts[id, default: 0] += 1 }
        let duplicated = counts.filter { $0.value > 1 }
        #expect(
            duplicated.count == 0,
            "\(duplicated.count) notifications arrived more than once on one stream, e.g. \(duplicated.prefix(5))",
            sourceLocation: sourceLocation
        )

        let sent = Dictionary(uniqueKeysWithValues: burst.sent.enumerated().map { ($1, $0) })
        let strangers = arrivedSet.filter { sent[$0] == nil }
        #expect(
            strangers.count == 0,
            "arrived but never sent: \(strangers.sorted().prefix(5))",
            sourceLocation: sourceLocation
        )
        let refused = arrivedSet.intersection(burst.rejected.map(\.apnsId))
        #expect(
            refused.count == 0,
            "arrived although refused: \(refused.sorted().prefix(5))",
            sourceLocation: sourceLocation
        )
        if exactly {
            let unexpected = arrivedSet.subtracting(burst.ok)
            #expect(
                unexpected.count == 0,
                "every push was answered 200, yet \(unexpected.sorted().prefix(5)) arrived too",
                sourceLocation: sourceLocation
            )
        }

        let seqs = drained.events.map { $0.seq ?? -1 }
        let unordered = zip(seqs, seqs.dropFirst()).filter { $0 >= $1 }
        #expect(
            unordered.count == 0,
            "seqs not strictly increasing, e.g. \(unordered.prefix(5))",
            sourceLocation: sourceLocation
        )
        let badIDs = drained.events.filter { $0.sseId != $0.seq.map(String.init) }
        #expect(
            badIDs.count == 0,
            "SSE id differs from seq: \(badIDs.prefix(3).map { "\($0.sseId ?? "nil") vs \($0.seq ?? -1)" })",
            sourceLocation: sourceLocation
        )

        // What comes back is what was sent.
        var damaged: [String] = []
        for event in backlog {
            guard let id = event.apnsId, let index = sent[id] else { continue }
            let payload = event.payload
            if payload?["label"] != .string("burst \(index)")
                || payload?["padding"] != .number(Double(Self.paddingBytes))
                || event.token != burst.token || event.topic != burst.topic || event.pushType != "alert"
                || event.priority != 10
            {
                damaged.append(
                    "\(id): \(event.token ?? "nil") \(event.topic ?? "nil") \(event.pushType ?? "nil") \(event.priority ?? -1) \(payload.map { "\($0)".prefix(200) } ?? "nil")"
                )
            }
        }
        #expect(
            damaged.count == 0,
            "\(damaged.count) notifications came back different from what was sent, e.g. \(damaged.prefix(3))",
            sourceLocation: sourceLocation
        )
    }
}

/// `python/provider_burst.py`'s output.
struct BurstResult: Decodable {
    struct Rejected: Decodable, CustomStringConvertible {
        var apnsId: String
        var status: Int
        var reason: String?
        /// The `retry-after` header, when there was one.
        var retryAfter: String?
        /// The answer's `apns-id` header.
        var apnsIdEcho: String?
        var description: String { "\(apnsId) \(status) \(reason ?? "")" }
    }
    struct Unknown: Decodable, CustomStringConvertible {
        var apnsId: String
        var error: String
        var description: String { "\(apnsId) \(error)" }
    }
    struct BadEcho: Decodable, CustomStringConvertible {
        var sent: String
        var got: String?
        var description: String { "\(sent) -> \(got ?? "nil")" }
    }
    var token: String
    var topic: String
    var sent: [String]
    var ok: [String]
    var rejected: [Rejected]
    var unknown: [Unknown]
    var dispositions: [String: Int]
    var badEcho: [BadEcho]
    var httpVersions: [String: Int]
    var killedAfter: Int?
    /// With `--run`: the command started once `--run-after` pushes had their 200.
    var run: CommandRun?

    struct CommandRun: Decodable {
        /// The apns-ids answered 200 before the command started.
        var okBefore: [String]
        /// How many pushes had their 200 when it exited.
        var okWhenDone: Int
        var status: Int
        var stdout: String
        var stderr: String
    }
}

/// `python/drain_stream.py`'s output.
struct DrainResult: Decodable {
    var status: Int
    var contentType: String?
    var httpVersion: String
    var marker: String
    var markerStatus: Int
    var markerDisposition: String?
    var events: [StreamNotification]
    var acks: [[Int]]
    var finalAck: Int?
}
