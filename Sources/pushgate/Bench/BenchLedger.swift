import Foundation
import Histogram
import NIOConcurrencyHelpers
import Synchronization

/// Shared measurements, behind one lock: three short critical sections per push.
final class BenchLedger: Sendable {
    struct State {
        var sentAt: [UInt64]
        var received: [UInt8]
        var accepted = 0
        var refused = 0
        var receivedTotal = 0
        var duplicates = 0
        var acceptLatency = Histogram<UInt64>(highestTrackableValue: 60_000_000)
        var deliveryLatency = Histogram<UInt64>(highestTrackableValue: 60_000_000)
        var firstRefusal: String?
    }

    let state: NIOLockedValueBox<State>
    /// Event streams that ended before the run did: their devices' later pushes show as lost.
    let streamsLost = Atomic<Int>(0)
    let stopped = Atomic<Bool>(false)
    let nextIndex = Atomic<Int>(0)
    let acksSent = Atomic<Int>(0)

    init(pushes: Int) {
        state = NIOLockedValueBox(
            State(sentAt: Array(repeating: 0, count: pushes), received: Array(repeating: 0, count: pushes))
        )
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Pushes (by index) that reached a device at `now`: counted, duplicates noted, latency
    /// recorded for first arrivals.
    func received(_ indices: [Int], at now: UInt64) {
        guard !indices.isEmpty else { return }
        state.withLockedValue { state in
            for index in indices where index < state.received.count {
                state.receivedTotal += 1
                state.received[index] &+= 1
                if state.received[index] > 1 {
                    state.duplicates += 1
                } else if state.sentAt[index] > 0 {
                    _ = state.deliveryLatency.record((now - state.sentAt[index]) / 1000)
                }
            }
        }
    }
}
