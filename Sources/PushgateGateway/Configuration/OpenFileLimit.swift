#if canImport(Glibc)
import Glibc
#endif

/// The process's open-file limit, which bounds the connections the gateway can hold: each is a
/// file descriptor, and a gateway out of them can no longer accept, nor open its store's files.
enum OpenFileLimit {
    /// Descriptors kept for what is not a connection: the store (database, WAL, shared memory,
    /// lock), listeners, the event loops' epoll and event descriptors, a backup reading beside,
    /// logs.
    static let reserved = 256

    /// Raises the soft limit to the hard one, as Go's runtime does and nginx's
    /// `worker_rlimit_nofile` lets one: a shell's soft limit of 1,024 would hold a gateway to a
    /// few hundred devices while the hard limit allows far more. Returns the limit before and
    /// after; nil when it cannot be read.
    static func raiseToHardLimit() -> (before: Int, after: Int)? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let before = Int(clamping: limit.rlim_cur)
        guard limit.rlim_cur < limit.rlim_max else { return (before, before) }
        limit.rlim_cur = limit.rlim_max
        guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (before, before) }
        return (before, Int(clamping: limit.rlim_max))
    }

    /// The soft limit now.
    static func current() -> Int? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// Connections that leave `reserved` descriptors free (half of a limit too small for that).
    static func connectionsAllowed(limit: Int) -> Int {
        max(limit - reserved, limit / 2)
    }
}
