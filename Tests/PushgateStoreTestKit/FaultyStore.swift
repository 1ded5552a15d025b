import Dispatch
import Logging
import NIOConcurrencyHelpers
import PushgateStore

/// A store that passes commits through to a real one, except those a test singles out: the next
/// commit matching a rule fails, or is held until the test lets it go (to fail or to commit), or
/// every commit fails as on a full disk until the test frees it. It remembers what it passed on,
/// for tests that check what was committed. Its `health` follows the outcomes it hands out, as
/// the real store's follows its transactions.
public final class FaultyStore: NotificationStore {
    public typealias Match = @Sendable ([StoreCommand]) -> Bool

    private struct Pending {
        var commands: [StoreCommand]
        var urgency: CommitUrgency
        var completion: @Sendable (Result<Void, StoreError>) -> Void
    }

    private struct State {
        var failNext: [(match: Match, kind: StoreError.Kind)] = []
        /// Every commit fails as the storage's fault until cleared.
        var storageFull = false
        var holdNext: [Match] = []
        var held: [Pending] = []
        var heldWaiters: [CheckedContinuation<Void, Never>] = []
        var passed: [[StoreCommand]] = []
    }

    private let state = NIOLockedValueBox(State())
    private let store = NIOLockedValueBox<(any NotificationStore)?>(nil)
    private let refusals = DispatchQueue(label: "faulty-store.refusals")

    public let health: StoreHealth

    public init(logger: Logger = Logger(label: "faulty-store") { _ in SwiftLogNoOpLogHandler() }) {
        health = StoreHealth(logger: logger)
    }

    public convenience init(
        wrapping inner: any NotificationStore,
        logger: Logger = Logger(label: "faulty-store") { _ in SwiftLogNoOpLogHandler() }
    ) {
        self.init(logger: logger)
        attach(inner)
    }

    /// The real store behind this one, when it is made after this one.
    public func attach(_ inner: any NotificationStore) {
        store.withLockedValue { $0 = inner }
    }

    private var inner: any NotificationStore { store.withLockedValue { $0! } }

    /// The batches passed on to the real store, in the order they came.
    public var passed: [[StoreCommand]] { state.withLockedValue { $0.passed } }

    /// The next commit for which `match` holds fails (SQLite is not asked), with an error of
    /// `kind` (`.unavailable` for the storage's fault, `.database` for the commands').
    public func failNext(where match: @escaping Match, kind: StoreError.Kind = .database) {
        state.withLockedValue { $0.failNext.append((match, kind)) }
    }

    /// Every commit fails as on a full disk (SQLite is not asked), until `freeStorage()`.
    public func fillStorage() {
        state.withLockedValue { $0.storageFull = true }
    }

    /// Commits pass on to the real store again.
    public func freeStorage() {
        state.withLockedValue { $0.storageFull = false }
    }

    /// The next commit for which `match` holds waits for `release(failing:)`.
    public func holdNext(where match: @escaping Match) {
        state.withLockedValue { $0.holdNext.append(match) }
    }

    /// Returns once a commit is held.
    public func waitUntilHeld() async {
        await withCheckedContinuation { continuation in
            let now = state.withLockedValue { s -> Bool in
                if !s.held.isEmpty { return true }
                s.heldWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Lets the held commits go: committed for real, or failed.
    public func release(failing: Bool) {
        let held = state.withLockedValue { s in
            defer { s.held = [] }
            return s.held
        }
        for pending in held {
            if failing {
                fail(pending.completion, .database)
            } else {
                pass(pending.commands, pending.urgency, pending.completion)
            }
        }
    }

    private func fail(_ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void, _ kind: StoreError.Kind) {
        let error = StoreError(kind, kind == .unavailable ? "injected storage failure: disk full" : "injected failure")
        // As the real store does: health first, then the answer.
        if kind == .unavailable { health.recordFailure(error, batches: 1) }
        refusals.async { completion(.failure(error)) }
    }

    private func pass(
        _ commands: [StoreCommand],
        _ urgency: CommitUrgency,
        _ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let health = self.health
        inner.commit(commands, urgency: urgency) { result in
            switch result {
            case .success: health.recordCommit()
            case .failure(let error): if error.kind == .unavailable { health.recordFailure(error, batches: 1) }
            }
            completion(result)
        }
    }

    public func commit(
        _ commands: [StoreCommand],
        urgency: CommitUrgency,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        enum Action {
            case pass
            case fail(StoreError.Kind)
            case hold([CheckedContinuation<Void, Never>])
        }
        let action: Action = state.withLockedValue { s in
            if s.storageFull { return .fail(.unavailable) }
            if let index = s.failNext.firstIndex(where: { $0.match(commands) }) {
                return .fail(s.failNext.remove(at: index).kind)
            }
            if let index = s.holdNext.firstIndex(where: { $0(commands) }) {
                s.holdNext.remove(at: index)
                s.held.append(Pending(commands: commands, urgency: urgency, completion: completion))
                defer { s.heldWaiters = [] }
                return .hold(s.heldWaiters)
            }
            return .pass
        }
        switch action {
        case .pass:
            state.withLockedValue { $0.passed.append(commands) }
            pass(commands, urgency, completion)
        case .fail(let kind):
            fail(completion, kind)
        case .hold(let waiters):
            for waiter in waiters { waiter.resume() }
        }
    }

    public func load() throws(StoreError) -> StoreSnapshot {
        try inner.load()
    }

    public func close() async {
        release(failing: true)
        await inner.close()
    }
}
