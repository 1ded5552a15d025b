import NIOConcurrencyHelpers
import NIOCore

/// The answers to the work other nodes forwarded lately, so that a second attempt at the same
/// work (its first answer lost or late: the forwarding node timed out) is answered, not served
/// again: a push is taken once however often it is handed over. The last `limit` only; an
/// attempt comes within seconds of the first.
final class ServedWork: Sendable {
    private struct Entries {
        var answers: [String: EventLoopFuture<ForwardedAnswer>] = [:]
        var order: [String] = []
        var next = 0
    }

    private let entries = NIOLockedValueBox(Entries())
    let limit: Int

    init(limit: Int = 65_536) {
        self.limit = limit
    }

    /// The answer to work `id`: the first attempt's, or `serve`'s when this is the first.
    func answer(
        _ id: String,
        on loop: any EventLoop,
        _ serve: () -> EventLoopFuture<ForwardedAnswer>
    ) -> EventLoopFuture<ForwardedAnswer> {
        let (answer, first) = entries.withLockedValue {
            entries -> (EventLoopFuture<ForwardedAnswer>, EventLoopPromise<ForwardedAnswer>?) in
            if let answer = entries.answers[id] { return (answer, nil) }
            let promise = loop.makePromise(of: ForwardedAnswer.self)
            entries.answers[id] = promise.futureResult
            // A ring of the ids in arrival order: the oldest is forgotten for each new one.
            if entries.order.count < limit {
                entries.order.append(id)
            } else {
                entries.answers[entries.order[entries.next]] = nil
                entries.order[entries.next] = id
                entries.next = (entries.next + 1) % limit
            }
            return (promise.futureResult, promise)
        }
        first?.completeWith(serve())
        return answer
    }
}

/// Runs the claims of one device one at a time (those of different devices run side by side).
final class ClaimQueue: Sendable {
    private let tails = NIOLockedValueBox<[String: (number: UInt64, task: Task<Void, Never>)]>([:])
    private let numbers = NIOLockedValueBox<UInt64>(0)

    func serialize<T: Sendable>(_ key: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let number = numbers.withLockedValue { number in
            number += 1
            return number
        }
        let task = tails.withLockedValue { tails in
            let previous = tails[key]?.task
            let task = Task<T, any Error> {
                await previous?.value
                return try await body()
            }
            tails[key] = (number, Task { _ = try? await task.value })
            return task
        }
        defer {
            // The last claim of the key forgets it: the table holds only keys being claimed.
            tails.withLockedValue { tails in
                if tails[key]?.number == number { tails[key] = nil }
            }
        }
        return try await task.value
    }
}
