/// How soon a batch needs its commit.
public enum CommitUrgency: Sendable {
    /// Someone waits on it and the wait shows: a push's 200, a device's creation. Committed at
    /// once, or after a short linger when others are about to arrive to share the fsync.
    case prompt
    /// Someone waits on it, but nothing else does: an ack frees nothing the device is waiting
    /// for (it is applied in memory at once). It rides on the next commit made for a prompt
    /// batch, or gets one of its own after `CommitPacing.deferNanos`.
    case deferrable
}

/// When a 200 may be sent for a batch.
public enum Durability: Sendable, Equatable {
    /// After the batch is committed and fsync'd (the default: a 200 means on disk).
    case fsync
    /// At once, before the commit; commits run at most this often (nanoseconds), like Redis's
    /// `appendfsync everysec`. A crash loses what was accepted since the last commit.
    case interval(nanoseconds: UInt64)
}

/// The pacing knobs of `CommitPacer`.
public struct CommitPacing: Sendable, Equatable {
    /// How long a prompt batch may wait for more batches to share its commit; 0 never waits.
    public var lingerNanos: UInt64
    /// How long a deferrable batch waits at most for a commit to ride on.
    public var deferNanos: UInt64
    /// A commit carrying this many batches is worth no further wait.
    public var targetBatches: Int

    public init(lingerNanos: UInt64, deferNanos: UInt64, targetBatches: Int = 8) {
        precondition(targetBatches > 0, "targetBatches must be positive")
        self.lingerNanos = lingerNanos
        self.deferNanos = deferNanos
        self.targetBatches = targetBatches
    }

    /// 1 ms of linger (a fraction of the delivery budget), acks deferred up to 10 ms.
    public static let `default` = CommitPacing(lingerNanos: 1_000_000, deferNanos: 10_000_000)
    /// Every batch committed as soon as the writer is free (as before pacing existed).
    public static let immediate = CommitPacing(lingerNanos: 0, deferNanos: 0)
}

/// Decides when the store's writer commits what is pending: at once, or at a later instant so
/// that one fsync carries more batches. Pure and clock-injected: times are monotonic
/// nanoseconds given by the caller.
///
/// Why linger: an fsync'd commit costs a fixed amount of CPU whatever it carries, plus a
/// wake-up of the writer and of every event loop it answers. At moderate rates the writer is
/// idle when a push arrives and would commit it alone; waiting a fraction of a millisecond lets
/// the next few share it. The wait is adaptive: only when the arrival rate says others will come
/// within the budget, and only until the group reaches `targetBatches`. A saturated writer never
/// waits: batches pile up while it commits.
public struct CommitPacer: Sendable {
    public enum Decision: Equatable, Sendable {
        case commitNow
        case wait(until: UInt64)
    }

    public let pacing: CommitPacing
    private var lastArrival: UInt64?
    /// Exponentially weighted mean gap between batch arrivals (weight 1/8 for a new gap).
    private(set) var meanGapNanos: UInt64?

    public init(pacing: CommitPacing) {
        self.pacing = pacing
    }

    /// Notes a batch's arrival, for the rate estimate.
    public mutating func arrived(at now: UInt64) {
        defer { lastArrival = now }
        guard let last = lastArrival else { return }
        // A gap longer than the linger says "slow" as well as any longer one would; clamped, the
        // mean recovers within a few arrivals after an idle spell.
        let gap = min(now &- last, max(pacing.lingerNanos &* 2, 1))
        if let mean = meanGapNanos {
            meanGapNanos = mean - mean / 8 + gap / 8
        } else {
            meanGapNanos = gap
        }
    }

    /// What the writer does now, given what is pending: the arrival time of the oldest prompt
    /// and of the oldest deferrable batch (nil: none pending), and how many batches wait.
    /// `justCommitted`: the writer comes from a commit, so what is pending came while it was
    /// busy and has waited already; lingering then would only stretch each round trip of a
    /// saturated gateway, lowering its throughput.
    public func decide(
        now: UInt64,
        oldestPrompt: UInt64?,
        oldestDeferrable: UInt64?,
        pendingBatches: Int,
        justCommitted: Bool = false
    ) -> Decision {
        if let prompt = oldestPrompt {
            if justCommitted { return .commitNow }
            let deadline = prompt &+ pacing.lingerNanos
            guard now < deadline, pendingBatches < pacing.targetBatches, let gap = meanGapNanos, gap > 0 else {
                return .commitNow
            }
            // Nobody expected before the deadline: waiting would only add latency.
            guard deadline - now >= gap else { return .commitNow }
            let untilTarget = now &+ gap &* UInt64(pacing.targetBatches - pendingBatches)
            return .wait(until: min(deadline, untilTarget))
        }
        if let deferrable = oldestDeferrable {
            let deadline = deferrable &+ pacing.deferNanos
            return now < deadline ? .wait(until: deadline) : .commitNow
        }
        return .commitNow
    }
}
