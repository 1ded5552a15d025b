import Foundation
import NIOCore
import NIOHTTP1
import PushgateDeviceClient
import PushgateTransport
import Synchronization

struct BenchRun: Sendable {
    let options: BenchCommand
    /// A device's connection to a gateway.
    let connect: @Sendable (ServerURL) async throws -> HTTP2ClientConnection
    /// A provider's connection to a gateway: with its client certificate, when one was given.
    let connectProvider: @Sendable (ServerURL) async throws -> HTTP2ClientConnection
    /// The providers' `authorization` header value, when the gateway authenticates providers.
    let authorization: String?
    let registrationSecret: String?

    /// A connection for many concurrent requests. A gateway that authenticates providers allows
    /// one stream per new connection until it proves who it is: with the server's SETTINGS in
    /// hand, the client queues the other requests instead of racing them (and being refused).
    private func connectSettled(
        _ connect: @Sendable (ServerURL) async throws -> HTTP2ClientConnection,
        to server: ServerURL
    ) async throws -> HTTP2ClientConnection {
        let connection = try await connect(server)
        try await connection.waitForServerSettings()
        return connection
    }

    struct Device: Sendable {
        /// The gateway its stream opens on.
        var server: ServerURL
        var requests: DeviceRequests
        var token: String
    }

    /// Where devices open their streams: device `i` on the `i`-th in turn.
    var deviceServers: [ServerURL] { options.client.servers.isEmpty ? [options.client.server] : options.client.servers }
    /// Where providers send: provider `j` to the `j`-th in turn.
    var providerServers: [ServerURL] { options.providerServers.isEmpty ? deviceServers : options.providerServers }

    func run() async throws {
        let ledger = BenchLedger(pushes: options.pushes)
        log("creating \(counted(options.devices, "device"))")
        let devices = try await createDevices()
        if options.backlog {
            try await reconnectStorm(devices, ledger: ledger)
            return
        }
        log("opening \(counted(devices.count, "event stream"))")
        let streams = try await devices.concurrentMap(width: options.concurrentConnects) { device in
            try await openStream(device, ledger: ledger)
        }
        if options.idleSeconds > 0 {
            log("\(counted(devices.count, "stream")) open and idle for \(options.idleSeconds) s")
            try await Task.sleep(for: .seconds(options.idleSeconds))
        }
        log(
            "sending \(counted(options.pushes, "push", plural: "pushes")) over \(counted(options.providers, "connection"))"
                + (options.rate.map { " at \($0)/s" } ?? " flat out")
        )
        let cpuBefore = try options.serverPID.map { pid throws(ProcessCPU.Unreadable) in try ProcessCPU.sample(pid: pid)
        }
        let started = BenchLedger.now()
        let progress = Task { await reportProgress(ledger, started: started) }
        try await send(devices, ledger: ledger)
        let sendSeconds = Double(BenchLedger.now() - started) / 1e9
        if options.silentPercent > 0 { try await wakeAll(devices, ledger: ledger) }
        let deadline = BenchLedger.now() + UInt64(options.drainSeconds) * 1_000_000_000
        while BenchLedger.now() < deadline {
            let (accepted, received) = ledger.state.withLockedValue { ($0.accepted, $0.receivedTotal - $0.duplicates) }
            if received >= accepted { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        var serverCPU: ProcessCPU?
        if let pid = options.serverPID, let cpuBefore {
            serverCPU = try ProcessCPU.sample(pid: pid).since(cpuBefore)
        }
        progress.cancel()
        ledger.stopped.store(true, ordering: .relaxed)
        report(ledger, sendSeconds: sendSeconds, serverCPU: serverCPU)
        await withTaskGroup(of: Void.self) { group in
            for connection in streams { group.addTask { await connection.close() } }
        }
    }

    /// The pushes go to devices with no stream open, so they are stored; after `--then-run`
    /// (a gateway restart, say) every device opens its stream and gets its backlog.
    private func reconnectStorm(_ devices: [Device], ledger: BenchLedger) async throws {
        log(
            "sending \(counted(options.pushes, "push", plural: "pushes")) to offline devices over \(counted(options.providers, "connection"))"
        )
        let started = BenchLedger.now()
        try await send(devices, ledger: ledger)
        let sendSeconds = Double(BenchLedger.now() - started) / 1e9
        if let command = options.thenRun {
            log("running \(command)")
            let status = Self.runShell(command)
            guard status == 0 else {
                throw ClientFailure(description: "--then-run ended with status \(status): \(command)")
            }
        }
        // Read after the command: a restart has a new process id.
        let serverPID = try options.serverPIDFile.map { path in try Self.processID(in: path) }
        log("opening \(counted(devices.count, "event stream")), \(options.concurrentConnects) at a time")
        let cpuBefore = try serverPID.map { pid throws(ProcessCPU.Unreadable) in try ProcessCPU.sample(pid: pid) }
        let stormStarted = BenchLedger.now()
        let streams = try await devices.concurrentMap(width: options.concurrentConnects) { device in
            try await openStream(device, ledger: ledger)
        }
        let openSeconds = Double(BenchLedger.now() - stormStarted) / 1e9
        let deadline = BenchLedger.now() + UInt64(options.drainSeconds) * 1_000_000_000
        while BenchLedger.now() < deadline {
            let (accepted, received) = ledger.state.withLockedValue { ($0.accepted, $0.receivedTotal - $0.duplicates) }
            if received >= accepted { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        let deliveredSeconds = Double(BenchLedger.now() - stormStarted) / 1e9
        // Before the streams close: closing them is not the storm's cost.
        var stormCPU: ProcessCPU?
        if let serverPID, let cpuBefore { stormCPU = try ProcessCPU.sample(pid: serverPID).since(cpuBefore) }
        ledger.stopped.store(true, ordering: .relaxed)
        report(
            ledger,
            sendSeconds: sendSeconds,
            serverCPU: nil,
            storm: StormFigures(open: openSeconds, delivered: deliveredSeconds, serverCPU: stormCPU)
        )
        await withTaskGroup(of: Void.self) { group in
            for connection in streams { group.addTask { await connection.close() } }
        }
    }

    /// The process id a --server-pid-file holds.
    private static func processID(in path: String) throws -> Int32 {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 else {
            throw ClientFailure(description: "--server-pid-file \(path) does not hold a process id")
        }
        return pid
    }

    /// `sh -c command`, waited for with waitpid: Foundation's `Process.waitUntilExit` never
    /// returned here for a command that outlived its start (it waits on a run loop the bench's
    /// threads do not run). The exit status, or -1 when it could not start or ended by a signal.
    private static func runShell(_ command: String) -> Int32 {
        let argv: [UnsafeMutablePointer<CChar>?] =
            ["/bin/sh", "-c", command].map { (argument: String) in strdup(argument) } + [nil]
        defer { for arg in argv { free(arg) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { return -1 }
        }
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : -1
    }

    private func createDevices() async throws -> [Device] {
        let servers = deviceServers
        let connections = try await servers.asyncMap { server in
            try await (0..<4).asyncMap { _ in try await connectSettled(connect, to: server) }
        }
        let devices = try await Array(0..<options.devices).concurrentMap(width: 64) { index in
            let node = index % servers.count
            let onNode = connections[node]
            return try await createDevice(on: onNode[(index / servers.count) % onNode.count], server: servers[node])
        }
        for connection in connections.joined() { await connection.close() }
        return devices
    }

    private func createDevice(on connection: HTTP2ClientConnection, server: ServerURL) async throws -> Device {
        let identity = try await DeviceSetup.createDevice(
            on: connection,
            server: server,
            registrationSecret: registrationSecret
        )
        let requests = DeviceRequests(server: server, identity: identity)
        return Device(
            server: server,
            requests: requests,
            token: try await DeviceSetup.register(options.topic, requests, on: connection)
        )
    }

    /// One device's connection and event stream, acking on its own from then on (see
    /// `BenchDevice`); returns once the stream is open.
    private func openStream(_ device: Device, ledger: BenchLedger) async throws -> HTTP2ClientConnection {
        let connection = try await connect(device.server)
        let eventLoop = connection.channel.eventLoop
        let streamRequest = device.requests.events()
        let ackDelay = options.ackDelay
        let head: HTTPClientStreamedHead
        do {
            head = try await eventLoop.flatSubmit {
                let receiver = NIOLoopBound(
                    BenchDevice(connection: connection, requests: device.requests, ackDelay: ackDelay, ledger: ledger),
                    eventLoop: eventLoop
                )
                return connection.submitStreaming(streamRequest) { chunk in receiver.value.received(chunk) }
            }.get()
        } catch {
            await connection.close()
            throw error
        }
        guard head.status == 200 else {
            await connection.close()
            throw ClientFailure(description: "event stream refused: \(head.status)")
        }
        head.ended.whenComplete { _ in
            if !ledger.stopped.load(ordering: .relaxed) { ledger.streamsLost.add(1, ordering: .relaxed) }
        }
        return connection
    }

    /// The bench's apns-ids carry the push index in their last 12 hex digits.
    static func apnsID(for index: Int) -> String {
        let hex = String(index, radix: 16)
        return "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - hex.count) + hex
    }

    /// The push indices of every bench apns-id in `text` (an event's data, or a keep-alive
    /// response with many notifications).
    static func pushIndices(in text: String) -> [Int] {
        var text = text
        return text.withUTF8 { bytes in
            let marker = apnsIDMarker
            var indices: [Int] = []
            var start = 0
            scan: while start + marker.count + 12 <= bytes.count {
                defer { start += 1 }
                guard bytes[start] == marker[0],
                    UnsafeBufferPointer(rebasing: bytes[start..<start + marker.count]).elementsEqual(marker)
                else { continue }
                var index = 0
                for byte in bytes[(start + marker.count)..<(start + marker.count + 12)] {
                    guard let digit = hexDigit(byte) else { continue scan }
                    index = index << 4 | digit
                }
                indices.append(index)
            }
            return indices
        }
    }

    private static let apnsIDMarker = Array("\"apnsId\":\"00000000-0000-4000-8000-".utf8)

    private static func hexDigit(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a") + 10)
        default: nil
        }
    }

    private func send(_ devices: [Device], ledger: BenchLedger) async throws {
        let padding = String(repeating: "x", count: max(0, options.payloadBytes - 40))
        let body = ByteBuffer(string: "{\"aps\":{\"alert\":\"bench\"},\"pad\":\"\(padding)\"}")
        // Silent pushes are the same size, so that a mix compares like with like.
        let silentBody = ByteBuffer(
            string: "{\"aps\":{\"content-available\":1},\"pad\":\"\(String(padding.dropLast(6)))\"}"
        )
        var alertHeaders = HTTPHeaders()
        alertHeaders.add(name: "apns-topic", value: options.topic)
        alertHeaders.add(name: "apns-push-type", value: "alert")
        var silentHeaders = HTTPHeaders()
        silentHeaders.add(name: "apns-topic", value: options.topic)
        silentHeaders.add(name: "apns-push-type", value: "background")
        silentHeaders.add(name: "apns-priority", value: "5")
        if let authorization {
            alertHeaders.add(name: "authorization", value: authorization)
            silentHeaders.add(name: "authorization", value: authorization)
        }
        let paths = devices.map { "/3/device/\($0.token)" }
        // Plain values, not options read per push: the bench must cost less than what it measures.
        let (deviceCount, silentPercent, server) = (options.devices, options.silentPercent, options.client.server)
        let request: @Sendable (Int) -> HTTPClientRequest = { [alertHeaders, silentHeaders] index in
            // Spread evenly over each device's pushes (its n-th push is round n): a device gets
            // silent and alert pushes interleaved, as an app's mix would arrive.
            let round = index / deviceCount
            let silent = (round + 1) * silentPercent / 100 > round * silentPercent / 100
            var headers = silent ? silentHeaders : alertHeaders
            headers.add(name: "apns-id", value: BenchRun.apnsID(for: index))
            return server.request(
                "POST",
                paths[index % paths.count],
                headers: headers,
                body: silent ? silentBody : body
            )
        }
        let started = BenchLedger.now()
        var connections: [HTTP2ClientConnection] = []
        let servers = providerServers
        for index in 0..<options.providers {
            connections.append(try await connectSettled(connectProvider, to: servers[index % servers.count]))
        }
        let plan = ProviderPump.Plan(
            pushes: options.pushes,
            inFlight: options.inFlight,
            rate: options.rate,
            started: started,
            request: request
        )
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for connection in connections {
                    let eventLoop = connection.channel.eventLoop
                    group.addTask { [connections] in
                        do {
                            try await eventLoop.flatSubmit {
                                ProviderPump(connection: connection, plan: plan, ledger: ledger).start()
                            }.get()
                        } catch {
                            // The other pumps wait on futures, which ignore task cancellation:
                            // closing their connections fails their requests and ends them now.
                            for other in connections { other.channel.close(promise: nil) }
                            throw error
                        }
                    }
                }
                try await group.waitForAll()
            }
        } catch {
            for connection in connections { await connection.close() }
            throw error
        }
        for connection in connections { await connection.close() }
    }

    /// A keep-alive per device (a wake event): what the scheduler still holds comes back in the
    /// responses and counts as received.
    private func wakeAll(_ devices: [Device], ledger: BenchLedger) async throws {
        let connections = try await (0..<4).asyncMap { _ in try await connectSettled(connect, to: deviceServers[0]) }
        defer { for connection in connections { Task { await connection.close() } } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, device) in devices.enumerated() {
                let connection = connections[index % connections.count]
                group.addTask {
                    let response = try await connection.send(device.requests.keepalive)
                    let now = BenchLedger.now()
                    ledger.received(BenchRun.pushIndices(in: String(buffer: response.body)), at: now)
                }
            }
            try await group.waitForAll()
        }
    }

    private func reportProgress(_ ledger: BenchLedger, started: UInt64) async {
        var last = (accepted: 0, received: 0)
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            let (accepted, received, refused) = ledger.state.withLockedValue {
                ($0.accepted, $0.receivedTotal, $0.refused)
            }
            let seconds = Double(BenchLedger.now() - started) / 1e9
            log(
                String(
                    format: "%6.1fs accepted %d (%d/s) received %d (%d/s) refused %d",
                    seconds,
                    accepted,
                    accepted - last.accepted,
                    received,
                    received - last.received,
                    refused
                )
            )
            last = (accepted, received)
        }
    }

    /// With --backlog: seconds from the first stream opened to the last open, and to the last
    /// stored push delivered; and what the gateway used over that, when --server-pid-file was given.
    private struct StormFigures {
        var open: Double
        var delivered: Double
        var serverCPU: ProcessCPU?
    }

    /// `serverCPU`: what the gateway used over the pushes, when --server-pid was given.
    private func report(
        _ ledger: BenchLedger,
        sendSeconds: Double,
        serverCPU: ProcessCPU?,
        storm: StormFigures? = nil
    ) {
        let state = ledger.state.withLockedValue { $0 }
        let acks = ledger.acksSent.load(ordering: .relaxed)
        let streamsLost = ledger.streamsLost.load(ordering: .relaxed)
        var lost = 0
        for index in 0..<state.sentAt.count where state.sentAt[index] > 0 && state.received[index] == 0 { lost += 1 }
        lost -= state.refused
        let ms = { (value: UInt64) in Double(value) / 1000 }
        let acceptRate = Double(state.accepted) / sendSeconds
        let delivered = state.receivedTotal - state.duplicates
        // The server's CPU time per hundred thousand delivered pushes, all threads and the
        // event loops alone, so that runs of different lengths compare.
        let per100k = { (seconds: Double) in seconds * 100_000 / Double(max(delivered, 1)) }
        let cpu = serverCPU.map { (per100k($0.totalSeconds), per100k($0.eventLoopSeconds)) }
        var rows: [(String, String)] = [
            ("devices", "\(options.devices)"),
            ("pushes sent", "\(options.pushes)"),
            ("accepted (200)", "\(state.accepted)"),
            ("refused", "\(state.refused)" + (state.firstRefusal.map { " (first: \($0.prefix(120)))" } ?? "")),
            ("accepted per second", String(format: "%.0f", acceptRate)),
            (
                "accept latency p50 / p99 / max ms",
                String(
                    format: "%.2f / %.2f / %.2f",
                    ms(state.acceptLatency.valueAtPercentile(50)),
                    ms(state.acceptLatency.valueAtPercentile(99)),
                    ms(state.acceptLatency.max)
                )
            ),
            (
                "delivery latency p50 / p99 / p99.9 / max ms",
                String(
                    format: "%.2f / %.2f / %.2f / %.2f",
                    ms(state.deliveryLatency.valueAtPercentile(50)),
                    ms(state.deliveryLatency.valueAtPercentile(99)),
                    ms(state.deliveryLatency.valueAtPercentile(99.9)),
                    ms(state.deliveryLatency.max)
                )
            ),
            ("received", "\(delivered)"),
            ("lost (accepted, never received)", "\(max(0, lost))"),
            ("duplicated", "\(state.duplicates)"),
            ("acks sent by the devices", "\(acks)"),
            ("event streams lost during the run", "\(streamsLost)"),
        ]
        if let storm {
            rows.append(("every stream open after (s)", String(format: "%.3f", storm.open)))
            rows.append(("every stored push delivered after (s)", String(format: "%.3f", storm.delivered)))
            if let used = storm.serverCPU {
                rows.append(
                    (
                        "server CPU over the storm",
                        String(
                            format: "%.2f s, %.0f us per connection",
                            used.totalSeconds,
                            used.totalSeconds * 1e6 / Double(max(options.devices, 1))
                        )
                    )
                )
            }
        }
        if let (total, loops) = cpu {
            rows.append(
                (
                    "server CPU-s per 100k delivered",
                    String(format: "%.2f (event loops %.2f, other threads %.2f)", total, loops, total - loops)
                )
            )
        }
        let width = rows.map(\.0.count).max().map { $0 + 2 } ?? 0
        for (name, value) in rows { print(name.padding(toLength: width, withPad: " ", startingAt: 0) + value) }
        let cpuJSON =
            cpu.map { String(format: ",\"serverCPUPer100k\":%.3f,\"serverLoopCPUPer100k\":%.3f", $0.0, $0.1) }
            ?? ",\"serverCPUPer100k\":null,\"serverLoopCPUPer100k\":null"
        let json =
            String(
                format:
                    "{\"devices\":%d,\"pushes\":%d,\"accepted\":%d,\"refused\":%d,\"acceptedPerSecond\":%.0f,\"acceptP50Ms\":%.3f,\"acceptP99Ms\":%.3f,\"deliveryP50Ms\":%.3f,\"deliveryP99Ms\":%.3f,\"deliveryP999Ms\":%.3f,\"deliveryMaxMs\":%.3f,\"lost\":%d,\"duplicated\":%d,\"acks\":%d,\"streamsLost\":%d",
                options.devices,
                options.pushes,
                state.accepted,
                state.refused,
                acceptRate,
                ms(state.acceptLatency.valueAtPercentile(50)),
                ms(state.acceptLatency.valueAtPercentile(99)),
                ms(state.deliveryLatency.valueAtPercentile(50)),
                ms(state.deliveryLatency.valueAtPercentile(99)),
                ms(state.deliveryLatency.valueAtPercentile(99.9)),
                ms(state.deliveryLatency.max),
                max(0, lost),
                state.duplicates,
                acks,
                streamsLost
            ) + cpuJSON
            + (storm.map {
                String(format: ",\"streamsOpenSeconds\":%.3f,\"backlogDeliveredSeconds\":%.3f", $0.open, $0.delivered)
                    + ($0.serverCPU.map { String(format: ",\"stormServerCPUSeconds\":%.3f", $0.totalSeconds) }
                        ?? ",\"stormServerCPUSeconds\":null")
            } ?? "") + "}"
        print(json)
    }

    private func log(_ message: String) {
        FileHandle.standardError.write(Data("pushgate bench: \(message)\n".utf8))
    }
}
