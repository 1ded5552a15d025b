/// How a listener terminates TLS. Turned into a ``TLSContext`` with ``TLSContext/server(_:)``.
public struct TLSServerConfiguration: Sendable {
    /// PEM file with the server certificate first, then any intermediates.
    public var certificateChainPath: String
    /// PEM file with the private key of the first certificate in ``certificateChainPath``.
    public var privateKeyPath: String
    /// PEM file of CA certificates. When set, the server asks for a client certificate (naming these
    /// CAs) and refuses the handshake if the client presents one that does not verify against them.
    public var clientCAPath: String?
    /// Whether a client without a certificate is refused. Only meaningful with ``clientCAPath``; when
    /// false such a client is let in with no ``TLSHandler/peerCertificate`` and may authenticate
    /// some other way (for example with a token).
    public var requireClientCertificate: Bool
    /// ALPN protocols in server preference order. A client offering none of them gets no ALPN answer
    /// (the handshake goes on without a protocol); empty means the server ignores ALPN.
    public var alpnProtocols: [String]

    public init(
        certificateChainPath: String,
        privateKeyPath: String,
        clientCAPath: String? = nil,
        requireClientCertificate: Bool = false,
        alpnProtocols: [String] = ["h2", "http/1.1"]
    ) {
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
        self.clientCAPath = clientCAPath
        self.requireClientCertificate = requireClientCertificate
        self.alpnProtocols = alpnProtocols
    }
}

/// How an outgoing connection speaks TLS. Turned into a ``TLSContext`` with ``TLSContext/client(_:)``.
public struct TLSClientConfiguration: Sendable {
    /// PEM file of the CAs the server certificate must chain to; nil uses the system's default
    /// verify paths.
    public var trustRootsPath: String?
    /// PEM file with a client certificate (leaf first) to present when the server asks for one.
    /// Set together with ``privateKeyPath``.
    public var certificateChainPath: String?
    /// PEM file with the private key of ``certificateChainPath``.
    public var privateKeyPath: String?
    /// The host name sent as SNI and matched against the server certificate. An IP literal is matched
    /// against the certificate's IP addresses instead and sends no SNI (RFC 6066 forbids IPs there).
    /// Without a name only the certificate chain is verified. ``TLSHandler/init(context:serverName:)``
    /// can override it per connection.
    public var serverName: String?
    /// ALPN protocols to offer, in preference order; empty sends no ALPN extension at all.
    public var alpnProtocols: [String]
    /// Whether the server certificate must verify (chain and ``serverName``). Turning this off is for
    /// tests and debugging only: the connection is then open to anyone in the middle.
    public var verifyPeer: Bool

    public init(
        trustRootsPath: String? = nil,
        certificateChainPath: String? = nil,
        privateKeyPath: String? = nil,
        serverName: String? = nil,
        alpnProtocols: [String] = ["h2"],
        verifyPeer: Bool = true
    ) {
        self.trustRootsPath = trustRootsPath
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
        self.serverName = serverName
        self.alpnProtocols = alpnProtocols
        self.verifyPeer = verifyPeer
    }
}
