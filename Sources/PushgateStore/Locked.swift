#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex, with a condition variable to wait for a change of it.
///
/// Not `Synchronization.Mutex`: on Linux that one locks with raw futex calls from an
/// uninstrumented library, so ThreadSanitizer reports every access under it as a race, which
/// would drown real reports from the rest of the gateway.
final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
        condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        // Deadlines are monotonic (`monotonicNanoseconds()`), immune to wall-clock steps.
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        let conditionResult = pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        precondition(conditionResult == 0, "pthread_cond_init failed: \(conditionResult)")
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Blocks while `condition` holds of the value, until `signal()` or the monotonic
    /// `deadline` (nanoseconds, as `monotonicNanoseconds()` gives them).
    func wait(until deadline: UInt64, while condition: (borrowing Value) -> Bool) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while condition(value), monotonicNanoseconds() < deadline {
            _ = pthread_cond_timedwait(self.condition, mutex, &time)
        }
    }

    /// Wakes a thread blocked in `wait`, to look at the value again.
    func signal() {
        pthread_cond_signal(condition)
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
}
