/// When an HTTP/2 server connection times out, how it shuts down and how many streams it allows,
/// as a state machine with no clock and no I/O: `HTTP2ServerHandler` feeds it what happened and
/// performs the `Actions` it returns (arming the timers, submitting the frames to nghttp2,
/// closing). Kept apart from the handler so that every transition can be tested without a socket
/// or an event loop (the model is swift-nio-http2's server connection management state machine).
///
/// A connection is active, then possibly finishing (a GOAWAY is decided and waits until every
/// open stream has been answered, or for the finish timer), then going away (GOAWAY sent:
/// nghttp2 finishes what is still open and the connection closes when it is done), then closed.
///
/// The GOAWAY waits because clients built on Python's `h2` (aioapns, httpx) take any GOAWAY as
/// the connection's end and fail on the frames after it: a response sent after the GOAWAY was
/// lost to them, and aioapns sent an accepted push again on a new connection. A stream a client
/// opens meanwhile is refused (REFUSED_STREAM: not processed, safe to retry), so that the open
/// ones run out; a stream opened after the GOAWAY is past its last stream ID, also unprocessed.
/// RFC 9113's shutdown notice (a first GOAWAY naming the highest stream ID) is not sent for the
/// same reason.
struct HTTP2ConnectionPolicy: Sendable {
    /// The connection's timers. Each runs at most once at a time; arming one that runs restarts it.
    struct Timers: OptionSet, Sendable, Hashable {
        let rawValue: UInt8

        /// No stream has been open for `idleTimeout`: GOAWAY.
        static let idle = Timers(rawValue: 1 << 0)
        /// A decided GOAWAY has waited `finishTimeout` for the open streams: it goes anyway.
        static let finish = Timers(rawValue: 1 << 1)
        /// The channel has been unwritable (the peer reads nothing) for `writeStallTimeout`.
        static let stall = Timers(rawValue: 1 << 2)
        /// The oldest request still arriving is `requestTimeout` old.
        static let request = Timers(rawValue: 1 << 3)
    }

    /// A frame (or frames) for the handler to submit to nghttp2 and flush.
    enum Submission: Equatable, Sendable {
        /// The connection's GOAWAY: NO_ERROR, the last stream processed, the reason's
        /// debug data.
        case goAway(GoAwayReason)
        /// SETTINGS lifting SETTINGS_MAX_CONCURRENT_STREAMS to the configured maximum.
        case fullConcurrency
        /// SETTINGS_HEADER_TABLE_SIZE 0: the peer stops indexing its header fields, and nghttp2
        /// frees the ones it indexed when the peer acknowledges.
        case noHeaderTable
    }

    /// Why the connection's last GOAWAY is sent.
    enum GoAwayReason: Equatable, Sendable {
        case idleTimeout
        case shutdown
        /// The application's (`ConnectionInfo.goAway(debugData:)`), with its own debug data.
        case application
    }

    /// What the handler does after an event, in the order of the fields. Plain values only (no
    /// debug data bytes): the handler gets one per stream opened and closed, so making and
    /// dropping it must cost no reference counting.
    struct Actions: Equatable, Sendable {
        var cancel: Timers = []
        var submit: Submission?
        /// Tell the streamed responses that the connection is shutting down, so that they end.
        var notifyShutdown = false
        var arm: Timers = []
        /// Close the channel now, without waiting for queued bytes.
        var close = false

        static var none: Actions { Actions() }
    }

    private enum State: Equatable, Sendable {
        case active
        case finishing(GoAwayReason)
        case goingAway
        case closed
    }

    private var state = State.active
    private var armed: Timers = []
    /// Streams the peer opened that have not closed: the idle timer runs only at zero.
    private(set) var openStreams = 0
    /// Still limited to `streamsUntilAuthorized` streams.
    private(set) var isGated: Bool
    /// The application has vouched for the peer: the idle timer runs for `idleTimeout`, not
    /// `unauthenticatedIdleTimeout`.
    private(set) var isAuthenticated: Bool
    /// `noHeaderTable` was submitted.
    private(set) var headerTableDropped = false
    private let idleTimeoutEnabled: Bool

    /// - Parameter gated: the connection starts limited to `streamsUntilAuthorized` streams.
    /// - Parameter authenticated: the peer is known from the start (a verified client certificate).
    /// - Parameter idleTimeout: whether idle connections are closed at all.
    init(gated: Bool, authenticated: Bool = false, idleTimeout: Bool) {
        self.isGated = gated
        self.isAuthenticated = authenticated
        self.idleTimeoutEnabled = idleTimeout
    }

    var isClosed: Bool { state == .closed }
    /// Finishing or going away: a streamed response started now should end soon.
    var isShuttingDown: Bool { state != .active && state != .closed }
    /// A GOAWAY waits for the open streams: a stream opened now is refused.
    var refusesNewStreams: Bool {
        if case .finishing = state { return true }
        return false
    }

    // MARK: Connection

    /// The session is ready.
    mutating func sessionStarted() -> Actions {
        armIdleTimer()
    }

    /// The connection is closing or closed, for whatever reason: no timer may fire any more.
    mutating func connectionClosed() -> Actions {
        state = .closed
        defer { armed = [] }
        return Actions(cancel: armed)
    }

    // MARK: Streams

    mutating func streamOpened() -> Actions {
        openStreams += 1
        return cancel(.idle)
    }

    mutating func streamClosed() -> Actions {
        // nghttp2 also closes streams that never got as far as a request (e.g. refused ones):
        // those were not counted.
        openStreams = max(0, openStreams - 1)
        guard openStreams == 0 else { return .none }
        // Finishing, the last answer is out: the GOAWAY follows it. Going away, the connection
        // closes once nghttp2 is done: no idleness to wait for.
        if case .finishing(let reason) = state { return goAway(reason) }
        return armIdleTimer()
    }

    mutating func idleTimerFired() -> Actions {
        guard fired(.idle), state == .active, openStreams == 0 else { return .none }
        return goAway(.idleTimeout)
    }

    // MARK: Shutdown

    /// Graceful shutdown: streamed responses are told to end, and the GOAWAY waits until every
    /// open stream has been answered (or for the finish timer).
    mutating func quiesceRequested() -> Actions {
        guard state == .active else { return .none }
        if openStreams == 0 { return goAway(.shutdown) }
        var actions = finish(.shutdown)
        actions.notifyShutdown = true
        return actions
    }

    mutating func finishTimerFired() -> Actions {
        guard fired(.finish), case .finishing(let reason) = state else { return .none }
        return goAway(reason)
    }

    /// The application ends the connection (`ConnectionInfo.goAway(debugData:)`): its GOAWAY,
    /// with its debug data, once the open streams (the one whose answer decided it among them)
    /// have been answered. It replaces a shutdown's GOAWAY still waiting.
    mutating func goAwayRequested() -> Actions {
        switch state {
        case .active: return finish(.application)
        case .finishing:
            state = .finishing(.application)
            return .none
        case .goingAway, .closed: return .none
        }
    }

    // MARK: Authentication

    /// The application vouches for the peer (`ConnectionInfo.markAuthenticated()`): a gated
    /// connection gets its full stream limit, and an idle timer that runs (for the shorter
    /// unauthenticated time) starts again for the full one. The application says so from another
    /// thread, so this may come after the stream that proved it has closed and armed the timer.
    mutating func peerAuthenticated() -> Actions {
        guard !isAuthenticated else { return .none }
        isAuthenticated = true
        guard state == .active else { return .none }
        var actions = Actions.none
        if isGated {
            isGated = false
            actions.submit = .fullConcurrency
        }
        if armed.contains(.idle) { actions.arm = .idle }
        return actions
    }

    /// The application routed the connection's first request, which says what it is for. A
    /// device's connection spends its life idle, holding one stream, and a gateway holds many:
    /// the HPACK table of its client's header fields (up to 4 KiB of them; about 1.5 KB of
    /// memory from Python's h2) costs more than the few bytes per request that indexing saves.
    /// Providers' connections, few and busy, keep theirs.
    mutating func classified(as role: ConnectionRole) -> Actions {
        guard role == .device, state == .active, !headerTableDropped else { return .none }
        headerTableDropped = true
        return Actions(submit: .noHeaderTable)
    }

    // MARK: Writability and requests

    mutating func writabilityChanged(isWritable: Bool) -> Actions {
        if isWritable { return cancel(.stall) }
        guard !armed.contains(.stall), state != .closed else { return .none }
        armed.insert(.stall)
        return Actions(arm: .stall)
    }

    /// The peer has read nothing for too long: the bytes queued for it will not leave either.
    mutating func stallTimerFired() -> Actions {
        guard fired(.stall), state != .closed else { return .none }
        return closeNow()
    }

    /// A read ended with requests whose headers or body are still arriving. Most requests arrive
    /// whole in one read: only these need the timer, so a busy connection does not schedule one
    /// per request.
    mutating func requestsArriving() -> Actions {
        guard !armed.contains(.request), state != .closed else { return .none }
        armed.insert(.request)
        return Actions(arm: .request)
    }

    /// No request is arriving any more. A device connection spends its life with its event
    /// stream open and no request arriving: a timer left armed would hold memory on each of them.
    mutating func noRequestsArriving() -> Actions {
        cancel(.request)
    }

    /// Returns whether the handler should reset the requests that are overdue; it then reports
    /// `requestsArriving()` again if some remain.
    mutating func requestTimerFired() -> Bool {
        fired(.request) && state != .closed
    }

    // MARK: Transitions

    /// A GOAWAY is decided: at once with no stream open, else once they have been answered.
    private mutating func finish(_ reason: GoAwayReason) -> Actions {
        if openStreams == 0 { return goAway(reason) }
        state = .finishing(reason)
        var actions = cancel(.idle)
        actions.arm = .finish
        armed.insert(.finish)
        return actions
    }

    /// The connection's last GOAWAY: no timer of the connection may fire after it.
    private mutating func goAway(_ reason: GoAwayReason) -> Actions {
        state = .goingAway
        var actions = cancel([.idle, .finish])
        actions.submit = .goAway(reason)
        return actions
    }

    private mutating func closeNow() -> Actions {
        var actions = connectionClosed()
        actions.close = true
        return actions
    }

    private mutating func armIdleTimer() -> Actions {
        guard idleTimeoutEnabled, state == .active, openStreams == 0 else { return .none }
        armed.insert(.idle)
        return Actions(arm: .idle)
    }

    /// Cancels those of `timers` that run.
    private mutating func cancel(_ timers: Timers) -> Actions {
        let running = armed.intersection(timers)
        guard !running.isEmpty else { return .none }
        armed.subtract(running)
        return Actions(cancel: running)
    }

    /// A timer went off: false if it was no longer armed (cancelled as it fired).
    private mutating func fired(_ timer: Timers) -> Bool {
        armed.remove(timer) != nil
    }
}
