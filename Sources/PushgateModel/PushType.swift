/// APNs push types (`apns-push-type`), with the topic suffix each requires, and `webpush`: a Web
/// Push message (RFC 8030), which comes by its own route and never by `apns-push-type`.
public enum PushType: String, Sendable, CaseIterable, Hashable {
    case alert
    case background
    case complication
    case controls
    case fileprovider
    case liveactivity
    case location
    case mdm
    case pushtotalk
    case voip
    case widgets
    /// A Web Push message: its class follows its urgency (`Push.pushClass`).
    case webpush

    /// The types `apns-push-type` may name.
    public static let apnsTypes = allCases.filter { $0 != .webpush }

    /// What `apns-topic` must end with for this type (the rest is the app's bundle id). `mdm`
    /// topics come from the MDM certificate and have no fixed suffix.
    public var topicSuffix: String? {
        switch self {
        case .alert, .background, .mdm, .webpush: return nil
        case .complication: return ".complication"
        case .controls: return ".push-type.controls"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .location: return ".location-query"
        case .pushtotalk: return ".voip-ptt"
        case .voip: return ".voip"
        case .widgets: return ".push-type.widgets"
        }
    }

    /// Largest payload APNs accepts for this type.
    public var maxPayloadBytes: Int { self == .voip ? 5120 : 4096 }

    /// Background pushes are silent (PRODUCT.md section 1: a push without `apns-push-type` whose
    /// `aps` has only `content-available: 1` is validated into `background`); every other APNs
    /// type is regular. A Web Push message's class is its urgency's (`Push.pushClass`).
    public var pushClass: PushClass { self == .background ? .silent : .regular }
}

/// Silent pushes are budgeted and held by the scheduler; regular ones are scheduled by priority.
public enum PushClass: UInt8, Sendable, Hashable {
    case silent
    case regular
}

/// `apns-priority`.
public enum PushPriority: UInt8, Sendable, Hashable, Comparable {
    /// 1: never wakes the device; waits for a wake event.
    case low = 1
    /// 5: delivered at once when the device is awake, else deferred.
    case normal = 5
    /// 10: delivered at once; a wake event for the device.
    case high = 10

    public static func < (lhs: PushPriority, rhs: PushPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}
