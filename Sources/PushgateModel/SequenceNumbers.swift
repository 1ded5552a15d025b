/// A notification's sequence number, as agents send it back (`upTo`, a fetch result's `seq`,
/// `Last-Event-ID`): a whole number the store can keep. SQLite (and PostgreSQL's bigint) hold
/// signed 64-bit integers, so no notification ever has a seq above `Int64.max`; JSON libraries
/// with 64-bit integers send that range too.
public enum SequenceNumbers {
    public static let max = UInt64(Int64.max)

    /// "a whole number from 0 to 9223372036854775807", for an error's detail.
    public static let range = "a whole number from 0 to \(max)"

    /// `value` when it is in range; nil otherwise.
    public static func checked(_ value: UInt64) -> UInt64? { value <= max ? value : nil }
}
