import Foundation

/// What a run prints: progress each second on standard error, then a table and a JSON line.
extension BenchRun {
    func reportProgress(_ ledger: BenchLedger, started: UInt64) async {
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
    struct StormFigures {
        var open: Double
        var delivered: Double
        var serverCPU: ProcessCPU?
    }

    /// `serverCPU`: what the gateway used over the pushes, when --server-pid was given.
    func report(
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

    func log(_ message: String) {
        FileHandle.standardError.write(Data("pushgate bench: \(message)\n".utf8))
    }
}
