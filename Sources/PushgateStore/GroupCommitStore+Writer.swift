// The group-commit store's writer: its thread, the drain loop that takes groups and waits as
// the pacer says, its jobs between drain loops, the backend's probe and its close.
import Dispatch

extension GroupCommitStore {
    /// `s.writer` was set to running: the writer thread, idle until now, drains.
    func startWriter() {
        state.signal()
    }

    /// The writer thread: idle until there is something to drain, a job, a probe due or the
    /// store gone. The store is taken (from its weak reference) for one turn at a time.
    static func runWriter(
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
            // One look under the lock: the jobs, and whether there is anything to drain (a batch
            // arriving meanwhile wakes the next wait at once).
            let turn: (jobs: [@Sendable () -> Void], drain: Bool)? = state.withLock { s in
                if s.stopped { return nil }
                defer { s.jobs = [] }
                if case .idle = s.writer { return (s.jobs, false) }
                return (s.jobs, true)
            }
            guard let turn, let store = store() else { return }
            for job in turn.jobs { job() }
            if let interval = probeInterval, monotonicNanoseconds() >= nextProbe {
                store.probeIfIdle(interval: interval)
                nextProbe = monotonicNanoseconds() &+ interval
            }
            if turn.drain { store.drain() }
        }
    }

    /// Runs `body` on the writer thread, between drain loops, and returns its result.
    func onWriter<T>(_ body: @escaping () -> T) -> T {
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
    func drain() {
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

    // MARK: - Probe

    /// The writer calls `probe` every `interval` in which nothing reached the database, and at
    /// every interval while the store cannot commit: an outage, and its end, then show in
    /// `health` (readiness, metrics) with no traffic. Never during a transaction: the writer
    /// probes from its idle wait.
    func probeIfIdle(interval: UInt64) {
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
    func closeBackend() {
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
