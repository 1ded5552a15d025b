import Foundation
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateProviderAuth
import PushgateTLS
import PushgateTransport

/// Everything a gateway runs with, however it was given: `serve`'s flags, the environment and
/// the configuration file are read into this, checked, and handed to `Gateway.run`.
public struct GatewayConfiguration: Sendable {
    /// Cleartext listeners (h2c and HTTP/1.1 by sniffing); `127.0.0.1:2197` when no listener
    /// of either kind is given.
    public var listen: [ListenAddress] = []
    /// TLS listeners (ALPN h2 and http/1.1); they need `tls`.
    public var tlsListen: [ListenAddress] = []
    public var tls: TLSFiles?
    /// The SQLite store's directory (created if missing).
    public var dataDirectory = "./pushgate-data"
    /// Seconds a connection with no open stream is kept.
    public var idleTimeoutSeconds = 300
    /// Seconds in-flight requests get to finish on shutdown.
    public var shutdownTimeoutSeconds = 10
    /// Event-loop threads.
    public var threads = System.coreCount
    public var access = AccessConfiguration()
    public var delivery = DeliveryConfiguration()

    public init() {}

    /// The certificate and key of the TLS listeners, and how client certificates are checked.
    public struct TLSFiles: Sendable {
        public var certificateChain: String
        public var privateKey: String
        /// Verify client certificates against this CA; a client without one is still served.
        public var clientCA: String?
        /// Refuse TLS clients without a valid certificate (needs `clientCA`).
        public var requireClientCertificate = false

        public init(certificateChain: String, privateKey: String, clientCA: String? = nil, requireClientCertificate: Bool = false) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
            self.clientCA = clientCA
            self.requireClientCertificate = requireClientCertificate
        }
    }

    /// The cleartext listeners, with the default when none of either kind is given.
    public var cleartextListeners: [ListenAddress] {
        listen.isEmpty && tlsListen.isEmpty ? [ListenAddress(host: "127.0.0.1", port: 2197)] : listen
    }

    /// What cannot run, said in the flags' terms. (`Gateway.run` then checks exposure.)
    public func validate() throws {
        if !tlsListen.isEmpty, tls == nil {
            throw GatewayConfigurationError("--tls-listen needs --tls-cert and --tls-key")
        }
        if tls?.requireClientCertificate == true, tls?.clientCA == nil {
            throw GatewayConfigurationError("--tls-require-client-cert needs --tls-client-ca")
        }
        if threads < 1 { throw GatewayConfigurationError("--threads must be at least 1") }
        if idleTimeoutSeconds < 1 { throw GatewayConfigurationError("--idle-timeout must be at least 1 second") }
        if shutdownTimeoutSeconds < 0 { throw GatewayConfigurationError("--shutdown-timeout cannot be negative") }
    }

    /// Secure by default: what is open to anyone may only listen on loopback addresses.
    func checkExposure() throws(AccessExposureError) {
        try access.checkExposure(listenHosts: (cleartextListeners + tlsListen).map(\.host))
    }

    /// The listeners to bind, in order: cleartext, then TLS (one context shared by all of them).
    func listenerConfigurations() throws -> [ListenerConfiguration] {
        var listeners = cleartextListeners.map { ListenerConfiguration(host: $0.host, port: $0.port) }
        if !tlsListen.isEmpty, let tls {
            let context = try TLSContext.server(
                TLSServerConfiguration(
                    certificateChainPath: tls.certificateChain,
                    privateKeyPath: tls.privateKey,
                    clientCAPath: tls.clientCA,
                    requireClientCertificate: tls.requireClientCertificate
                )
            )
            listeners += tlsListen.map { ListenerConfiguration(host: $0.host, port: $0.port, tls: context) }
        }
        return listeners
    }

    /// The transport's settings that follow from this configuration.
    var server: HTTPServerConfiguration {
        var server = HTTPServerConfiguration()
        server.http2.idleTimeout = .seconds(Int64(idleTimeoutSeconds))
        server.http2.streamsUntilAuthorized = access.streamsUntilAuthorized
        return server
    }
}

public struct GatewayConfigurationError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
