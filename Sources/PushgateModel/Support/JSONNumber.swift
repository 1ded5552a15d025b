/// What a JSON number must be beyond RFC 8259's grammar: a value a Double can hold. Foundation's
/// reader, and so a device's, refuses one that overflows (`1e309`, `1000e306`), while any tiny
/// one reads as 0. The provider payload scanner and `JSONDocument` both ask this.
public enum JSONNumber {
    /// Whether `number`, already checked against the grammar, reads as a finite Double. Decided
    /// from its decimal magnitude without allocating, but for a number of magnitude 10^308
    /// exactly, which only Double's own parser can settle.
    public static func isFinite<Bytes: RandomAccessCollection>(_ number: Bytes) -> Bool
    where Bytes.Element == UInt8, Bytes.Index == Int {
        func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }
        // The position of the first significant digit relative to the decimal point, and the
        // exponent, saturated far beyond any finite Double's.
        var k = number.startIndex
        let end = number.endIndex
        if k < end, number[k] == UInt8(ascii: "-") { k += 1 }
        var integerDigits = 0
        var leadingFractionZeros = 0
        var significant = false
        while k < end, isDigit(number[k]) {
            if significant || number[k] != UInt8(ascii: "0") {
                significant = true
                integerDigits += 1
            }
            k += 1
        }
        if k < end, number[k] == UInt8(ascii: ".") {
            k += 1
            while k < end, isDigit(number[k]) {
                if !significant {
                    if number[k] == UInt8(ascii: "0") { leadingFractionZeros += 1 } else { significant = true }
                }
                k += 1
            }
        }
        guard significant else { return true }  // zero, whatever its exponent
        var exponent = 0
        if k < end {  // 'e' or 'E'
            k += 1
            var negative = false
            if k < end, number[k] == UInt8(ascii: "+") || number[k] == UInt8(ascii: "-") {
                negative = number[k] == UInt8(ascii: "-")
                k += 1
            }
            while k < end {
                exponent = min(exponent * 10 + Int(number[k] &- UInt8(ascii: "0")), 1_000_000)
                k += 1
            }
            if negative { exponent = -exponent }
        }
        // The number lies in [10^magnitude, 10^(magnitude + 1)); Double's largest is 1.797...e308.
        let magnitude = (integerDigits > 0 ? integerDigits - 1 : -(leadingFractionZeros + 1)) + exponent
        if magnitude != 308 { return magnitude < 308 }
        return Double(String(decoding: number, as: UTF8.self))?.isFinite == true
    }
}
