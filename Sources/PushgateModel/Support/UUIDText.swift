/// UUIDs as text.
public enum UUIDText {
    /// A random (version 4, RFC 9562 variant) UUID in lowercase canonical form, from 128 random
    /// bits (version and variant bits are overwritten): a generated `apns-id`, a Web Push
    /// message's id.
    public static func v4(_ bits: (UInt64, UInt64)) -> String {
        let high = (bits.0 & ~0xF000) | 0x4000
        let low = (bits.1 & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return String(unsafeUninitializedCapacity: 36) { buffer in
            let digits: StaticString = "0123456789abcdef"
            let d = digits.utf8Start
            var out = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    buffer[out] = UInt8(ascii: "-")
                    out += 1
                }
                let word = nibble < 16 ? high : low
                let shift = UInt64(60 - (nibble & 15) * 4)
                buffer[out] = d[Int((word >> shift) & 0xF)]
                out += 1
            }
            return out
        }
    }
}
