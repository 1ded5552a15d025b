import PushgateModel
import PushgateProviderAuth
import PushgateTLS

/// What a provider request must pass before validation: the gateway not draining, and
/// authentication. Shared by every connection; per-connection state lives in
/// `ProviderConnectionState`.
public struct ProviderGate: Sendable {
    /// Replaced by a reload; each connection follows it (`ProviderConnectionState.follow`).
    public var providers: ProviderAuthenticatorSource
    /// True once a graceful shutdown has begun: requests then get `503 Shutdown`, as from APNs.
    public var isDraining: @Sendable () -> Bool
    /// A connection whose requests fail this many times in a row (4xx other than 410, as APNs
    /// counts "error conditions", and other than 429, the gateway's own limits) is sent GOAWAY
    /// with the last reason and closed. 0: never.
    public var maxConsecutiveErrors: Int
    /// Milliseconds since the epoch, for token ages. Injected so tests control time.
    public var nowMillis: @Sendable () -> Int64
    /// Where every push received and every refusal is counted.
    public var counters: ProviderCounters

    public init(
        providers: ProviderAuthenticatorSource,
        isDraining: @escaping @Sendable () -> Bool,
        maxConsecutiveErrors: Int = 100,
        nowMillis: @escaping @Sendable () -> Int64,
        counters: ProviderCounters = ProviderCounters()
    ) {
        self.providers = providers
        self.isDraining = isDraining
        self.maxConsecutiveErrors = maxConsecutiveErrors
        self.nowMillis = nowMillis
        self.counters = counters
    }
}

/// One provider connection's state, attached to the connection and used on its event loop only.
final class ProviderConnectionState {
    /// The authentication this connection's requests pass, and its generation in the gate's source.
    private(set) var authenticator: ProviderAuthenticator
    private var generation: UInt64
    var auth: ProviderConnectionAuth
    /// The verified client certificate as a provider identity, when certificates are accepted.
    let certificate: CertificateProvider?
    var consecutiveErrors = 0

    init(providers: ProviderAuthenticatorSource, peerCertificate: PeerCertificate?) {
        (authenticator, generation) = providers.current
        auth = authenticator.makeConnectionState()
        certificate =
            authenticator.acceptsClientCertificates
            ? peerCertificate.map { CertificateProvider(userID: $0.userID, subject: $0.subject) }
            : nil
    }

    /// Takes the source's authenticator if a reload replaced it since: the connection's token
    /// is then checked again against the keys now in force.
    func follow(_ providers: ProviderAuthenticatorSource) {
        guard providers.generation != generation else { return }
        (authenticator, generation) = providers.current
        auth = authenticator.makeConnectionState()
    }
}
