#if canImport(Glibc)
import Glibc
#endif

/// Milliseconds since the UNIX epoch, from a clock the tests can set.
public protocol DeliveryClock: Sendable {
    func nowMillis() -> Int64
}

public struct SystemClock: DeliveryClock {
    public init() {}

    public func nowMillis() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
