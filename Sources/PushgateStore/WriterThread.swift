#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's writer runs on a thread of its own, not on a dispatch queue: between commits it
/// sleeps on the store's condition variable, so that an arrival wakes it directly (no worker
/// requested from a pool), and it can be scheduled as the throughput work it is.
enum WriterThread {
    /// Starts a detached thread named `name` running `body`. On Linux the thread is
    /// `SCHED_BATCH`: when an event loop wakes it with a batch, it does not preempt that loop,
    /// which goes on with its tick and the writer runs when the loop sleeps (or on another
    /// core). A preemption there cost every push an involuntary context switch and the loop
    /// its warm caches, for no gain: the batch waits for an fsync anyway.
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        final class Start: @unchecked Sendable {
            let name: String
            let body: @Sendable () -> Void
            init(name: String, body: @escaping @Sendable () -> Void) {
                self.name = name
                self.body = body
            }
        }
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        #if canImport(Darwin)
        var thread: pthread_t?
        #else
        var thread = pthread_t()
        #endif
        let result = pthread_create(
            &thread,
            &attributes,
            { argument in
                #if canImport(Darwin)
                let start = Unmanaged<Start>.fromOpaque(argument).takeRetainedValue()
                _ = pthread_setname_np(start.name)
                #else
                let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
                #endif
                #if os(Linux)
                nameThisThread(start.name)
                // Allowed to any user; a failure leaves the thread as it was, which only costs
                // the wake-ups described above.
                var parameters = sched_param()
                parameters.sched_priority = 0
                _ = sched_setscheduler(0, schedBatch, &parameters)
                #endif
                start.body()
                return nil
            },
            start
        )
        precondition(result == 0, "could not start the store's writer thread: pthread_create returned \(result)")
    }
}

#if os(Linux)
/// SCHED_BATCH from <sched.h>, which Swift does not see without _GNU_SOURCE; part of the
/// kernel's ABI.
private let schedBatch: Int32 = 3

/// The name shown by ps, top and perf (15 bytes at most). Through /proc, because
/// pthread_setname_np is not visible to Swift without _GNU_SOURCE.
private func nameThisThread(_ name: String) {
    let descriptor = open("/proc/thread-self/comm", O_WRONLY)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
}
#endif
