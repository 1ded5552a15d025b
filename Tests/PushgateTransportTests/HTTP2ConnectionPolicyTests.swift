import Testing

@testable import PushgateTransport

/// The connection policy alone: events in, actions out, no socket, no event loop, no clock.
@Suite("HTTP/2 connection policy")
struct HTTP2ConnectionPolicyTests {
    typealias Actions = HTTP2ConnectionPolicy.Actions

    /// A started connection with `streams` open.
    private func policy(gated: Bool = false, idleTimeout: Bool = true, streams: Int = 0) -> HTTP2ConnectionPolicy {
        var policy = HTTP2ConnectionPolicy(gated: gated, idleTimeout: idleTimeout)
        _ = policy.sessionStarted()
        for _ in 0..<streams { _ = policy.streamOpened() }
        return policy
    }

    // MARK: Idle

    @Test("a started connection arms the idle timer; without an idle timeout, nothing")
    func startArmsIdle() {
        var policy = HTTP2ConnectionPolicy(gated: false, idleTimeout: true)
        #expect(policy.sessionStarted() == Actions(arm: .idle))
        var never = HTTP2ConnectionPolicy(gated: false, idleTimeout: false)
        #expect(never.sessionStarted() == .none)
        #expect(never.streamOpened() == .none)
        #expect(never.streamClosed() == .none)
    }

    @Test("the first stream cancels the idle timer, the last one to close arms it again")
    func streamsCancelAndArmIdle() {
        var policy = policy()
        #expect(policy.streamOpened() == Actions(cancel: .idle))
        #expect(policy.streamOpened() == .none)
        #expect(policy.openStreams == 2)
        #expect(policy.streamClosed() == .none)
        #expect(policy.streamClosed() == Actions(arm: .idle))
        #expect(policy.openStreams == 0)
    }

    @Test("a stream closing that was never counted restarts the idle timer and leaves the count at 0")
    func uncountedStreamClose() {
        var policy = policy()
        #expect(policy.streamClosed() == Actions(arm: .idle))
        #expect(policy.openStreams == 0)
    }

    @Test("idle timer fires: GOAWAY IdleTimeout; the connection is going away, nothing more fires")
    func idleToGoAway() {
        var policy = policy()
        #expect(policy.idleTimerFired() == Actions(submit: .goAway(.idleTimeout)))
        #expect(policy.isShuttingDown)
        #expect(policy.idleTimerFired() == .none)
        #expect(policy.quiesceRequested() == .none)
        #expect(policy.goAwayRequested() == .none)
        // The streams the peer opened before it saw the GOAWAY finish; the connection does not
        // wait to be idle again.
        #expect(policy.streamOpened() == .none)
        #expect(policy.streamClosed() == .none)
    }

    @Test("an idle timer that fires after a stream opened (cancelled as it fired) does nothing")
    func idleFiredAfterCancel() {
        var policy = policy()
        #expect(policy.streamOpened() == Actions(cancel: .idle))
        #expect(policy.idleTimerFired() == .none)
        #expect(!policy.isShuttingDown)
    }

    // MARK: Graceful shutdown

    @Test("quiesce with no stream open: the GOAWAY at once, the idle timer cancelled")
    func quiesceWithoutStreams() {
        var policy = policy()
        #expect(
            policy.quiesceRequested()
                == Actions(cancel: .idle, submit: .goAway(.shutdown))
        )
        #expect(policy.isShuttingDown && !policy.refusesNewStreams)
        #expect(policy.quiesceRequested() == .none)
        #expect(policy.finishTimerFired() == .none)
    }

    @Test(
        "quiesce with streams open: no GOAWAY yet (h2 clients take any GOAWAY as the end), streamed responses told, new streams refused, the finish timer armed"
    )
    func quiesceWithStreams() {
        var policy = policy(streams: 2)
        #expect(policy.quiesceRequested() == Actions(notifyShutdown: true, arm: .finish))
        #expect(policy.isShuttingDown && policy.refusesNewStreams)
        #expect(policy.quiesceRequested() == .none)
        // Streams opened meanwhile (to be refused) count until they close.
        #expect(policy.streamOpened() == .none)
        #expect(policy.streamClosed() == .none)
        #expect(policy.streamClosed() == .none)
    }

    @Test("the last open stream answered brings the GOAWAY and cancels the finish timer; a late timer does nothing")
    func quiesceLastStreamClosed() {
        var policy = policy(streams: 2)
        _ = policy.quiesceRequested()
        #expect(policy.streamClosed() == .none)
        #expect(policy.streamClosed() == Actions(cancel: .finish, submit: .goAway(.shutdown)))
        #expect(!policy.refusesNewStreams)
        #expect(policy.finishTimerFired() == .none)
        #expect(policy.streamOpened() == .none)
        #expect(policy.streamClosed() == .none)
    }

    @Test("streams still open when the finish timer fires: the GOAWAY goes anyway, once")
    func quiesceTimeout() {
        var policy = policy(streams: 1)
        _ = policy.quiesceRequested()
        #expect(policy.finishTimerFired() == Actions(submit: .goAway(.shutdown)))
        #expect(policy.finishTimerFired() == .none)
        #expect(policy.streamClosed() == .none)
    }

    // MARK: GOAWAY from the application

    @Test("goAway with no stream open: GOAWAY with the application's debug data at once, the idle timer cancelled")
    func goAwayWhileActive() {
        var policy = policy()
        #expect(policy.goAwayRequested() == Actions(cancel: .idle, submit: .goAway(.application)))
        #expect(policy.goAwayRequested() == .none)
        #expect(policy.idleTimerFired() == .none)
    }

    @Test("goAway with the deciding stream still open: its GOAWAY once that stream's answer is out, never before")
    func goAwayAfterTheAnswers() {
        var policy = policy(streams: 1)
        #expect(policy.goAwayRequested() == Actions(arm: .finish))
        #expect(policy.refusesNewStreams)
        #expect(policy.streamClosed() == Actions(cancel: .finish, submit: .goAway(.application)))
    }

    @Test("goAway while a shutdown's GOAWAY waits replaces it: the application's debug data goes")
    func goAwayWhileFinishingShutdown() {
        var policy = policy(streams: 1)
        _ = policy.quiesceRequested()
        #expect(policy.goAwayRequested() == .none)
        #expect(policy.finishTimerFired() == Actions(submit: .goAway(.application)))
        #expect(policy.quiesceRequested() == .none)
    }

    // MARK: Authentication

    @Test(
        "vouching for the peer once: a gated connection gets the full stream limit; the idle timer that runs starts again (for the full time)"
    )
    func authentication() {
        var gated = policy(gated: true)
        #expect(gated.isGated && !gated.isAuthenticated)
        #expect(gated.peerAuthenticated() == Actions(submit: .fullConcurrency, arm: .idle))
        #expect(!gated.isGated && gated.isAuthenticated)
        #expect(gated.peerAuthenticated() == .none)

        var open = policy(gated: false)
        #expect(open.peerAuthenticated() == Actions(arm: .idle))
        #expect(open.isAuthenticated)

        // With a stream open (the one that proved it) no idle timer runs: closing it arms one.
        var busy = policy(gated: true, streams: 1)
        #expect(busy.peerAuthenticated() == Actions(submit: .fullConcurrency))
        #expect(busy.streamClosed() == Actions(arm: .idle))

        var certified = HTTP2ConnectionPolicy(gated: false, authenticated: true, idleTimeout: true)
        _ = certified.sessionStarted()
        #expect(certified.peerAuthenticated() == .none)
    }

    // MARK: Classification

    @Test("a device's connection drops its peer's header table once; a provider's or an operator's keeps it")
    func deviceConnectionDropsHeaderTable() {
        var device = policy(gated: false)
        #expect(device.classified(as: .device) == Actions(submit: .noHeaderTable))
        #expect(device.headerTableDropped)
        #expect(device.classified(as: .device) == .none)

        for role in [ConnectionRole.provider, .operator, .unclassified] {
            var other = policy(gated: false)
            #expect(other.classified(as: role) == .none)
            #expect(!other.headerTableDropped)
        }

        var closing = policy(streams: 1)
        _ = closing.quiesceRequested()
        #expect(closing.classified(as: .device) == .none)
    }

    @Test("vouched for once the connection is shutting down: nothing is sent or armed")
    func authenticatedWhileShuttingDown() {
        var policy = policy(gated: true, streams: 1)
        _ = policy.quiesceRequested()
        #expect(policy.peerAuthenticated() == .none)
        #expect(policy.isGated)
    }

    // MARK: Write stall

    @Test("unwritable arms the stall timer once; writable cancels it")
    func stallArmAndCancel() {
        var policy = policy()
        #expect(policy.writabilityChanged(isWritable: false) == Actions(arm: .stall))
        #expect(policy.writabilityChanged(isWritable: false) == .none)
        #expect(policy.writabilityChanged(isWritable: true) == Actions(cancel: .stall))
        #expect(policy.writabilityChanged(isWritable: true) == .none)
        #expect(policy.stallTimerFired() == .none)
    }

    @Test("the stall timer closes the connection at once and cancels every other timer")
    func stallCloses() {
        var policy = policy(streams: 1)
        _ = policy.requestsArriving()
        _ = policy.quiesceRequested()
        _ = policy.writabilityChanged(isWritable: false)
        #expect(policy.stallTimerFired() == Actions(cancel: [.finish, .request], close: true))
        #expect(policy.isClosed)
        #expect(policy.writabilityChanged(isWritable: false) == .none)
    }

    // MARK: Request timer

    @Test("requests arriving arm the request timer once; none arriving cancels it")
    func requestTimer() {
        var policy = policy(streams: 1)
        #expect(policy.requestsArriving() == Actions(arm: .request))
        #expect(policy.requestsArriving() == .none)
        #expect(policy.noRequestsArriving() == Actions(cancel: .request))
        #expect(policy.noRequestsArriving() == .none)
    }

    @Test("the request timer firing asks for the overdue requests once; it is armed again on demand")
    func requestTimerFires() {
        var policy = policy(streams: 1)
        _ = policy.requestsArriving()
        #expect(policy.requestTimerFired() == true)
        #expect(policy.requestTimerFired() == false)
        #expect(policy.requestsArriving() == Actions(arm: .request))
    }

    // MARK: Closed

    @Test("closing cancels the running timers; afterwards no event does anything")
    func closed() {
        var policy = policy(streams: 1)
        _ = policy.requestsArriving()
        _ = policy.writabilityChanged(isWritable: false)
        #expect(policy.connectionClosed() == Actions(cancel: [.stall, .request]))
        #expect(policy.isClosed)
        #expect(!policy.isShuttingDown)
        #expect(policy.connectionClosed() == .none)
        #expect(policy.streamClosed() == .none)
        #expect(policy.quiesceRequested() == .none)
        #expect(policy.goAwayRequested() == .none)
        #expect(policy.requestsArriving() == .none)
        #expect(policy.requestTimerFired() == false)
        #expect(policy.idleTimerFired() == .none)
    }

    @Test("closing an idle connection cancels its idle timer")
    func closedIdle() {
        var policy = policy()
        #expect(policy.connectionClosed() == Actions(cancel: .idle))
    }
}
