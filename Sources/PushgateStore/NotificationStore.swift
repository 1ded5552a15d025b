/// Durable state behind an interface, so that a PostgreSQL store shared by several gateway
/// nodes can replace SQLite later. `GroupCommitStore` implements it over a `StoreBackend`.
public protocol NotificationStore: Sendable {
    /// Applies `commands` atomically. `completion` runs (on a store thread) once they are on
    /// disk: committed and fsync'd (or, in a store whose durability is an interval, at once).
    /// Concurrent calls share one transaction and one fsync (group commit); `urgency` says how
    /// long this batch may wait for others to share it. Never blocks the caller.
    func commit(
        _ commands: [StoreCommand],
        urgency: CommitUrgency,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    )
    /// Reads everything; used once at start. Each device's `lastSeq` covers every seq it ever
    /// had, stored or gone: callers continue after it without looking at the notifications.
    func load() throws(StoreError) -> StoreSnapshot
    /// Whether commits succeed now: false while the storage refuses them (disk full, I/O error).
    var health: StoreHealth { get }
    /// Finishes what was submitted, then closes. Later commits fail with `.closed`.
    func close() async
}

extension NotificationStore {
    public func commit(_ commands: [StoreCommand], completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        commit(commands, urgency: .prompt, completion: completion)
    }

    public func commit(_ commands: [StoreCommand]) async throws(StoreError) {
        let result = await withCheckedContinuation { continuation in
            commit(commands) { continuation.resume(returning: $0) }
        }
        try result.get()
    }
}
