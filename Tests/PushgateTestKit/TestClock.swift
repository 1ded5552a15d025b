import PushgateDelivery
import Synchronization

/// The clock tests set by hand: delivery (and through it the scheduler) and provider token checks
/// read time from it.
public final class TestClock: DeliveryClock {
    private let millis: Atomic<Int64>

    public init(_ millis: Int64) { self.millis = Atomic(millis) }

    public func set(_ value: Int64) { millis.store(value, ordering: .sequentiallyConsistent) }

    public func advance(by delta: Int64) { millis.add(delta, ordering: .sequentiallyConsistent) }

    public func nowMillis() -> Int64 { millis.load(ordering: .sequentiallyConsistent) }
}
