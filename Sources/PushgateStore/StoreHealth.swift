import Logging
import Synchronization

/// Whether the store can commit: it cannot from a transaction the storage would not take (disk
/// full, I/O error: `StoreError.Kind.unavailable`) until a transaction commits again. The store
/// that commits records each outcome here; readiness and the metrics read it, so that nobody
/// guesses the store's state from the errors requests got.
///
/// Each change is logged once, however many requests fail in between: a full disk refuses every
/// push, and a line per push would bury the cause (and fill what little disk is left).
public final class StoreHealth: Sendable {
    private struct State {
        /// What the storage said when it began failing; nil while commits succeed.
        var failure: StoreError?
        /// Batches refused since it began failing.
        var failedBatches = 0
    }

    private let state = Locked(State())
    /// Read on every readiness probe and scrape: no lock for those.
    private let canCommitFlag = Atomic<Bool>(true)
    private let failedTransactionsCounter = Atomic<UInt64>(0)
    private let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    /// False from a commit the storage refused until one succeeds.
    public var canCommit: Bool { canCommitFlag.load(ordering: .relaxed) }

    /// Why the store cannot commit, when it cannot.
    public var failure: StoreError? { state.withLock { $0.failure } }

    /// Transactions the storage refused since the store opened (for the metrics).
    public var failedTransactions: UInt64 { failedTransactionsCounter.load(ordering: .relaxed) }

    /// A transaction of `batches` batches failed because of the storage; or, with
    /// `transaction` false, a probe of an idle database found it unable to commit.
    public func recordFailure(_ error: StoreError, batches: Int, transaction: Bool = true) {
        if transaction { failedTransactionsCounter.wrappingAdd(1, ordering: .relaxed) }
        let began = state.withLock { s in
            defer { s.failedBatches += batches }
            guard s.failure == nil else { return false }
            s.failure = error
            canCommitFlag.store(false, ordering: .relaxed)
            return true
        }
        if began {
            logger.error("store cannot commit: \(error.message)")
        } else {
            logger.debug("store still cannot commit", metadata: ["batches": "\(batches)", "error": "\(error.message)"])
        }
    }

    /// A batch was refused without trying, because the store cannot commit (interval mode,
    /// where a commit is answered before it is tried).
    public func recordRefusal() {
        state.withLock { $0.failedBatches += 1 }
    }

    /// A transaction committed (or a probe found that one would).
    public func recordCommit() {
        // The common case, on every commit: one atomic load, no lock.
        if canCommit { return }
        let failed: Int? = state.withLock { s in
            guard s.failure != nil else { return nil }
            defer {
                s.failure = nil
                s.failedBatches = 0
            }
            canCommitFlag.store(true, ordering: .relaxed)
            return s.failedBatches
        }
        if let failed {
            logger.notice("store commits again after \(failed) failed batches")
        }
    }
}
