import PushgateDeviceClient
import Testing

/// The agent's waits between connections, with the random draw injected: the test sees the
/// range each wait is drawn from.
@Suite("ReconnectDelay")
struct ReconnectDelayTests {
    /// A delay whose draws are recorded, each answered with the range's upper bound.
    final class Draws {
        var ranges: [ClosedRange<Int>] = []
    }

    static func delay(recording draws: Draws) -> ReconnectDelay {
        ReconnectDelay { range in
            draws.ranges.append(range)
            return range.upperBound
        }
    }

    @Test(
        "failures back off from 250 ms, doubling to 30 s, each wait drawn from its upper half; a served stream starts over"
    )
    func backoff() {
        let draws = Draws()
        var delay = Self.delay(recording: draws)
        let waits = (0..<10).map { _ in delay.next() }
        #expect(waits == [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000])
        #expect(draws.ranges.prefix(3) == [125...250, 250...500, 500...1000])
        delay.reset()
        #expect(delay.next() == 250)
    }

    @Test("a draining gateway's retry: is waited, plus up to as much again at random, once")
    func serverHint() {
        let draws = Draws()
        var delay = Self.delay(recording: draws)
        _ = delay.next()
        _ = delay.next()
        delay.serverAsked(millis: 1000)
        #expect(delay.next() == 2000)
        #expect(draws.ranges.last == 0...1000)
        // The hint is used once: the next failure goes on backing off where it was.
        #expect(delay.next() == 1000)
    }

    @Test("the hint is bounded: never negative, never above the longest back-off")
    func boundedHint() {
        let draws = Draws()
        var delay = Self.delay(recording: draws)
        delay.serverAsked(millis: 10_000_000)
        #expect(delay.next() == 60_000)
        delay.serverAsked(millis: -3)
        #expect(delay.next() == 0)
    }
}
