import Dispatch
import PushgateStore
import Synchronization

/// A store that passes commits through to a real one, except those a test singles out: the next
/// commit matching a rule fails, or is held until the test lets it go (to fail or to commit). It
/// remembers what it passed on, for tests that check what was committed.
public final class FaultyStore: NotificationStore {
    public typealias Match = @Sendable ([StoreCommand]) -> Bool

    private struct Pending {
        var commands: [StoreCommand]
        var urgency: CommitUrgency
        var completion: @Sendable (Result<Void, StoreError>) -> Void
    }

    private struct State {
        var failNext: [Match] = []
        var holdNext: [Match] = []
        var held: [Pending] = []
        var heldWaiters: [CheckedContinuation<Void, Never>] = []
        var passed: [[StoreCommand]] = []
    }

    private let state = Mutex(State())
    private let store = Mutex<(any NotificationStore)?>(nil)
    private let refusals = DispatchQueue(label: "faulty-store.refusals")

    public init() {}

    public convenience init(wrapping inner: any NotificationStore) {
        self.init()
        attach(inner)
    }

    /// The real store behind this one, when it is made after this one.
    public func attach(_ inner: any NotificationStore) {
        store.withLock { $0 = inner }
    }

    private var inner: any NotificationStore { store.withLock { $0! } }

    /// The batches passed on to the real store, in the order they came.
    public var passed: [[StoreCommand]] { state.withLock { $0.passed } }

    /// The next commit for which `match` holds fails (SQLite is not asked).
    public func failNext(where match: @escaping Match) {
        state.withLock { $0.failNext.append(match) }
    }

    /// The next commit for which `match` holds waits for `release(failing:)`.
    public func holdNext(where match: @escaping Match) {
        state.withLock { $0.holdNext.append(match) }
    }

    /// Returns once a commit is held.
    public func waitUntilHeld() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { s -> Bool in
                if !s.held.isEmpty { return true }
                s.heldWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Lets the held commits go: committed for real, or failed.
    public func release(failing: Bool) {
        let held = state.withLock { s in
            defer { s.held = [] }
            return s.held
        }
        for pending in held {
            if failing {
                refusals.async { pending.completion(.failure(StoreError(.database, "injected failure"))) }
            } else {
                inner.commit(pending.commands, urgency: pending.urgency, completion: pending.completion)
            }
        }
    }

    public func commit(
        _ commands: [StoreCommand],
        urgency: CommitUrgency,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        enum Action { case pass, fail, hold([CheckedContinuation<Void, Never>]) }
        let action: Action = state.withLock { s in
            if let index = s.failNext.firstIndex(where: { $0(commands) }) {
                s.failNext.remove(at: index)
                return .fail
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
            state.withLock { $0.passed.append(commands) }
            inner.commit(commands, urgency: urgency, completion: completion)
        case .fail:
            refusals.async { completion(.failure(StoreError(.database, "injected failure"))) }
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
