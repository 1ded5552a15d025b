import NIOCore
import PushgateTLS

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

    public init(
        id: UInt64,
        remoteAddress: SocketAddress?,
        localAddress: SocketAddress?,
        httpVersion: HTTPVersion,
        isTLS: Bool,
        negotiatedProtocol: String?,
        peerCertificate: PeerCertificate?
    ) {
        self.id = id
        self.remoteAddress = remoteAddress
        self.localAddress = localAddress
        self.httpVersion = httpVersion
        self.isTLS = isTLS
        self.negotiatedProtocol = negotiatedProtocol
        self.peerCertificate = peerCertificate
    }
}
