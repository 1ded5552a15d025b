import Synchronization

/// The context a listener's new connections get. Replacing it (the operator reloaded the
/// certificate) changes nothing for open connections: each keeps the context it started with.
public final class TLSContextSource: Sendable {
    private let context: Mutex<TLSContext>

    public init(_ context: TLSContext) {
        self.context = Mutex(context)
    }

    public var current: TLSContext { context.withLock { $0 } }

    public func replace(with context: TLSContext) {
        self.context.withLock { $0 = context }
    }
}
