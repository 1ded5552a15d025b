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

/// A limit on time that ended a connection or a request (each configurable: HTTPServerConfiguration,
/// HTTP2ServerConfiguration).
public enum ServerTimeout: UInt8, Sendable, CaseIterable {
    /// `connectionSetupTimeout`: TLS unfinished, or no protocol shown (a stalled handshake).
    case connectionSetup
    /// `idleTimeout`, or `unauthenticatedIdleTimeout` before the peer has proven itself; over
    /// HTTP/1.1 also a request head trickled too slowly.
    case idle
    /// `requestTimeout`: a request whose head and body had not arrived (an HTTP/2 stream reset,
    /// an HTTP/1.1 connection closed).
    case request
    /// `writeStallTimeout`: an HTTP/2 peer that read nothing while answers waited for it.
    case stalledReader

    /// The metric label.
    public var name: String {
        switch self {
        case .connectionSetup: "connection_setup"
        case .idle: "idle"
        case .request: "request"
        case .stalledReader: "stalled_reader"
        }
    }
}

/// The server's open HTTP/2 connections by role and their open streams: gauges, moved as
/// connections and streams open and close (each by one relaxed atomic add); the connections
/// closed for flooding and what each timeout ended, counters.
public final class ConnectionStatistics: Sendable {
    private final class Value: Sendable {
        let count = Atomic<Int>(0)
    }

    private let byRole: [Value] = ConnectionRole.allCases.map { _ in Value() }
    private let streams = Atomic<Int>(0)
    private let floods = Atomic<Int>(0)
    private let timeouts: [Value] = ServerTimeout.allCases.map { _ in Value() }

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

    /// Connections closed, or HTTP/2 requests reset, since start because `timeout` ran out.
    public func timedOut(_ timeout: ServerTimeout) -> Int {
        timeouts[Int(timeout.rawValue)].count.load(ordering: .relaxed)
    }

    func count(_ timeout: ServerTimeout) {
        timeouts[Int(timeout.rawValue)].count.add(1, ordering: .relaxed)
    }

    func add(_ role: ConnectionRole, _ delta: Int) {
        byRole[Int(role.rawValue)].count.add(delta, ordering: .relaxed)
    }

    func addStreams(_ delta: Int) {
        streams.add(delta, ordering: .relaxed)
    }
}
