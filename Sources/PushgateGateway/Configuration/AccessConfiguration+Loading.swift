import Logging
import PushgateProviderAuth

extension AccessConfiguration {
    /// Who may use the gateway, from its settings: provider keys (read from their files here),
    /// the APNs environment, the registration secret.
    public static func load(
        _ policy: GatewayConfiguration.PolicySettings,
        acceptsClientCertificates: Bool
    ) throws -> AccessConfiguration {
        var keys: [ProviderKey] = []
        for key in policy.providerKeys { keys.append(try key.load()) }
        let keyring = try ProviderKeyring(keys: keys, environment: policy.environment)
        if let secret = policy.registrationSecret, secret.count < 16 {
            throw GatewayConfigurationError("the registration secret must be at least 16 characters")
        }
        return AccessConfiguration(
            providers: ProviderAuthenticator(keyring: keyring, acceptsClientCertificates: acceptsClientCertificates),
            registrationSecret: policy.registrationSecret,
            maxConsecutiveProviderErrors: policy.maxConsecutiveProviderErrors
        )
    }

    /// Who may use the gateway, as the start-up log says it (no secret, only whether one is set).
    var logMetadata: Logger.Metadata {
        [
            "providers.keys": "\(providers.keyring.keys.map(\.keyID))",
            "providers.client_certificates": "\(providers.acceptsClientCertificates)",
            "devices.registration_secret": "\(registrationSecret != nil)",
        ]
    }
}
