import PushgateModel

/// What an app did with its last wakes, and the score the refill follows: the rule of the
/// adaptive budget, in one place.
///
/// The score is the mean of the last 16 results, each weighted: `newData` 1, `noData` 0.75,
/// `failed` 0.25, `timeout` 0; an app with no result yet scores 1. It is monotone: a better result
/// in place of a worse one never lowers it, and it forgets: after 16 results nothing older counts.
/// The app's refill is its configured refill times the score, halved while a timeout's penalty
/// runs, never below the floor (`minRefillPerHour`) and never above the configured refill.
public struct FetchHistory: Sendable, Hashable {
    public static let capacity = 16

    /// Thousandths of a token of score each result is worth.
    public static func weight(of result: FetchResult) -> UInt32 {
        switch result {
        case .newData: 1000
        case .noData: 750
        case .failed: 250
        case .timeout: 0
        }
    }

    /// The last results, two bits each, the newest in the lowest bits.
    public private(set) var packed: UInt32
    public private(set) var count: UInt8
    /// The sum of the last results' weights, kept with them: the score is its mean.
    private var weightSum: UInt16

    public init() {
        packed = 0
        count = 0
        weightSum = 0
    }

    /// The score in thousandths (1000 = 1), rounded down.
    public var score: UInt16 { count == 0 ? 1000 : weightSum / UInt16(count) }

    /// `rate` times the exact score (not the rounded one: 3/h at 7.5/9 is 2.5/h, not 2.499).
    func scaled(_ rate: UInt64) -> UInt64 {
        count == 0 ? rate : rate * UInt64(weightSum) / (UInt64(count) * 1000)
    }

    /// A history as stored; nil when `count` is out of range.
    public init?(packed: UInt32, count: Int) {
        guard (0...Self.capacity).contains(count) else { return nil }
        self.packed = count == Self.capacity ? packed : packed & ((1 << (2 * UInt32(count))) - 1)
        self.count = UInt8(count)
        weightSum = 0
        weightSum = computedSum()
    }

    public mutating func record(_ result: FetchResult) {
        packed = packed << 2 | Self.code(of: result)
        count = min(count + 1, UInt8(Self.capacity))
        weightSum = computedSum()
    }

    /// The results, newest first.
    public var results: [FetchResult] {
        (0..<Int(count)).map { Self.result(ofCode: packed >> (2 * UInt32($0)) & 3) }
    }

    /// How many of the last results were `result`.
    public func count(of result: FetchResult) -> Int {
        results.filter { $0 == result }.count
    }

    private func computedSum() -> UInt16 {
        var sum: UInt32 = 0
        for index in 0..<UInt32(count) {
            sum += Self.weight(of: Self.result(ofCode: packed >> (2 * index) & 3))
        }
        return UInt16(sum)
    }

    private static func code(of result: FetchResult) -> UInt32 {
        switch result {
        case .newData: 0
        case .noData: 1
        case .failed: 2
        case .timeout: 3
        }
    }

    private static func result(ofCode code: UInt32) -> FetchResult {
        switch code {
        case 0: .newData
        case 1: .noData
        case 2: .failed
        default: .timeout
        }
    }
}
