import NIOCore
import PushgateDelivery
import PushgateModel
import PushgateTransport

/// A device's event stream over its HTTP response: server-sent events (PRODUCT.md section 3),
/// written on the response's connection loop whichever shard loop delivers.
struct EventStreamSink: EventSink {
    let writer: ResponseBodyWriter

    func estimatedSize(of notification: AcceptedPush) -> Int {
        EventStreamEncoder.estimatedSize(of: notification)
    }

    func encode(
        _ notification: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String?,
        fetchWindowSeconds: Int?,
        into events: inout ByteBuffer
    ) {
        EventStreamEncoder.writeNotification(
            notification,
            delivery: delivery,
            carrier: carrier,
            fetchWindowSeconds: fetchWindowSeconds,
            into: &events
        )
    }

    func send(_ events: ByteBuffer) {
        // Delivery's unacked window keeps the stream's queue under its high watermark; if it is
        // full anyway, the stream is reset so that the agent reconnects and gets everything again.
        let writer = self.writer
        if writer.eventLoop.inEventLoop {
            if writer.write(events) == .full { writer.cancel() }
        } else {
            writer.eventLoop.execute {
                if writer.write(events) == .full { writer.cancel() }
            }
        }
    }

    func heartbeat() {
        send(EventStreamEncoder.heartbeat)
    }

    func finish() {
        let writer = self.writer
        writer.eventLoop.execute { writer.finish() }
    }
}
