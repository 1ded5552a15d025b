import NIOCore

/// How many frames that make the server work for nothing one HTTP/2 connection may send: a
/// token bucket of `burst` frames refilled at `perSecond`. A plain value with the time passed
/// in; `HTTP2ServerHandler` keeps one per connection with its event loop's clock.
///
/// Such frames are an empty DATA frame that does not end its stream and a frame nghttp2 refuses
/// with a stream error (a request without pseudo-headers, a stream past the concurrency limit).
/// nghttp2 1.52 bounds unread PING and SETTINGS acks and CONTINUATIONs itself but not these (later
/// versions call them glitches): without a limit one connection sent 13 million empty DATA frames
/// a second for as long as it liked, and one sending empty header blocks had about 300,000
/// streams a second refused until nghttp2's reset limit ended it after 1.4 s (Benchmarks/abuse.py
/// empty-data and empty-headers against fce5e2c).
public struct HTTP2FrameFloodLimit: Sendable {
    let burst: Int
    let perSecond: Int
    /// In billionths of a frame, so that a refill of `perSecond` per second is exact per nanosecond.
    private var tokens: Int64
    private var refilledAt: NIODeadline?

    public static let maxBurst = 1_000_000
    public static let maxPerSecond = 1_000_000
    private static let frame: Int64 = 1_000_000_000

    init(burst: Int, perSecond: Int) {
        precondition((1...Self.maxBurst).contains(burst) && (1...Self.maxPerSecond).contains(perSecond))
        self.burst = burst
        self.perSecond = perSecond
        tokens = Int64(burst) * Self.frame
    }

    /// Takes one frame's token; false when the connection is past its allowance.
    mutating func take(now: NIODeadline) -> Bool {
        if let refilledAt {
            let elapsed = max(0, (now - refilledAt).nanoseconds)
            let missing = Int64(burst) * Self.frame - tokens
            // Compared before multiplying: a long quiet spell times the rate would overflow.
            tokens =
                elapsed >= (missing + Int64(perSecond) - 1) / Int64(perSecond)
                ? Int64(burst) * Self.frame : tokens + elapsed * Int64(perSecond)
        }
        refilledAt = max(refilledAt ?? now, now)
        guard tokens >= Self.frame else { return false }
        tokens -= Self.frame
        return true
    }
}
