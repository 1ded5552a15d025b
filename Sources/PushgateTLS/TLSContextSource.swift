import NIOConcurrencyHelpers

/// The context a listener's new connections get. Replacing it (the operator reloaded the
/// certificate) changes nothing for open connections: each keeps the context it started with.
public final class TLSContextSource: Sendable {
    private let context: NIOLockedValueBox<TLSContext>

    public init(_ context: TLSContext) {
        self.context = NIOLockedValueBox(context)
    }

    public var current: TLSContext { context.withLockedValue { $0 } }

    public func replace(with context: TLSContext) {
        self.context.withLockedValue { $0 = context }
    }
}
