import Foundation
import Logging
import PushgateProviderAuth

extension AccessConfiguration {
    /// Who may use the gateway, from the configuration file (its keys resolved against its own
    /// directory), keys given as flags (added to the file's), and the registration secret (the
    /// file's, else `PUSHGATE_REGISTRATION_SECRET`).
    public static func load(
        file: ConfigurationFile?,
        filePath: String?,
        flagKeys: [ProviderKeyConfiguration],
        acceptsClientCertificates: Bool,
        environment: [String: String]
    ) throws -> AccessConfiguration {
        let directory = filePath.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
        var gatewayEnvironment: ProviderEnvironment?
        if let name = file?.environment {
            guard let parsed = ProviderEnvironment(rawValue: name) else {
                throw ConfigurationFileError(path: filePath ?? "", problem: "environment must be \"development\" or \"production\", got \"\(name)\"")
            }
            gatewayEnvironment = parsed
        }
        var keys: [ProviderKey] = []
        for key in file?.providerKeys ?? [] { keys.append(try key.load(relativeTo: directory)) }
        for key in flagKeys { keys.append(try key.load()) }
        let keyring = try ProviderKeyring(keys: keys, environment: gatewayEnvironment)
        let secret = file?.registrationSecret ?? environment["PUSHGATE_REGISTRATION_SECRET"]
        if let secret, secret.count < 16 {
            throw GatewayConfigurationError("the registration secret must be at least 16 characters")
        }
        return AccessConfiguration(
            providers: ProviderAuthenticator(keyring: keyring, acceptsClientCertificates: acceptsClientCertificates),
            registrationSecret: secret,
            maxConsecutiveProviderErrors: file?.maxConsecutiveProviderErrors ?? 100
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
