import Testing

@testable import PushgateDelivery

/// The timing wheel behind heartbeats: an entry comes out at the first tick at or after its due
/// time, once, whatever the gaps between the ticks taken.
@Suite("Heartbeat wheel")
struct HeartbeatWheelTests {
    @Test("an entry comes out at the tick of the second holding its due time, once")
    func dueTick() {
        var wheel = HeartbeatWheel<String>(tickMillis: 1_000, horizonMillis: 30_000, nowMillis: 100_000)
        wheel.schedule("a", dueMillis: 129_000)
        wheel.schedule("b", dueMillis: 128_001)
        #expect(wheel.takeDue(nowMillis: 127_999) == [])
        #expect(wheel.takeDue(nowMillis: 128_000) == ["b"])
        #expect(wheel.takeDue(nowMillis: 128_999) == [])
        #expect(wheel.takeDue(nowMillis: 129_000) == ["a"])
        #expect(wheel.takeDue(nowMillis: 140_000) == [])
    }

    @Test("ticks taken late give every slot passed, earliest first")
    func lateTicks() {
        var wheel = HeartbeatWheel<Int>(tickMillis: 1_000, horizonMillis: 30_000, nowMillis: 0)
        for due in [5_000, 2_000, 9_000, 8_500] { wheel.schedule(due, dueMillis: Int64(due)) }
        #expect(wheel.takeDue(nowMillis: 8_000) == [2_000, 5_000, 8_500])
        #expect(wheel.takeDue(nowMillis: 9_999) == [9_000])
    }

    @Test("a due time already passed comes out at the next tick")
    func pastDue() {
        var wheel = HeartbeatWheel<String>(tickMillis: 1_000, horizonMillis: 30_000, nowMillis: 0)
        #expect(wheel.takeDue(nowMillis: 10_000) == [])
        wheel.schedule("late", dueMillis: 3_000)
        #expect(wheel.takeDue(nowMillis: 10_999) == [])
        #expect(wheel.takeDue(nowMillis: 11_000) == ["late"])
    }

    @Test("after ticks missed for longer than a turn, everything comes out once; beyond the horizon, sooner than due")
    func clockJump() {
        var wheel = HeartbeatWheel<Int>(tickMillis: 1_000, horizonMillis: 30_000, nowMillis: 0)
        for due in 1...30 { wheel.schedule(due, dueMillis: Int64(due) * 1_000) }
        #expect(wheel.takeDue(nowMillis: 500_000).sorted() == Array(1...30))
        #expect(wheel.takeDue(nowMillis: 600_000) == [])
        // Not taken since 600 s: due at 700 s is past the horizon, so it comes out by 631 s.
        wheel.schedule(99, dueMillis: 700_000)
        #expect(wheel.takeDue(nowMillis: 631_000) == [99])
    }

    @Test("a clock that went back gets every entry out once, and goes on from where it is")
    func clockBack() {
        var wheel = HeartbeatWheel<String>(tickMillis: 1_000, horizonMillis: 30_000, nowMillis: 100_000)
        wheel.schedule("before", dueMillis: 120_000)
        #expect(wheel.takeDue(nowMillis: 50_000) == ["before"])
        wheel.schedule("after", dueMillis: 60_000)
        #expect(wheel.takeDue(nowMillis: 59_999) == [])
        #expect(wheel.takeDue(nowMillis: 60_000) == ["after"])
    }
}
