// The group-commit store's transactions: one per group, its outcome counted and logged, its
// batches completed; a failed one failed or (interval durability) tried again.
import Logging

extension GroupCommitStore {
    func writeGroup(_ group: [Batch]) {
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

    func failGroup(_ group: [Batch], _ error: StoreError) {
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
    func retryLater(_ group: [Batch], _ error: StoreError) {
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
}
