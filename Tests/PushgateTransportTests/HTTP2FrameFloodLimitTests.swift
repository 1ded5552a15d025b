import NIOCore
import Testing

@testable import PushgateTransport

@Suite("HTTP/2 frame flood limit: a token bucket with the time passed in")
struct HTTP2FrameFloodLimitTests {
    private static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private static func take(_ limit: inout HTTP2FrameFloodLimit, _ count: Int, at now: NIODeadline) -> Int {
        (0..<count).filter { _ in limit.take(now: now) }.count
    }

    @Test("a full bucket gives its burst at once, then a frame per 1/perSecond, exactly")
    func burstThenRate() {
        var limit = HTTP2FrameFloodLimit(burst: 10, perSecond: 4)
        let taken1 = Self.take(&limit, 11, at: Self.start)
        #expect(taken1 == 10)
        // 249.999999 ms give back less than one frame; 250 ms give back one.
        let taken2 = Self.take(&limit, 1, at: Self.start + .nanoseconds(249_999_999))
        #expect(taken2 == 0)
        let taken3 = Self.take(&limit, 1, at: Self.start + .milliseconds(250))
        #expect(taken3 == 1)
        let taken4 = Self.take(&limit, 1, at: Self.start + .milliseconds(250))
        #expect(taken4 == 0)
        let taken5 = Self.take(&limit, 3, at: Self.start + .seconds(1))
        #expect(taken5 == 3)
    }

    @Test("a long quiet spell fills the bucket to its burst, no more, and does not overflow")
    func quietSpell() {
        var limit = HTTP2FrameFloodLimit(burst: 1_000_000, perSecond: 1_000_000)
        let taken6 = Self.take(&limit, 1_000_000, at: Self.start)
        #expect(taken6 == 1_000_000)
        let years = Self.start + .hours(24 * 365 * 200)
        let taken7 = Self.take(&limit, 1_000_001, at: years)
        #expect(taken7 == 1_000_000)
    }

    @Test("a clock read out of order gives nothing back")
    func backwards() {
        var limit = HTTP2FrameFloodLimit(burst: 2, perSecond: 1)
        let taken8 = Self.take(&limit, 2, at: Self.start + .seconds(5))
        #expect(taken8 == 2)
        let taken9 = Self.take(&limit, 1, at: Self.start)
        #expect(taken9 == 0)
        let taken10 = Self.take(&limit, 1, at: Self.start + .seconds(1))
        #expect(taken10 == 0)
        let taken11 = Self.take(&limit, 1, at: Self.start + .seconds(6))
        #expect(taken11 == 1)
    }
}
