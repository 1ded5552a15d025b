import PushgateModel

/// Notable moments of delivery as they happen, for the admin API's live stream: a push held, a
/// held push released, a notification dropped. Called on the shard's event loop: an
/// implementation must be quick and must not block; it bounds what it keeps itself.
public protocol DeliveryObserver: Sendable {
    /// Whether anyone listens now: delivery builds no event otherwise (one load per event).
    var isListening: Bool { get }

    func notable(_ event: NotableEvent)
}

public struct NotableEvent: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case held, released, dropped
    }

    public var kind: Kind
    /// Milliseconds since the epoch.
    public var time: Int64
    public var deviceID: String
    public var apnsID: String
    public var topic: String
    /// held: why; released: its delivery kind; dropped: its reason.
    public var detail: String
}
