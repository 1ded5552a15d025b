import NIOConcurrencyHelpers
import NIOCore
import PushgateDelivery
import PushgateModel

/// An event stream that records what delivery gives it, for tests of delivery without sockets.
/// Each event is encoded as one line, `seq delivery carrier`, so that delivery's unacked window
/// counts real bytes.
public final class RecordingSink: EventSink {
    public struct Event: Sendable, Equatable {
        public var notification: AcceptedPush
        public var delivery: DeliveryKind
        public var carrier: String?
        public var fetchWindowSeconds: Int?

        public var seq: UInt64 { notification.seq ?? 0 }
        public var apnsID: String { notification.push.apnsID }
    }

    private struct State {
        var encoded: [Event] = []
        /// Events in batches that were sent.
        var sent: [Event] = []
        var finished = false
        var heartbeats = 0
        var waiters: [(count: Int, continuation: CheckedContinuation<[Event], Never>)] = []
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    public var isFinished: Bool { state.withLockedValue { $0.finished } }

    /// Returns once `count` events have been sent in all; never times out by itself (the test's
    /// time limit does).
    public func events(count: Int) async -> [Event] {
        await withCheckedContinuation { continuation in
            let ready = state.withLockedValue { state -> [Event]? in
                if state.sent.count >= count { return state.sent }
                state.waiters.append((count, continuation))
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    public func estimatedSize(of notification: AcceptedPush) -> Int { 64 }

    public func encode(
        _ notification: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String?,
        fetchWindowSeconds: Int?,
        into events: inout ByteBuffer
    ) {
        events.writeString("\(notification.seq ?? 0) \(delivery.rawValue) \(carrier ?? "-")\n")
        let event = Event(
            notification: notification,
            delivery: delivery,
            carrier: carrier,
            fetchWindowSeconds: fetchWindowSeconds
        )
        state.withLockedValue { $0.encoded.append(event) }
    }

    public func send(_ events: ByteBuffer) {
        let ready = state.withLockedValue { state -> [(CheckedContinuation<[Event], Never>, [Event])] in
            let lines = events.readableBytesView.filter { $0 == UInt8(ascii: "\n") }.count
            state.sent.append(contentsOf: state.encoded.prefix(lines))
            state.encoded.removeFirst(min(lines, state.encoded.count))
            let due = state.waiters.filter { $0.count <= state.sent.count }
            state.waiters.removeAll { $0.count <= state.sent.count }
            return due.map { ($0.continuation, state.sent) }
        }
        for (continuation, events) in ready { continuation.resume(returning: events) }
    }

    /// Heartbeats written so far (`DeliveryCore.heartbeatTick` runs the timer's work).
    public var heartbeats: Int { state.withLockedValue { $0.heartbeats } }

    public func heartbeat() { state.withLockedValue { $0.heartbeats += 1 } }

    public func finish() { state.withLockedValue { $0.finished = true } }
}
