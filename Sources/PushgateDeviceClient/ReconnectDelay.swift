/// How long an agent waits before it reconnects: exponential back-off with jitter (250 ms
/// doubling to 30 s) after failures, or the gateway's own `retry:` hint, plus up to as much
/// again at random, after a draining gateway ended the stream. Jitter spreads the devices of a
/// gateway that went away over time instead of sending them all to its neighbours at once.
/// `random(range)` is injected so that tests see exact delays.
public struct ReconnectDelay {
    private var attempt = 0
    private var hintMillis: Int?
    private let random: (ClosedRange<Int>) -> Int

    public init(random: @escaping (ClosedRange<Int>) -> Int = { Int.random(in: $0) }) {
        self.random = random
    }

    /// The next wait, in milliseconds. A hint is used once; failures after it back off again.
    public mutating func next() -> Int {
        if let hint = hintMillis {
            hintMillis = nil
            return hint + random(0...hint)
        }
        let ceiling = min(30_000, 250 << min(attempt, 7))
        attempt += 1
        return random(ceiling / 2...ceiling)
    }

    /// A stream was served: the next failure starts from the shortest wait again.
    public mutating func reset() { attempt = 0 }

    /// The gateway asked for this wait (SSE `retry:`, sent as it drains).
    public mutating func serverAsked(millis: Int) {
        hintMillis = min(max(millis, 0), 30_000)
    }
}
