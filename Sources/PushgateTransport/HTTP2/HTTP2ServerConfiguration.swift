import NIOCore

/// Per-connection limits and timeouts of the HTTP/2 server side.
public struct HTTP2ServerConfiguration: Sendable {
    public var session: HTTP2SessionLimits = {
        var limits = HTTP2SessionLimits()
        limits.maxDeflateDynamicTableSize = 0
        return limits
    }()
    /// The ceiling of a request body, whatever the application admits it with
    /// (`RequestAdmission`): a larger one is answered `413` as soon as its bytes go past it.
    public var maxRequestBodySize = 1024 * 1024
    /// Request body bytes one connection may hold at once, across all its streams. A stream that
    /// would go over is refused (RST_STREAM REFUSED_STREAM): without this, 1,000 streams each
    /// sending just under `maxRequestBodySize` would cost a gigabyte.
    public var maxBufferedRequestBytes = 8 * 1024 * 1024
    /// A request whose headers and body have not fully arrived this long after it began is reset.
    public var requestTimeout: TimeAmount = .seconds(30)
    /// A connection with no open stream for this long is sent GOAWAY and closed. HTTP/1.1
    /// connections close after as long without a request.
    public var idleTimeout: TimeAmount? = .seconds(300)
    /// Replaces `idleTimeout` until the application vouches for the peer
    /// (`ConnectionInfo.markAuthenticated()`), on HTTP/2 and HTTP/1.1: an idle connection that has
    /// proven nothing holds a file descriptor and memory for a shorter time. Nil: `idleTimeout`
    /// throughout.
    public var unauthenticatedIdleTimeout: TimeAmount?
    /// Up to this fraction of the idle timeouts is added, drawn once per connection, HTTP/2 and
    /// HTTP/1.1: connections opened together (clients back after an outage, a flood of idle
    /// connections) then do not all close in the same millisecond, and their clients do not all
    /// come back in the next. 0: exactly the timeouts.
    public var idleTimeoutSpread = 0.0
    /// A connection whose socket stays unwritable this long (the peer reads nothing) is closed.
    public var writeStallTimeout: TimeAmount = .seconds(60)
    /// Once a connection is closing, how long its last bytes get to leave before it is cut.
    public var closeTimeout: TimeAmount = .seconds(5)
    /// Serialized frames are handed to the channel in chunks of at most this many bytes; the
    /// channel's writability then stops further serialization, which bounds output memory.
    public var outputChunkSize = 64 * 1024
    /// How long a decided GOAWAY (graceful shutdown, the application's) waits for the open
    /// streams to be answered before it is sent anyway; nghttp2 still finishes those streams.
    public var goAwayFinishTimeout: TimeAmount = .seconds(5)
    /// When set, a new connection may have only this many streams open until the application
    /// calls `ConnectionInfo.markAuthenticated()`; then SETTINGS raise the limit to
    /// `session.maxConcurrentStreams`. APNs allows one stream until a valid provider token has
    /// been seen. A connection with a verified client certificate starts with the full limit.
    public var streamsUntilAuthorized: UInt32?
    /// Frames that do nothing (`HTTP2FrameFloodLimit`) one connection may send at once, and how
    /// many more a second; past them it ends with GOAWAY ENHANCE_YOUR_CALM. nghttp2 1.61's
    /// defaults for the same frames (its glitches).
    public var floodBurst = 1000
    public var floodFramesPerSecond = 33

    public init() {}
}

/// One copy of the configuration for all of a server's connections: stored inline, its couple
/// of hundred bytes would be repeated in each of thousands of idle connections.
final class SharedHTTP2ServerConfiguration: Sendable {
    let configuration: HTTP2ServerConfiguration

    init(_ configuration: HTTP2ServerConfiguration) {
        self.configuration = configuration
    }
}

extension HTTP2ServerConfiguration {
    /// A connection's idle timeouts: `idleTimeout` and `unauthenticatedIdleTimeout`, each
    /// lengthened by the same random part of `idleTimeoutSpread`.
    func idleTimeoutsOfOneConnection() -> (idle: TimeAmount?, unauthenticated: TimeAmount?) {
        guard idleTimeoutSpread > 0 else { return (idleTimeout, unauthenticatedIdleTimeout) }
        let stretch = 1 + Double.random(in: 0...idleTimeoutSpread)
        // Saturating: a timeout near TimeAmount's limit (a configuration meaning "never") must
        // not trap every connection in the conversion back from Double.
        func stretched(_ timeout: TimeAmount?) -> TimeAmount? {
            timeout.map { .nanoseconds(Int64(exactly: (Double($0.nanoseconds) * stretch).rounded(.down)) ?? .max) }
        }
        return (stretched(idleTimeout), stretched(unauthenticatedIdleTimeout))
    }
}
