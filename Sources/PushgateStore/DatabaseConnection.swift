import PushgateModel
import Synchronization

/// A database behind a network connection (PostgreSQL): whether the store holds a working
/// connection and what went wrong with it, for the metrics. SQLite has no connection to lose,
/// and no such status. Whether the store can commit is `StoreHealth`'s, as for a full disk.
public final class DatabaseConnectionStatus: Sendable {
    /// What went wrong, by kind: a bounded label set.
    public enum ErrorKind: String, Sendable, CaseIterable {
        /// A connection could not be made (refused, unreachable, authentication, TLS).
        case connect
        /// A working connection broke (the server restarted, the network failed).
        case connectionLost = "connection_lost"
        /// No answer within the statement timeout; the connection was dropped.
        case timeout
        /// The server refused a transaction for a reason of its own (no space, shutting down,
        /// read-only, a serialization failure, a permission): no batch of it was kept.
        case transaction
        /// A batch refused for its content (a constraint): that batch only.
        case batch
        /// The connection broke while a commit was on its way: whether it committed was
        /// unknown until a new connection asked the server.
        case commitUnknown = "commit_unknown"
    }

    private let connectedFlag = Atomic<Bool>(false)
    private let openConnections = Atomic<Int>(0)

    /// Errors by kind, since the store opened.
    public let errors = CounterFamily<ErrorKind>()

    public init() {}

    /// The store's connection works, as far as the last call on it knew.
    public var isConnected: Bool { connectedFlag.load(ordering: .relaxed) }

    /// Connections the store holds now (its writer's; briefly a second one while a commit's
    /// outcome is looked up).
    public var connections: Int { openConnections.load(ordering: .relaxed) }

    public func setConnected(_ connected: Bool) {
        connectedFlag.store(connected, ordering: .relaxed)
    }

    public func connectionOpened() { openConnections.add(1, ordering: .relaxed) }
    public func connectionClosed() { openConnections.subtract(1, ordering: .relaxed) }
}
