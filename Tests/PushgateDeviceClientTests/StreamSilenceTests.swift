import PushgateDeviceClient
import Testing

/// When the agent gives up a stream that went quiet: twice the gateway's heartbeat interval and
/// a margin after the last bytes, never sooner; instants are made, not waited for.
@Suite("Stream silence")
struct StreamSilenceTests {
    static let opened = ContinuousClock.now

    @Test("twice the announced interval and 5 s after the last bytes the connection is dead, not a millisecond sooner")
    func limitFromHeader() {
        var silence = StreamSilence(heartbeatIntervalHeader: "10", openedAt: Self.opened)
        #expect(silence.heartbeatSeconds == 10)
        #expect(silence.limit == .seconds(25))
        #expect(!silence.isDead(at: Self.opened + .seconds(25) - .milliseconds(1)))
        #expect(silence.isDead(at: Self.opened + .seconds(25)))

        silence.heard(at: Self.opened + .seconds(20))
        #expect(silence.deadline == Self.opened + .seconds(45))
        #expect(!silence.isDead(at: Self.opened + .seconds(44)))
        #expect(silence.isDead(at: Self.opened + .seconds(45)))
    }

    @Test("bytes reported out of order do not move the deadline back")
    func heardOutOfOrder() {
        var silence = StreamSilence(heartbeatIntervalHeader: "10", openedAt: Self.opened)
        silence.heard(at: Self.opened + .seconds(20))
        silence.heard(at: Self.opened + .seconds(5))
        #expect(silence.deadline == Self.opened + .seconds(45))
    }

    @Test(
        "a missing or unusable header means the gateway's default, 30 s: dead after 65 s",
        arguments: [
            nil, "", "abc", "0", "-5", "3601", "25.5", "1e3",
        ] as [String?]
    )
    func defaultInterval(header: String?) {
        let silence = StreamSilence(heartbeatIntervalHeader: header, openedAt: Self.opened)
        #expect(silence.heartbeatSeconds == 30)
        #expect(silence.limit == .seconds(65))
    }

    @Test("the agent's message names the silence and the interval")
    func message() {
        let silence = StreamSilence(heartbeatIntervalHeader: "2", openedAt: Self.opened)
        #expect("\(silence.failure)".contains("for 9 s, though the gateway writes to it at least every 2 s"))
    }
}
