/// A token bucket as stored: its level at an instant. Levels are in 1/3,600,000 of a token, so a
/// refill of `r` tokens per hour adds exactly `r` units per millisecond and all bucket arithmetic is
/// exact integer arithmetic, with no drift between a live bucket and one restored from a snapshot.
public struct BucketSnapshot: Sendable, Hashable {
    public static let unitsPerToken: UInt32 = 3_600_000

    /// Units of 1/3,600,000 token.
    public var level: UInt32
    /// Milliseconds since the epoch at which the bucket held `level`; it refills from then on.
    public var at: Int64

    public init(level: UInt32, at: Int64) {
        self.level = level
        self.at = at
    }

    /// Whole tokens in the bucket at `at`.
    public var wholeTokens: Int { Int(level / Self.unitsPerToken) }
}

/// Bucket arithmetic over a stored (level, time) pair. Rates are in thousandths of a token per
/// hour (`milliPerHour`), so that a refill scaled by an app's fetch results (1.5 tokens an hour)
/// stays integer arithmetic; a whole-token rate `r` adds exactly `r` units per millisecond, as
/// before rates could be scaled.
enum TokenBucket {
    static let unit = BucketSnapshot.unitsPerToken

    /// The level at `now`. A `now` before `time` (a clock step back, or a snapshot from a clock
    /// ahead of ours) refills nothing, so a restart can never add budget that time did not.
    static func level(
        _ level: UInt32,
        at time: Int64,
        now: Int64,
        capacity: UInt32,
        milliPerHour rate: UInt64
    ) -> UInt32 {
        guard level < capacity, now > time, rate > 0 else { return min(level, capacity) }
        let (elapsed, overflow) = now.subtractingReportingOverflow(time)
        let missing = UInt64(capacity - level)
        let needed = (missing * 1000 + rate - 1) / rate
        if overflow || UInt64(elapsed) >= needed { return capacity }
        // elapsed < needed, so elapsed * rate < missing * 1000 + rate: no overflow.
        return level + UInt32(UInt64(elapsed) * rate / 1000)
    }

    /// When the bucket holds a whole token (`time` itself if it already did).
    static func tokenTime(_ level: UInt32, at time: Int64, milliPerHour rate: UInt64) -> Int64 {
        guard level < unit else { return time }
        guard rate > 0 else { return .max }
        let missing = UInt64(unit - level)
        let (due, overflow) = time.addingReportingOverflow(Int64((missing * 1000 + rate - 1) / rate))
        return overflow ? .max : due
    }
}
