import NIOCore
import PushgateModel

/// A device's open event stream as delivery sees it. The device API implements it over the
/// stream's HTTP response and owns the wire format (server-sent events); tests record what it is
/// given. Delivery decides what goes out and when; the sink only encodes and sends.
///
/// Called on the device's shard loop; an implementation whose connection lives on another loop
/// hops there itself. Delivery calls `finish` when it ends the stream; a stream that its
/// connection ended is reported the other way, through `DeliveryCore.closeStream`.
public protocol EventSink: Sendable {
    /// Room to reserve in a batch for one notification's event, so that a batch rarely grows.
    func estimatedSize(of notification: AcceptedPush) -> Int

    /// Appends the event of `notification` (which has its seq) to `events`. The bytes appended
    /// count against the device's window of sent, unacknowledged events. `fetchWindowSeconds`:
    /// for a silent push, the time its app has to report its fetch result.
    func encode(
        _ notification: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String?,
        fetchWindowSeconds: Int?,
        into events: inout ByteBuffer
    )

    /// Sends a batch that `encode` filled.
    func send(_ events: ByteBuffer)

    /// Tells the agent and any proxy in between that the stream is alive: it would otherwise be
    /// silent for `DeliveryConfiguration.heartbeatIntervalMillis` by the next tick.
    func heartbeat()

    /// Ends the stream cleanly: a newer stream replaced it, or the device was deleted.
    func finish()
}
