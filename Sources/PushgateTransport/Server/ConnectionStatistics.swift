import Synchronization

/// Who a connection serves, as the application tells from the first request it routes.
public enum ConnectionRole: UInt8, Sendable, CaseIterable {
    case unclassified
    case provider
    case device
    case `operator`

    /// The metric label.
    public var name: String {
        switch self {
        case .unclassified: "unclassified"
        case .provider: "provider"
        case .device: "device"
        case .operator: "operator"
        }
    }
}

/// The server's open HTTP/2 connections by role and their open streams: gauges, moved as
/// connections and streams open and close (each by one relaxed atomic add); and the connections
/// closed for flooding, a counter.
public final class ConnectionStatistics: Sendable {
    private final class Value: Sendable {
        let count = Atomic<Int>(0)
    }

    private let byRole: [Value] = ConnectionRole.allCases.map { _ in Value() }
    private let streams = Atomic<Int>(0)
    private let floods = Atomic<Int>(0)

    public init() {}

    /// Open HTTP/2 connections that have this role now.
    public func connections(_ role: ConnectionRole) -> Int {
        byRole[Int(role.rawValue)].count.load(ordering: .relaxed)
    }

    /// Streams open now on every HTTP/2 connection.
    public var openStreams: Int { streams.load(ordering: .relaxed) }

    /// HTTP/2 connections closed since start for flooding: frames that do nothing past
    /// `HTTP2FrameFloodLimit`, unread acks past `HTTP2SessionLimits.maxOutboundAcks`,
    /// CONTINUATIONs past `maxContinuations`.
    public var floodClosures: Int { floods.load(ordering: .relaxed) }

    func floodClosed() {
        floods.add(1, ordering: .relaxed)
    }

    func add(_ role: ConnectionRole, _ delta: Int) {
        byRole[Int(role.rawValue)].count.add(delta, ordering: .relaxed)
    }

    func addStreams(_ delta: Int) {
        streams.add(delta, ordering: .relaxed)
    }
}
