import NIOCore
import PushgateDeviceClient
import PushgateTransport

/// A bench device's event stream, on its connection's event loop: records each push's arrival
/// and acks. Acks run beside the reads, so that receipt is timed when an event arrives, not
/// after the previous ack's answer; what arrives while an ack is in flight (or waits out
/// --ack-delay) shares the next cumulative ack. Everything runs in the connection's callbacks,
/// with no task per event, so that the load generator costs little next to the gateway.
final class BenchDevice {
    private let connection: HTTP2ClientConnection
    private let requests: DeviceRequests
    private let ackDelay: Int
    private let ledger: BenchLedger
    private var parser = EventStreamParser()
    private var newest: UInt64 = 0
    private var acked: UInt64 = 0
    /// An ack is in flight or waiting out the delay.
    private var acking = false
    /// An ack failed (the connection is going): no more are sent.
    private var failed = false

    init(connection: HTTP2ClientConnection, requests: DeviceRequests, ackDelay: Int, ledger: BenchLedger) {
        self.connection = connection
        self.requests = requests
        self.ackDelay = ackDelay
        self.ledger = ledger
    }

    func received(_ chunk: ByteBuffer) {
        var indices: [Int] = []
        var newest: UInt64?
        for event in parser.feed(chunk) where event.type == "notification" {
            if let seq = event.id.flatMap(UInt64.init) { newest = seq }
            indices += BenchRun.pushIndices(in: event.data)
        }
        ledger.received(indices, at: BenchLedger.now())
        if let newest {
            self.newest = max(self.newest, newest)
            ackIfIdle()
        }
    }

    private func ackIfIdle() {
        guard !acking, !failed, newest > acked, !ledger.stopped.load(ordering: .relaxed) else { return }
        acking = true
        if ackDelay > 0 {
            connection.channel.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(ackDelay))) {
                self.sendAck()
            }
        } else {
            sendAck()
        }
    }

    private func sendAck() {
        guard !ledger.stopped.load(ordering: .relaxed) else {
            acking = false
            return
        }
        let upTo = newest
        ledger.acksSent.add(1, ordering: .relaxed)
        connection.submit(requests.ack(upTo: upTo)).assumeIsolated().whenComplete { result in
            self.acking = false
            guard case .success = result else {
                self.failed = true
                return
            }
            self.acked = upTo
            self.ackIfIdle()
        }
    }
}
