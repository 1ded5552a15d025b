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

    private let logger: Logger
    private let completionQueue = DispatchQueue(label: "pushgate.store.completions")
    private let state: Locked<WriterState>

    private let transactionsCounter = Atomic<UInt64>(0)
    private let commandsCounter = Atomic<UInt64>(0)
    private let batchesCounter = Atomic<UInt64>(0)
    private let failedBatchesCounter = Atomic<UInt64>(0)
    private let overloadedBatchesCounter = Atomic<UInt64>(0)
    private let lostBatchesCounter = Atomic<UInt64>(0)
    private let lastTransactionNanos = Atomic<UInt64>(0)
    private let maxTransactionNanos = Atomic<UInt64>(0)
    private let totalTransactionNanos = Atomic<UInt64>(0)
    /// When the writer last heard from the database (a transaction, failed or not, or a probe).
    private let lastActivityNanos = Atomic<UInt64>(0)
    private let metrics: StoreMetrics

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

    // MARK: - Writer

    /// `s.writer` was set to running: the writer thread, idle until now, drains.
    private func startWriter() {
        state.signal()
    }

    /// The writer thread: idle until there is something to drain, a job, a probe due or the
    /// store gone. The store is taken (from its weak reference) for one turn at a time.
    private static func runWriter(
        state: Locked<WriterState>,
        probeInterval: UInt64?,
        store: () -> GroupCommitStore?
    ) {
        var nextProbe = probeInterval.map { monotonicNanoseconds() &+ $0 } ?? .max
        while true {
            state.wait(until: nextProbe) { s in
                if case .idle = s.writer { return s.jobs.isEmpty && !s.stopped }
                return false
            }
            let jobs: [@Sendable () -> Void]? = state.withLock { s in
                if s.stopped { return nil }
                defer { s.jobs = [] }
                return s.jobs
            }
            guard let jobs, let store = store() else { return }
            for job in jobs { job() }
            if let interval = probeInterval, monotonicNanoseconds() >= nextProbe {
                store.probeIfIdle(interval: interval)
                nextProbe = monotonicNanoseconds() &+ interval
            }
            if state.withLock({ s in if case .idle = s.writer { false } else { true } }) {
                store.drain()
            }
        }
    }

    /// Runs `body` on the writer thread, between drain loops, and returns its result.
    private func onWriter<T>(_ body: @escaping () -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: T?
        nonisolated(unsafe) let body = body
        state.withLock { s in
            s.jobs.append {
                result = body()
                done.signal()
            }
        }
        state.signal()
        done.wait()
        return result!
    }

    /// The writer's loop: one group per iteration, until nothing is pending. When the pacer
    /// says to wait for more, the writer blocks until the instant it names or until an arrival
    /// (or a pause, or close) changes the generation.
    private func drain() {
        var group: [Batch] = []
        var justCommitted = false
        while true {
            let step: WriterStep = state.withLock { s in
                if !s.pending.isEmpty, !s.paused {
                    if !s.closing, s.pendingCommands < maxGroupCommands {
                        let decision = s.pacer.decide(
                            now: monotonicNanoseconds(),
                            oldestPrompt: s.oldestPrompt,
                            oldestDeferrable: s.oldestDeferrable,
                            pendingBatches: s.pending.count,
                            justCommitted: justCommitted
                        )
                        if case .wait(let until) = decision {
                            s.writer = .waiting(until: until, forPrompt: s.oldestPrompt != nil)
                            return .wait(until: until, generation: s.generation)
                        }
                    }
                    s.writer = .running
                    s.take(into: &group, maxCommands: maxGroupCommands)
                    return .write
                }
                // Closing keeps the writer marked running: no second drain loop closes the backend.
                if s.closing, s.pending.isEmpty {
                    s.writer = .running
                    return .closeBackend
                }
                s.writer = .idle
                return .idle
            }
            switch step {
            case .write:
                writeGroup(group)
                group = []
                justCommitted = true
            case .wait(let until, let generation):
                state.wait(until: until) { s in s.generation == generation }
                justCommitted = false
            case .idle:
                backend.writerIdle()
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
        defer { lastActivityNanos.store(monotonicNanoseconds(), ordering: .relaxed) }
        do throws(StoreError) {
            results = try backend.apply(group.map { $0.commands })
        } catch {
            // Interval mode: the group is tried again, not refused (refusals are counted as they come).
            if error.kind == .unavailable {
                health.recordFailure(error, batches: durability == .fsync ? group.count : 0)
            }
            let closing = state.withLock { $0.closing }
            // Answered batches are tried again; once close has begun, once more only (a close
            // that raced a failing transaction lost the group without this, though the next
            // try would have succeeded).
            if durability != .fsync, !closing || group.contains(where: { !$0.failedWhileClosing }) {
                retryLater(
                    closing
                        ? group.map {
                            var batch = $0
                            batch.failedWhileClosing = true
                            return batch
                        } : group,
                    error
                )
            } else {
                failGroup(group, error)
            }
            return
        }
        precondition(
            results.count == group.count,
            "the store backend returned \(results.count) results for \(group.count) batches"
        )

        let elapsed = nanoseconds(ContinuousClock.now - start)
        var commands = 0
        var pushes = 0
        var failed = 0
        var storageFailure: StoreError?
        for (batch, result) in zip(group, results) {
            switch result {
            case .success:
                commands += batch.commands.count
                for case .enqueue in batch.commands { pushes += 1 }
            case .failure(let error):
                failed += 1
                if error.kind == .unavailable {
                    // The storage failed a statement without undoing the transaction.
                    storageFailure = error
                }
                if batch.completion == nil {
                    lostBatchesCounter.wrappingAdd(1, ordering: .relaxed)
                    metrics.lostBatches.increment()
                    logger.error(
                        "store batch lost: it was answered before its commit, which refused it",
                        metadata: ["error": "\(error.message)"]
                    )
                } else if error.kind != .unavailable {  // `health` logs those, once
                    logger.error("store batch failed", metadata: ["error": "\(error.message)"])
                }
            }
        }
        if let storageFailure {
            health.recordFailure(storageFailure, batches: failed)
        } else {
            health.recordCommit()
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
        metrics.commitBatches.record(group.count)
        logger.trace(
            "store transaction committed",
            metadata: [
                "batches": "\(group.count)", "failed": "\(failed)", "commands": "\(commands)",
                "microseconds": "\(elapsed / 1000)",
            ]
        )

        // Completions run right here, on the writer, before it takes the next group: they are
        // quick (a hop to an event loop), and a handoff to another thread would add a wake-up
        // to every commit's latency on a busy machine.
        for (batch, result) in zip(group, results) {
            batch.completion?(result)
        }
    }

    private func failGroup(_ group: [Batch], _ error: StoreError) {
        if error.kind != .unavailable {  // a storage failure is logged by `health`, once
            logger.error(
                "store transaction failed",
                metadata: ["batches": "\(group.count)", "error": "\(error.message)"]
            )
        }
        failedBatchesCounter.wrappingAdd(UInt64(group.count), ordering: .relaxed)
        let lost = group.filter { $0.completion == nil }.count
        if lost > 0 {
            lostBatchesCounter.wrappingAdd(UInt64(lost), ordering: .relaxed)
            metrics.lostBatches.increment(by: lost)
        }
        for batch in group { batch.completion?(.failure(error)) }
    }

    /// Interval mode: the group was answered already, so a failed transaction (a full disk, an
    /// I/O error) is tried again, ahead of what came since, after an interval. The pending limit
    /// still bounds the backlog: once full, new pushes are refused as overloaded.
    private func retryLater(_ group: [Batch], _ error: StoreError) {
        if error.kind != .unavailable {
            logger.error(
                "store transaction failed; retried after the commit interval",
                metadata: ["batches": "\(group.count)", "error": "\(error.message)"]
            )
        }
        let now = monotonicNanoseconds()
        state.withLock { s in
            s.pending.insert(
                contentsOf: group.map { batch in
                    var again = batch
                    again.arrivedAt = now
                    return again
                },
                at: 0
            )
            s.pendingCommands += group.reduce(0) { $0 + $1.commands.count }
            s.oldestDeferrable = now
        }
    }

    // MARK: - Probe

    /// The writer calls `probe` every `interval` in which nothing reached the database, and at
    /// every interval while the store cannot commit: an outage, and its end, then show in
    /// `health` (readiness, metrics) with no traffic. Never during a transaction: the writer
    /// probes from its idle wait.
    private func probeIfIdle(interval: UInt64) {
        // Pending batches are about to be written, which says as much as a probe.
        let busy = state.withLock { s in s.closing || s.paused || !s.pending.isEmpty }
        if busy { return }
        let now = monotonicNanoseconds()
        if health.canCommit, now &- lastActivityNanos.load(ordering: .relaxed) < interval { return }
        do throws(StoreError) {
            try backend.probe()
            lastActivityNanos.store(monotonicNanoseconds(), ordering: .relaxed)
            health.recordCommit()
        } catch {
            if error.kind == .unavailable { health.recordFailure(error, batches: 0, transaction: false) }
        }
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
            s.writer = .idle
            defer { s.closeWaiters = [] }
            return s.closeWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

private func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
}
