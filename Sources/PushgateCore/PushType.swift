/// APNs push types (`apns-push-type`), with the topic suffix each requires.
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

    /// What `apns-topic` must end with for this type (the rest is the app's bundle id). `mdm`
    /// topics come from the MDM certificate and have no fixed suffix.
    public var topicSuffix: String? {
        switch self {
        case .alert, .background, .mdm: return nil
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
}

/// `apns-priority`.
public enum PushPriority: UInt8, Sendable, Hashable, Comparable {
    /// Never wakes the device: waits for a wake event.
    case low = 1
    /// Delivered with the device's power in mind.
    case normal = 5
    /// Delivered at once; wakes the device.
    case high = 10

    public static func < (lhs: PushPriority, rhs: PushPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}
