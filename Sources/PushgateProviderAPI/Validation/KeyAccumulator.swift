/// Collects the first 24 unescaped bytes of a key into three words, so that a key can be compared
/// with the few keys validation cares about without allocating.
struct KeyAccumulator {
    var w0: UInt64 = 0
    var w1: UInt64 = 0
    var w2: UInt64 = 0
    /// Bytes appended; `Int.max / 2` once the key cannot match anything (non-ASCII, too long).
    var count = 0

    @inline(__always)
    mutating func append(byte: UInt8) {
        let k = count
        count = k &+ 1
        guard k < 24 else { return }
        let shifted = UInt64(byte) << UInt64((k & 7) * 8)
        switch k >> 3 {
        case 0: w0 |= shifted
        case 1: w1 |= shifted
        default: w2 |= shifted
        }
    }

    @inline(__always)
    mutating func append(scalar: UInt32) {
        if scalar < 0x80 { append(byte: UInt8(scalar)) } else { poison() }
    }

    @inline(__always)
    mutating func poison() { count = Int.max / 2 }

    @inline(__always)
    func equals(_ other: KeyAccumulator) -> Bool {
        count == other.count && w0 == other.w0 && w1 == other.w1 && w2 == other.w2
    }

    init() {}

    init(_ key: StaticString) {
        precondition(key.utf8CodeUnitCount <= 24)
        for k in 0..<key.utf8CodeUnitCount { append(byte: key.utf8Start[k]) }
    }

    static let aps = KeyAccumulator("aps")
    static let alert = KeyAccumulator("alert")
    static let badge = KeyAccumulator("badge")
    static let sound = KeyAccumulator("sound")
    static let contentAvailable = KeyAccumulator("content-available")
}
