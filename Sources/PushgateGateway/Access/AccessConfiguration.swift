import PushgateProviderAuth

/// Who may use the gateway: provider keys and certificates, and who may create devices.
public struct AccessConfiguration: Sendable {
    /// Provider authentication (token keys and/or client certificates). Empty: unauthenticated.
    public var providers: ProviderAuthenticator
    /// Needed (as `authorization: bearer ...`) to create devices; nil: device creation is open.
    public var registrationSecret: String?
    /// See `ProviderGate.maxConsecutiveErrors`.
    public var maxConsecutiveProviderErrors: Int

    public init(
        providers: ProviderAuthenticator = ProviderAuthenticator(keyring: .empty, acceptsClientCertificates: false),
        registrationSecret: String? = nil,
        maxConsecutiveProviderErrors: Int = 100
    ) {
        self.providers = providers
        self.registrationSecret = registrationSecret
        self.maxConsecutiveProviderErrors = maxConsecutiveProviderErrors
    }

    /// APNs' one-stream-until-authenticated rule, for every connection of a gateway that
    /// authenticates providers (device requests with a valid secret lift it too).
    public var streamsUntilAuthorized: UInt32? {
        providers.isUnauthenticated ? nil : 1
    }

    /// Secure by default: what is open to anyone (unauthenticated providers, open device
    /// creation) may only be served on loopback addresses. Throws, naming the settings to add,
    /// when a listener is reachable from elsewhere.
    public func checkExposure(listenHosts: [String]) throws(AccessExposureError) {
        let exposed = listenHosts.filter { !Self.isLoopback($0) }
        guard !exposed.isEmpty else { return }
        var missing: [String] = []
        if providers.isUnauthenticated {
            missing.append(
                "provider authentication (providerKeys in the config file or --provider-key; or --tls-client-ca for client certificates)"
            )
        }
        if registrationSecret == nil {
            missing.append(
                "a device registration secret (--registration-secret-file, PUSHGATE_REGISTRATION_SECRET_FILE or registrationSecretFile in the config file; or the secret itself: --registration-secret, PUSHGATE_REGISTRATION_SECRET, registrationSecret)"
            )
        }
        guard !missing.isEmpty else { return }
        throw AccessExposureError(exposedHosts: exposed, missing: missing)
    }

    static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if bare == "localhost" || bare == "::1" { return true }
        let parts = bare.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}

/// The gateway would be open to the network: it refuses to start, saying what to configure.
public struct AccessExposureError: Error, CustomStringConvertible, Equatable {
    public var exposedHosts: [String]
    public var missing: [String]

    public var description: String {
        "refusing to listen on \(exposedHosts.joined(separator: ", ")) (not loopback) without "
            + missing.joined(separator: " and ")
            + ". Configure them, or listen on 127.0.0.1 / ::1 only."
    }
}
