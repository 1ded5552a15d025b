/// A well-formed UTF-8 sequence by its lead byte, as Unicode's table 3-7 has it: no overlong
/// forms, no surrogates, nothing above U+10FFFF. The one definition both JSON readers use (the
/// payload scanner on the push path, `JSONDocument` for everything else), so that they agree on
/// what is text.
public struct UTF8Sequence: Sendable {
    /// Continuation bytes after the lead.
    public let trailing: Int
    /// The range the first continuation byte must be in (the rest: 0x80...0xBF).
    public let secondLow: UInt8
    public let secondHigh: UInt8

    /// Nil for a byte that cannot start a multi-byte sequence (ASCII, a continuation byte, C0,
    /// C1, F5 and above).
    @inlinable
    public init?(lead: UInt8) {
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: trailing = 1
        case 0xE0:
            trailing = 2
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: trailing = 2
        case 0xED:
            trailing = 2
            high = 0x9F
        case 0xF0:
            trailing = 3
            low = 0x90
        case 0xF1...0xF3: trailing = 3
        case 0xF4:
            trailing = 3
            high = 0x8F
        default: return nil
        }
        secondLow = low
        secondHigh = high
    }

    /// Whether `byte` may be the continuation byte at `offset` (0: the first after the lead).
    @inlinable
    public func accepts(_ byte: UInt8, at offset: Int) -> Bool {
        offset == 0 ? byte >= secondLow && byte <= secondHigh : byte >= 0x80 && byte <= 0xBF
    }
}
