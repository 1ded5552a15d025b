/// Web Push's `Urgency` (RFC 8030 section 5.3), lowest first: what a message asks of the device's
/// power state. A push service never delivers a message below the urgency the device's state
/// allows, and never tells the device a message's urgency.
public enum WebPushUrgency: String, Sendable, Hashable, CaseIterable, Comparable {
    /// "On power and Wi-Fi": advertisements.
    case veryLow = "very-low"
    /// "On either power or Wi-Fi": topic updates.
    case low
    /// "On neither power nor Wi-Fi": chat or calendar messages. The default.
    case normal
    /// "Low battery": an incoming call, a time-sensitive alert.
    case high

    /// `low` and `very-low` are silent-class (the app's and device's silent budgets, held
    /// beyond them); `normal` and `high` are regular.
    public var pushClass: PushClass { self <= .low ? .silent : .regular }

    /// The APNs priority that stands for it where one is shown: 10 for `high` (delivered now, a
    /// wake event), 5 for the rest. The scheduler follows the urgency itself.
    public var priority: PushPriority { self == .high ? .high : .normal }

    private var rank: Int {
        switch self {
        case .veryLow: 0
        case .low: 1
        case .normal: 2
        case .high: 3
        }
    }

    public static func < (lhs: WebPushUrgency, rhs: WebPushUrgency) -> Bool { lhs.rank < rhs.rank }
}

extension DevicePower {
    /// The lowest urgency a device in this state takes (RFC 8030 section 5.3's table, over
    /// Pushgate's three states): `awake`, as a device on power and Wi-Fi, takes everything;
    /// `idle`, as a device on one of them, takes `low` and above; `lowPower` is the table's
    /// "low battery" and takes only `high`. No state stands for "neither power nor Wi-Fi", so no
    /// state sets the minimum at `normal`.
    public var minimumUrgency: WebPushUrgency {
        switch self {
        case .awake: .veryLow
        case .idle: .low
        case .lowPower: .high
        }
    }
}
