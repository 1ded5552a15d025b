import NIOConcurrencyHelpers
import NIOCore

/// Lookups gathered into batches: keys asked for while `concurrency` batches are running wait
/// for the next, which asks for all of them at once. The first pushes for many devices (a node
/// just started, or devices just moved) then cost a query per batch, not one each, and do not
/// queue behind one another's round trips. Futures all the way: no task per lookup.
final class BatchedLookups<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct State {
        var waiting: [Key: [EventLoopPromise<Value?>]] = [:]
        var running = 0
    }

    private let state = NIOLockedValueBox(State())
    private let concurrency: Int
    private let batchLimit: Int
    private let fetch: @Sendable ([Key]) -> EventLoopFuture<[Key: Value]>

    /// `fetch`: the values of the keys given, a key without one missing.
    init(
        concurrency: Int = 2,
        batchLimit: Int = 1_000,
        fetch: @escaping @Sendable ([Key]) -> EventLoopFuture<[Key: Value]>
    ) {
        precondition(concurrency > 0 && batchLimit > 0)
        self.concurrency = concurrency
        self.batchLimit = batchLimit
        self.fetch = fetch
    }

    /// The value of `key`, nil when it has none; the batch's failure when its fetch failed.
    func value(of key: Key, on loop: any EventLoop) -> EventLoopFuture<Value?> {
        let promise = loop.makePromise(of: Value?.self)
        let starts = state.withLockedValue { state in
            state.waiting[key, default: []].append(promise)
            guard state.running < concurrency else { return false }
            state.running += 1
            return true
        }
        if starts { runNext() }
        return promise.futureResult
    }

    /// The next batch, and after it the one after, until nothing waits.
    private func runNext() {
        guard let batch = next() else { return }
        fetch(Array(batch.keys)).whenComplete { [self] result in
            switch result {
            case .success(let values):
                for (key, promises) in batch {
                    for promise in promises { promise.succeed(values[key]) }
                }
            case .failure(let error):
                for promise in batch.values.joined() { promise.fail(error) }
            }
            runNext()
        }
    }

    /// The keys waiting, up to the limit; nil (and one runner fewer) when none are.
    private func next() -> [Key: [EventLoopPromise<Value?>]]? {
        state.withLockedValue { state in
            guard !state.waiting.isEmpty else {
                state.running -= 1
                return nil
            }
            guard state.waiting.count > batchLimit else {
                defer { state.waiting = [:] }
                return state.waiting
            }
            var batch: [Key: [EventLoopPromise<Value?>]] = [:]
            for key in Array(state.waiting.keys.prefix(batchLimit)) {
                batch[key] = state.waiting.removeValue(forKey: key)
            }
            return batch
        }
    }
}
