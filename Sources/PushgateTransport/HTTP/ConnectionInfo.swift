import NIOCore
import PushgateTLS
import Synchronization

/// What the application may know about the connection a request came on.
public final class ConnectionInfo: Sendable {
    public enum HTTPVersion: String, Sendable {
        case http1_1 = "HTTP/1.1"
        case http2 = "HTTP/2"
    }

    /// Process-unique, for logs and for binding per-connection state (e.g. provider tokens).
    public let id: UInt64
    public let remoteAddress: SocketAddress?
    public let localAddress: SocketAddress?
    public let httpVersion: HTTPVersion
    public let isTLS: Bool
    /// The ALPN protocol, nil for cleartext or a TLS client that offered no ALPN.
    public let negotiatedProtocol: String?
    /// The client certificate, present only when one was presented and verified.
    public let peerCertificate: PeerCertificate?
    /// The loop the connection lives on: request handlers are called here, and `attachment`
    /// may only be used here.
    public let eventLoop: any EventLoop
    private let local: NIOLoopBound<LocalState>
    /// Set by the first `markAuthenticated` (or a verified client certificate): callers on every
    /// device request (from any thread) then cost one atomic load, not a hop to the connection's
    /// loop.
    private let authenticated: Atomic<Bool>
    private let role = Atomic<UInt8>(ConnectionRole.unclassified.rawValue)
    /// Where an HTTP/2 connection counts itself by role; nil for HTTP/1.1 and in tests.
    let statistics: ConnectionStatistics?

    public init(
        id: UInt64,
        remoteAddress: SocketAddress?,
        localAddress: SocketAddress?,
        httpVersion: HTTPVersion,
        isTLS: Bool,
        negotiatedProtocol: String?,
        peerCertificate: PeerCertificate?,
        eventLoop: any EventLoop,
        statistics: ConnectionStatistics? = nil
    ) {
        self.id = id
        self.remoteAddress = remoteAddress
        self.localAddress = localAddress
        self.httpVersion = httpVersion
        self.isTLS = isTLS
        self.negotiatedProtocol = negotiatedProtocol
        self.peerCertificate = peerCertificate
        self.eventLoop = eventLoop
        self.local = NIOLoopBound(LocalState(), eventLoop: eventLoop)
        self.statistics = statistics
        self.authenticated = Atomic(peerCertificate != nil)
        statistics?.add(.unclassified, 1)
    }

    /// The role of the connection, from the first request the application routed; later ones
    /// do not change it. One atomic load once classified. A device's HTTP/2 connection then
    /// asks its client to stop indexing header fields (`HTTP2ConnectionPolicy.classified(as:)`).
    public func classify(as role: ConnectionRole) {
        guard role != .unclassified, self.role.load(ordering: .relaxed) == ConnectionRole.unclassified.rawValue else {
            return
        }
        let (exchanged, _) = self.role.compareExchange(
            expected: ConnectionRole.unclassified.rawValue,
            desired: role.rawValue,
            ordering: .relaxed
        )
        guard exchanged else { return }
        statistics?.add(.unclassified, -1)
        statistics?.add(role, 1)
        onLoop { $0.control?.classified(as: role) }
    }

    /// The connection ended: it no longer counts.
    func closed() {
        statistics?.add(ConnectionRole(rawValue: role.load(ordering: .relaxed)) ?? .unclassified, -1)
    }

    /// Per-connection state of the application (for example a provider's verified tokens),
    /// created on first use and dropped with the connection. Only on `eventLoop`.
    public func attachment<T: AnyObject>(_ type: T.Type = T.self, orInsert make: () -> T) -> T {
        let state = local.value
        if let existing = state.attachments[ObjectIdentifier(type)] as? T { return existing }
        let created = make()
        state.attachments[ObjectIdentifier(type)] = created
        return created
    }

    /// The peer has proven who it is (a provider token or certificate, a device secret, the
    /// registration secret, the admin token or a loopback operator): a connection that started
    /// gated gets its full stream limit (`HTTP2ServerConfiguration.streamsUntilAuthorized`), and
    /// idles for `idleTimeout` rather than `unauthenticatedIdleTimeout`. From any thread;
    /// idempotent.
    public func markAuthenticated() {
        guard !authenticated.load(ordering: .relaxed), !authenticated.exchange(true, ordering: .relaxed) else { return }
        onLoop { $0.control?.peerAuthenticated() }
    }

    /// Whether `markAuthenticated()` was called, or the peer presented a verified certificate.
    public var isAuthenticated: Bool { authenticated.load(ordering: .relaxed) }

    /// Ends the connection as APNs does: GOAWAY carrying `debugData` (APNs sends
    /// `{"reason": ...}`); streams already open finish, then the connection closes. From any
    /// thread; nothing on HTTP/1.1 (the routes that need it are HTTP/2 only).
    public func goAway(debugData: [UInt8]) {
        onLoop { $0.control?.goAway(debugData: debugData) }
    }

    /// The protocol handler registers itself here when it is added to the pipeline, and
    /// withdraws when it is removed (on the loop, before it can go away).
    func install(control: (any ConnectionControl)?) {
        local.value.control = control
    }

    private func onLoop(_ body: @escaping @Sendable (LocalState) -> Void) {
        if eventLoop.inEventLoop {
            body(local.value)
        } else {
            let local = self.local
            eventLoop.execute { body(local.value) }
        }
    }

    private final class LocalState {
        var attachments: [ObjectIdentifier: AnyObject] = [:]
        /// Not weak: a weak reference would give the handler a side table (memory on every
        /// connection, and slower reference counting on every request).
        unowned(unsafe) var control: (any ConnectionControl)?
    }
}

/// What the application may ask of the connection's protocol handler. On its event loop.
protocol ConnectionControl: AnyObject {
    func peerAuthenticated()
    /// The connection's role is known (once).
    func classified(as role: ConnectionRole)
    func goAway(debugData: [UInt8])
}
