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
        try await awaitDelivery(ledger, checkingEvery: .milliseconds(20))
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

    /// Waits until every accepted push has been received, or --drain-seconds.
    func awaitDelivery(_ ledger: BenchLedger, checkingEvery interval: Duration) async throws {
        let deadline = BenchLedger.now() + UInt64(options.drainSeconds) * 1_000_000_000
        while BenchLedger.now() < deadline {
            let (accepted, received) = ledger.state.withLockedValue { ($0.accepted, $0.receivedTotal - $0.duplicates) }
            if received >= accepted { break }
            try await Task.sleep(for: interval)
        }
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
    func openStream(_ device: Device, ledger: BenchLedger) async throws -> HTTP2ClientConnection {
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

    func send(_ devices: [Device], ledger: BenchLedger) async throws {
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
}
