import PushgateModel

/// Chooses, per request, how a provider proves who it is, from what the gateway is configured
/// with and what the connection presented.
///
/// | connection | keys configured | client CA | rules |
/// |---|---|---|---|
/// | client certificate | any | yes | ``CertificateProvider`` (the `authorization` header is ignored, as at APNs) |
/// | none | yes | any | tokens, ``ProviderConnectionAuth`` |
/// | none | none | yes | `403 MissingProviderToken`: only certificates are accepted |
/// | none | none | no | unauthenticated; `apns-topic` still required (`400 MissingTopic`) |
///
/// Immutable and shareable between event loops; the per-connection state is
/// ``ProviderConnectionAuth``, made by ``makeConnectionState()``.
public struct ProviderAuthenticator: Sendable {
    public let keyring: ProviderKeyring
    public let acceptsClientCertificates: Bool

    public init(keyring: ProviderKeyring, acceptsClientCertificates: Bool) {
        self.keyring = keyring
        self.acceptsClientCertificates = acceptsClientCertificates
    }

    /// Neither provider keys nor a client CA: every request is let through. The gateway allows
    /// this only when every listener is on a loopback address.
    public var isUnauthenticated: Bool { keyring.isEmpty && !acceptsClientCertificates }

    public func makeConnectionState() -> ProviderConnectionAuth {
        ProviderConnectionAuth(keyring: keyring)
    }

    /// Whether a connection has to post a valid token before it gets more than one stream
    /// (APNs' rule for token connections). When true, watch
    /// ``ProviderConnectionAuth/hasValidToken`` after each request.
    public func requiresToken(certificate: CertificateProvider?) -> Bool {
        certificate == nil && !isUnauthenticated
    }

    /// Authorizes one request. `certificate` is the connection's verified client certificate, if
    /// any; `authorization` and `topic` are the request's header values.
    public func authorize(
        certificate: CertificateProvider?,
        authorization: String?,
        topic: String?,
        connection: inout ProviderConnectionAuth,
        nowMillis: Int64
    ) -> Result<AuthorizedProvider, Refusal> {
        if let certificate {
            return certificate.authorize(topic: topic)
        }
        if !keyring.isEmpty {
            let verdict = connection.authorize(authorization: authorization, topic: topic, nowMillis: nowMillis)
            // Where certificates are accepted too, a provider without a token may have meant to use one.
            if authorization == nil, acceptsClientCertificates, case .failure(var refusal) = verdict,
                refusal.reason == .missingProviderToken
            {
                refusal.detail += ", or connect over TLS with a client certificate from the operator's CA"
                return .failure(refusal)
            }
            return verdict
        }
        if acceptsClientCertificates {
            return .failure(
                Refusal(
                    .missingProviderToken,
                    "this gateway accepts providers by client certificate only; connect over TLS with a certificate from the operator's CA"
                )
            )
        }
        guard let topic else {
            return .failure(Refusal(.missingTopic, "no apns-topic header; name the app's topic"))
        }
        return .success(AuthorizedProvider(identity: .unauthenticated, topic: topic))
    }
}
