// The group-commit store's queue: the batches waiting for the writer, what the writer is doing,
// and the pacing decisions taken under the store's lock. Outside the generic class: nested in
// it, each type would be generic over the backend, and the unspecialized store (the gateway
// calls it through `any NotificationStore`) would look their metadata up at run time on every
// commit.

struct Batch: Sendable {
    var commands: [StoreCommand]
    /// Nil in interval mode: the caller was answered when it submitted.
    var completion: (@Sendable (Result<Void, StoreError>) -> Void)?
    var arrivedAt: UInt64
    var prompt: Bool
    /// Interval mode: a transaction with this batch failed after close began. It is tried once
    /// more, not until the disk recovers, so that a shutdown cannot hang on a failed disk.
    var failedWhileClosing = false
}

enum WriterStatus {
    /// No drain loop is queued or running.
    case idle
    /// A drain loop is queued or running on the writer (or closing the backend).
    case running
    /// The drain loop is blocked until this monotonic instant, or until `generation` changes;
    /// `forPrompt`: a prompt batch is among those it waits with (else only deferrable ones).
    case waiting(until: UInt64, forPrompt: Bool)
}

struct WriterState {
    var pending: [Batch] = []
    var pendingCommands = 0
    var oldestPrompt: UInt64?
    var oldestDeferrable: UInt64?
    var pacer: CommitPacer
    var writer = WriterStatus.idle
    /// Changed to wake a waiting writer (with `signal()`).
    var generation: UInt64 = 0
    var paused = false
    /// close() was called: new commits fail with `.closed`.
    var closing = false
    /// The writer has drained everything after close() and closed the backend, for good.
    var drained = false
    var closeWaiters: [CheckedContinuation<Void, Never>] = []
    /// Work for the writer thread between drain loops (a read at start-up, a test's barrier).
    var jobs: [@Sendable () -> Void] = []
    /// The store is gone: its writer thread ends.
    var stopped = false

    init(pacer: CommitPacer) {
        self.pacer = pacer
    }

    /// Queues `batch` (the caller checked the limits) and says what the writer must do.
    mutating func enqueue(_ batch: Batch, maxGroupCommands: Int) -> SubmitOutcome {
        pending.append(batch)
        pendingCommands += batch.commands.count
        pacer.arrived(at: batch.arrivedAt)
        if batch.prompt {
            if oldestPrompt == nil { oldestPrompt = batch.arrivedAt }
        } else if oldestDeferrable == nil {
            oldestDeferrable = batch.arrivedAt
        }
        if paused { return .queued }
        switch writer {
        case .running:
            return .queued
        case .idle:
            writer = .running
            return .startWriter
        case .waiting(let until, let forPrompt):
            return shouldWake(
                now: batch.arrivedAt,
                waitingUntil: until,
                forPrompt: forPrompt,
                groupFull: pendingCommands >= maxGroupCommands
            )
        }
    }

    /// After an arrival while the writer waits: wake it when the wait has become pointless (the
    /// group is big enough, or its linger is over), or when the first prompt batch comes while
    /// it waits out the deferral of deferrable ones. Not for every arrival that moves the
    /// estimate: a wake-up costs a context switch, and the writer re-decides when it wakes.
    mutating func shouldWake(now: UInt64, waitingUntil: UInt64, forPrompt: Bool, groupFull: Bool) -> SubmitOutcome {
        let decision =
            groupFull
            ? .commitNow
            : pacer.decide(
                now: now,
                oldestPrompt: oldestPrompt,
                oldestDeferrable: oldestDeferrable,
                pendingBatches: pending.count
            )
        switch decision {
        case .commitNow:
            break
        case .wait(let until):
            guard !forPrompt, oldestPrompt != nil, until < waitingUntil else { return .queued }
        }
        generation &+= 1
        return .wake
    }

    /// Moves the oldest batches, up to `maxCommands` commands (at least one batch), to `group`.
    mutating func take(into group: inout [Batch], maxCommands: Int) {
        var taken = 0
        var count = 0
        while count < pending.count, taken < maxCommands {
            taken += pending[count].commands.count
            count += 1
        }
        if count == pending.count {
            swap(&group, &pending)
            oldestPrompt = nil
            oldestDeferrable = nil
        } else {
            group = Array(pending[..<count])
            pending.removeFirst(count)
            oldestPrompt = pending.first(where: \.prompt)?.arrivedAt
            oldestDeferrable = pending.first(where: { !$0.prompt })?.arrivedAt
        }
        pendingCommands -= taken
    }
}

enum SubmitOutcome {
    case queued, startWriter, wake, overloaded, closed
}

enum CloseAction {
    case resumeNow, wait, startWriter
}

enum WriterStep {
    case write, idle, closeBackend
    case wait(until: UInt64, generation: UInt64)
}
