/// Base64url without padding (RFC 4648 §5), as JWS uses it (RFC 7515 §2).
///
/// Decoding is strict so that one byte string has exactly one accepted spelling: `=` padding, the
/// standard alphabet's `+` and `/`, whitespace, a length that leaves a single dangling character,
/// and non-zero bits in the last character's unused low bits are all rejected.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            out.append(alphabet[Int(group >> 18 & 0x3F)])
            out.append(alphabet[Int(group >> 12 & 0x3F)])
            if second != nil { out.append(alphabet[Int(group >> 6 & 0x3F)]) }
            if third != nil { out.append(alphabet[Int(group & 0x3F)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes `text` encodes, or nil when it is not canonical unpadded base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let characters = text.utf8
        guard characters.count % 4 != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(characters.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in characters {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Leftover bits are padding inside the last character; a canonical encoder leaves them zero.
        guard accumulator == 0 else { return nil }
        return out
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}
