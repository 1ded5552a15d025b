import NIOConcurrencyHelpers
import Synchronization

/// The provider authentication in force, replaced when the operator reloads the provider keys.
/// A request reads one atomic generation; only after a replacement does its connection take the
/// new authenticator (and start its token checks over), so a removed key stops working on open
/// connections too, not only on new ones.
public final class ProviderAuthenticatorSource: Sendable {
    private let authenticator: NIOLockedValueBox<ProviderAuthenticator>
    private let changes = Atomic<UInt64>(0)

    public init(_ authenticator: ProviderAuthenticator) {
        self.authenticator = NIOLockedValueBox(authenticator)
    }

    /// Grows by one at each replacement.
    public var generation: UInt64 { changes.load(ordering: .acquiring) }

    public var current: (authenticator: ProviderAuthenticator, generation: UInt64) {
        authenticator.withLockedValue { ($0, changes.load(ordering: .relaxed)) }
    }

    public func replace(with authenticator: ProviderAuthenticator) {
        self.authenticator.withLockedValue {
            $0 = authenticator
            changes.add(1, ordering: .releasing)
        }
    }
}
