import PushgateProviderAuth

/// What a provider request must pass before validation: the gateway not draining, and
/// authentication. Shared by every connection; per-connection state lives in
/// `ProviderConnectionState`.
public struct ProviderGate: Sendable {
    public var authenticator: ProviderAuthenticator
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
        authenticator: ProviderAuthenticator,
        isDraining: @escaping @Sendable () -> Bool,
        maxConsecutiveErrors: Int = 100,
        nowMillis: @escaping @Sendable () -> Int64,
        counters: ProviderCounters = ProviderCounters()
    ) {
        self.authenticator = authenticator
        self.isDraining = isDraining
        self.maxConsecutiveErrors = maxConsecutiveErrors
        self.nowMillis = nowMillis
        self.counters = counters
    }
}

/// One provider connection's state, attached to the connection and used on its event loop only.
final class ProviderConnectionState {
    var auth: ProviderConnectionAuth
    /// The verified client certificate as a provider identity, when certificates are accepted.
    let certificate: CertificateProvider?
    var consecutiveErrors = 0

    init(auth: ProviderConnectionAuth, certificate: CertificateProvider?) {
        self.auth = auth
        self.certificate = certificate
    }
}
