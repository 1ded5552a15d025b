import Dispatch
import Logging
import Synchronization

/// `NotificationStore` over any `StoreBackend`: concurrent commits grouped into one transaction
/// (one fsync for many batches), so that thousands of pushes per second each wait for a
/// durable commit without as many fsyncs.
///
/// Threads:
/// - callers of `commit` only take a short lock to append their batch to the pending queue;
/// - the writer is a serial dispatch queue: a drain loop that takes what is pending (up to
///   `maxGroupCommands` commands), has the backend apply it in one transaction, and repeats
///   while more is pending. Batches commit in the order they were submitted;
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

    private let logger: Logger
    private let writer = DispatchQueue(label: "pushgate.store.writer")
    private let completionQueue = DispatchQueue(label: "pushgate.store.completions")
    private let state = Locked(WriterState())

    private let transactionsCounter = Atomic<UInt64>(0)
    private let commandsCounter = Atomic<UInt64>(0)
    private let batchesCounter = Atomic<UInt64>(0)
    private let failedBatchesCounter = Atomic<UInt64>(0)
    private let overloadedBatchesCounter = Atomic<UInt64>(0)
    private let lastTransactionNanos = Atomic<UInt64>(0)
    private let maxTransactionNanos = Atomic<UInt64>(0)
    private let totalTransactionNanos = Atomic<UInt64>(0)
    private let metrics: StoreMetrics

    public init(
        backend: Backend,
        maxPendingCommands: Int = 100_000,
        maxGroupCommands: Int = 4096,
        metrics: StoreMetrics = .none,
        logger: Logger
    ) {
        precondition(maxPendingCommands > 0, "maxPendingCommands must be positive")
        precondition(maxGroupCommands > 0, "maxGroupCommands must be positive")
        self.backend = backend
        self.metrics = metrics
        self.maxPendingCommands = maxPendingCommands
        self.maxGroupCommands = maxGroupCommands
        self.logger = logger
    }

    // MARK: - NotificationStore

    public func commit(_ commands: [StoreCommand], completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let max = maxPendingCommands
        let outcome: SubmitOutcome = state.withLock { s in
            if s.closing { return .closed }
            if commands.count > max - s.pendingCommands { return .overloaded }
            s.pending.append(Batch(commands: commands, completion: completion))
            s.pendingCommands += commands.count
            if s.writerScheduled || s.paused { return .queued }
            s.writerScheduled = true
            return .startWriter
        }
        switch outcome {
        case .queued:
            break
        case .startWriter:
            startWriter()
        case .overloaded:
            overloadedBatchesCounter.wrappingAdd(1, ordering: .relaxed)
            let error = StoreError(.overloaded, "the store is overloaded: \(commands.count) more command(s) would exceed the limit of \(max) waiting commands")
            completionQueue.async { completion(.failure(error)) }
        case .closed:
            completionQueue.async { completion(.failure(StoreError(.closed, "the store is closed"))) }
        }
    }

    /// Reads everything. Meant for start-up: it runs on the writer, between transactions.
    public func load() throws(StoreError) -> StoreSnapshot {
        if state.withLock({ $0.closing }) {
            throw StoreError(.closed, "the store is closed")
        }
        let result = writer.sync { Result { () throws(StoreError) in try backend.load() } }
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
                if s.writerScheduled { return .wait }
                s.writerScheduled = true
                return .startWriter
            }
            switch action {
            case .resumeNow: continuation.resume()
            case .wait: break
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
        state.withLock { $0.paused = true }
        // Barrier: the writer queue is serial, so this runs after the current drain loop.
        writer.sync {}
    }

    /// Lets the writer run again; what accumulated goes into one transaction.
    @_spi(Testing)
    public func resumeWriter() {
        let start: Bool = state.withLock { s in
            s.paused = false
            if s.pending.isEmpty || s.writerScheduled { return false }
            s.writerScheduled = true
            return true
        }
        if start { startWriter() }
    }

    // MARK: - Writer

    private func startWriter() {
        writer.async { [self] in
            drain()
        }
    }

    /// The writer's loop: one group per iteration, until nothing is pending.
    private func drain() {
        var group: [Batch] = []
        while true {
            let step: WriterStep = state.withLock { s in
                if !s.pending.isEmpty, !s.paused {
                    var taken = 0
                    var count = 0
                    while count < s.pending.count, taken < maxGroupCommands {
                        taken += s.pending[count].commands.count
                        count += 1
                    }
                    if count == s.pending.count {
                        swap(&group, &s.pending)
                    } else {
                        group = Array(s.pending[..<count])
                        s.pending.removeFirst(count)
                    }
                    s.pendingCommands -= taken
                    return .write
                }
                // Closing keeps `writerScheduled` set: no second drain loop closes the backend.
                if s.closing, s.pending.isEmpty { return .closeBackend }
                s.writerScheduled = false
                return .idle
            }
            switch step {
            case .write:
                writeGroup(group)
                group = []
            case .idle:
                return
            case .closeBackend:
                closeBackend()
                return
            }
        }
    }

    /// One transaction for the whole group; then the completions, in order.
    private func writeGroup(_ group: [Batch]) {
        let start = ContinuousClock.now
        let results: [Result<Void, StoreError>]
        do throws(StoreError) {
            results = try backend.apply(group.map { $0.commands })
        } catch {
            failGroup(group, error)
            return
        }
        precondition(results.count == group.count, "the store backend returned \(results.count) results for \(group.count) batches")

        let elapsed = nanoseconds(ContinuousClock.now - start)
        var commands = 0
        var pushes = 0
        var failed = 0
        for (batch, result) in zip(group, results) {
            switch result {
            case .success:
                commands += batch.commands.count
                for case .enqueue in batch.commands { pushes += 1 }
            case .failure(let error):
                failed += 1
                logger.error("store batch failed", metadata: ["error": "\(error.message)"])
            }
        }
        transactionsCounter.wrappingAdd(1, ordering: .relaxed)
        commandsCounter.wrappingAdd(UInt64(commands), ordering: .relaxed)
        batchesCounter.wrappingAdd(UInt64(group.count - failed), ordering: .relaxed)
        if failed > 0 { failedBatchesCounter.wrappingAdd(UInt64(failed), ordering: .relaxed) }
        lastTransactionNanos.store(elapsed, ordering: .relaxed)
        totalTransactionNanos.wrappingAdd(elapsed, ordering: .relaxed)
        if elapsed > maxTransactionNanos.load(ordering: .relaxed) {
            maxTransactionNanos.store(elapsed, ordering: .relaxed)  // only the writer stores it
        }
        metrics.commitDuration.recordNanoseconds(Int64(clamping: elapsed))
        metrics.commitPushes.record(pushes)
        logger.trace("store transaction committed", metadata: [
            "batches": "\(group.count)", "failed": "\(failed)", "commands": "\(commands)",
            "microseconds": "\(elapsed / 1000)",
        ])

        // Completions run right here, on the writer, before it takes the next group: they are
        // quick (a hop to an event loop), and a handoff to another thread would add a wake-up
        // to every commit's latency on a busy machine.
        for (batch, result) in zip(group, results) {
            batch.completion(result)
        }
    }

    private func failGroup(_ group: [Batch], _ error: StoreError) {
        logger.error("store transaction failed", metadata: ["batches": "\(group.count)", "error": "\(error.message)"])
        failedBatchesCounter.wrappingAdd(UInt64(group.count), ordering: .relaxed)
        for batch in group { batch.completion(.failure(error)) }
    }

    /// Everything submitted is committed and completed: the backend is closed, on the writer
    /// like every other call to it, then whoever waits in close() resumes.
    private func closeBackend() {
        do throws(StoreError) {
            try backend.close()
        } catch {
            logger.error("store close failed", metadata: ["error": "\(error.message)"])
        }
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { s in
            s.drained = true
            s.writerScheduled = false
            defer { s.closeWaiters = [] }
            return s.closeWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

// Outside the generic class: nested in it, each would be generic over the backend, and the
// unspecialized store (the gateway calls it through `any NotificationStore`) would look their
// metadata up at run time on every commit.

private struct Batch: Sendable {
    var commands: [StoreCommand]
    var completion: @Sendable (Result<Void, StoreError>) -> Void
}

private struct WriterState {
    var pending: [Batch] = []
    var pendingCommands = 0
    /// A drain loop is queued or running on the writer (or closing the backend).
    var writerScheduled = false
    var paused = false
    /// close() was called: new commits fail with `.closed`.
    var closing = false
    /// The writer has drained everything after close() and closed the backend, for good.
    var drained = false
    var closeWaiters: [CheckedContinuation<Void, Never>] = []
}

private enum SubmitOutcome {
    case queued, startWriter, overloaded, closed
}

private enum CloseAction {
    case resumeNow, wait, startWriter
}

private enum WriterStep {
    case write, idle, closeBackend
}

private func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
}
