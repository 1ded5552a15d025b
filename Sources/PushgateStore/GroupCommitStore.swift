import Dispatch
import Logging
import Synchronization

/// `NotificationStore` over any `StoreBackend`: concurrent commits grouped into one transaction
/// (one fsync for many batches), so that thousands of pushes per second each wait for a
/// durable commit without as many fsyncs.
///
/// Threads:
/// - callers of `commit` only take a short lock to append their batch to the pending queue;
/// - the writer is a thread of its own (`WriterThread`), asleep on the store's condition
///   variable while nothing is pending: a drain loop that takes what is pending (up to
///   `maxGroupCommands` commands), has the backend apply it in one transaction, and repeats
///   while more is pending. Batches commit in the order they were submitted. When the writer
///   would commit only a few batches, the `CommitPacer` may have it wait a little (blocked on
///   a condition variable, so no timer thread is involved) for others to share the fsync; an
///   arrival that makes the wait pointless wakes it;
/// - completions of committed batches run on the writer, in submission order, right after their
///   transaction is durable. They must be quick (resume a continuation, hop to an event loop)
///   and must not wait for the store; refusals (`.overloaded`, `.closed`) arrive on a separate
///   queue, never on the caller's stack.
///
/// A failing command fails its batch only (the backend undoes that batch alone); a failing
/// transaction fails every batch of its group.
public final class GroupCommitStore<Backend: StoreBackend>: NotificationStore {
    /// The database. The store calls it from its writer only; others may read what it exposes
    /// for that purpose (a path, a test hook).
    public let backend: Backend
    /// Batches are refused with `.overloaded` once this many commands wait for the writer.
    public let maxPendingCommands: Int
    /// Commands in one transaction at most (a single larger batch still goes in whole): a
    /// backlog is cut into groups of about this size, so that the first batch of a burst waits
    /// for one bounded transaction, not for the whole burst.
    public let maxGroupCommands: Int
    /// When a 200 may be sent: after the fsync, or at once with commits at an interval.
    public let durability: Durability
    /// Set by each transaction's outcome, before its batches' completions run.
    public let health: StoreHealth

    let logger: Logger
    let completionQueue = DispatchQueue(label: "pushgate.store.completions")
    let state: Locked<WriterState>

    let transactionsCounter = Atomic<UInt64>(0)
    let commandsCounter = Atomic<UInt64>(0)
    let batchesCounter = Atomic<UInt64>(0)
    let failedBatchesCounter = Atomic<UInt64>(0)
    let overloadedBatchesCounter = Atomic<UInt64>(0)
    let lostBatchesCounter = Atomic<UInt64>(0)
    let lastTransactionNanos = Atomic<UInt64>(0)
    let maxTransactionNanos = Atomic<UInt64>(0)
    let totalTransactionNanos = Atomic<UInt64>(0)
    /// When the writer last heard from the database (a transaction, failed or not, or a probe).
    let lastActivityNanos = Atomic<UInt64>(0)
    let metrics: StoreMetrics

    public init(
        backend: Backend,
        maxPendingCommands: Int = 100_000,
        maxGroupCommands: Int = 4096,
        pacing: CommitPacing = .default,
        durability: Durability = .fsync,
        metrics: StoreMetrics = .none,
        logger: Logger
    ) {
        precondition(maxPendingCommands > 0, "maxPendingCommands must be positive")
        precondition(maxGroupCommands > 0, "maxGroupCommands must be positive")
        self.backend = backend
        self.metrics = metrics
        self.maxPendingCommands = maxPendingCommands
        self.maxGroupCommands = maxGroupCommands
        self.durability = durability
        self.logger = logger
        health = StoreHealth(logger: logger)
        // In interval mode nobody waits for a commit: every batch waits up to the interval.
        let effective: CommitPacing
        if case .interval(let nanoseconds) = durability {
            effective = CommitPacing(lingerNanos: 0, deferNanos: nanoseconds)
        } else {
            effective = pacing
        }
        state = Locked(WriterState(pacer: CommitPacer(pacing: effective)))
        let state = self.state
        let probeInterval = backend.probeInterval.map(nanoseconds)
        // The thread holds the store weakly: a store dropped without close() ends it (deinit).
        WriterThread.start(name: "pushgate-writer") { [weak self] in
            Self.runWriter(state: state, probeInterval: probeInterval) { self }
        }
    }

    deinit {
        state.withLock { $0.stopped = true }
        state.signal()
    }

    // MARK: - NotificationStore

    public func commit(
        _ commands: [StoreCommand],
        urgency: CommitUrgency,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let max = maxPendingCommands
        let now = monotonicNanoseconds()
        let interval = durability != .fsync
        // Interval mode answers at once: accepting more while nothing commits would stretch
        // the loss window from one interval to however long the storage stays broken. (With
        // fsync every push still goes to the writer: its commit is what finds the storage back.)
        if interval, !health.canCommit, let failure = health.failure {
            health.recordRefusal()
            completionQueue.async { completion(.failure(failure)) }
            return
        }
        let outcome: SubmitOutcome = state.withLock { s in
            if s.closing { return .closed }
            if commands.count > max - s.pendingCommands { return .overloaded }
            let batch = Batch(
                commands: commands,
                completion: interval ? nil : completion,
                arrivedAt: now,
                prompt: urgency == .prompt && !interval
            )
            return s.enqueue(batch, maxGroupCommands: maxGroupCommands)
        }
        switch outcome {
        case .queued:
            break
        case .startWriter:
            startWriter()
        case .wake:
            state.signal()
        case .overloaded:
            overloadedBatchesCounter.wrappingAdd(1, ordering: .relaxed)
            let error = StoreError(
                .overloaded,
                "the store is overloaded: \(commands.count) more command(s) would exceed the limit of \(max) waiting commands"
            )
            completionQueue.async { completion(.failure(error)) }
            return
        case .closed:
            completionQueue.async { completion(.failure(StoreError(.closed, "the store is closed"))) }
            return
        }
        // Interval mode: accepted in memory is the promise; the commit follows within the interval.
        if interval { completion(.success(())) }
    }

    /// Reads everything. Meant for start-up: it runs on the writer, between transactions.
    public func load() throws(StoreError) -> StoreSnapshot {
        if state.withLock({ $0.closing }) {
            throw StoreError(.closed, "the store is closed")
        }
        let result = onWriter { [backend] in Result { () throws(StoreError) in try backend.load() } }
        if case .failure(let error) = result {
            logger.error("store load failed", metadata: ["error": "\(error.message)"])
        }
        return try result.get()
    }

    public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let action: CloseAction = state.withLock { s in
                if s.drained { return .resumeNow }
                s.closing = true
                s.paused = false
                s.closeWaiters.append(continuation)  // resumed by the writer once the backend is closed
                s.generation &+= 1  // a waiting writer wakes to commit what is pending
                if case .idle = s.writer {
                    s.writer = .running
                    return .startWriter
                }
                return .wait
            }
            switch action {
            case .resumeNow: continuation.resume()
            case .wait: state.signal()
            case .startWriter: startWriter()
            }
        }
        // Refusals already handed to the completion queue run before close returns.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            completionQueue.async { continuation.resume() }
        }
    }

    // MARK: - Counters (for the operator metrics)

    /// Transactions committed (one fsync each).
    public var transactionsCommitted: UInt64 { transactionsCounter.load(ordering: .relaxed) }
    /// Commands in committed batches.
    public var commandsCommitted: UInt64 { commandsCounter.load(ordering: .relaxed) }
    /// Batches committed successfully.
    public var batchesCommitted: UInt64 { batchesCounter.load(ordering: .relaxed) }
    /// Batches that failed (a command was refused, or their transaction failed).
    public var batchesFailed: UInt64 { failedBatchesCounter.load(ordering: .relaxed) }
    /// Batches refused with `.overloaded`.
    public var batchesRejectedOverloaded: UInt64 { overloadedBatchesCounter.load(ordering: .relaxed) }
    /// Interval mode: batches answered 200 that a command of theirs kept off the disk.
    public var batchesLost: UInt64 { lostBatchesCounter.load(ordering: .relaxed) }
    /// Duration of the last committed transaction (begin to durable commit), in nanoseconds.
    public var lastTransactionNanoseconds: UInt64 { lastTransactionNanos.load(ordering: .relaxed) }
    /// Longest committed transaction so far, in nanoseconds.
    public var maxTransactionNanoseconds: UInt64 { maxTransactionNanos.load(ordering: .relaxed) }
    /// Sum of the durations of all committed transactions, in nanoseconds (for a mean or a rate).
    public var totalTransactionNanoseconds: UInt64 { totalTransactionNanos.load(ordering: .relaxed) }
    /// Commands waiting for the writer (not yet in a transaction).
    public var pendingCommands: Int { state.withLock { $0.pendingCommands } }

    // MARK: - Test hooks

    /// Stops the writer from starting a new transaction, and waits until the one in progress
    /// (if any) has committed. Commits keep being accepted (and grouped) until `resumeWriter`.
    @_spi(Testing)
    public func pauseWriter() {
        state.withLock { s in
            s.paused = true
            s.generation &+= 1
        }
        state.signal()
        // Barrier: jobs run between drain loops, so this returns after the current one.
        onWriter {}
    }

    /// Whether `close()` has begun. Safe to read on the writer (inside the backend).
    @_spi(Testing)
    public var isClosing: Bool { state.withLock { $0.closing } }

    /// Lets the writer run again; what accumulated goes into one transaction.
    @_spi(Testing)
    public func resumeWriter() {
        let start: Bool = state.withLock { s in
            s.paused = false
            guard !s.pending.isEmpty, case .idle = s.writer else { return false }
            s.writer = .running
            return true
        }
        if start { startWriter() }
    }
}

func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
}
