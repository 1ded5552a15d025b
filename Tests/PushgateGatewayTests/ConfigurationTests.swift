import PushgateGateway
import PushgateProviderAuth
import PushgateTransport
import Testing

/// The gateway's configuration model, as `serve` fills it.
@Suite("Gateway configuration")
struct ConfigurationTests {
    @Test("no listener given: cleartext on 127.0.0.1:2197; a TLS listener alone means no cleartext one")
    func defaultListener() {
        var configuration = GatewayConfiguration()
        #expect(configuration.cleartextListeners == [ListenAddress(host: "127.0.0.1", port: 2197)])
        configuration.tlsListen = [ListenAddress(host: "127.0.0.1", port: 8443)]
        #expect(configuration.cleartextListeners.isEmpty)
    }

    enum Fault: CaseIterable, Sendable {
        case tlsWithoutFiles, filesWithoutTLS, requiredClientCertWithoutCA, logLevel, noThreads, noIdleTimeout, negativeShutdown

        func apply(to configuration: inout GatewayConfiguration) {
            switch self {
            case .tlsWithoutFiles: configuration.tlsListen = [ListenAddress(host: "127.0.0.1", port: 1)]
            case .filesWithoutTLS: configuration.tlsClientCA = "ca.pem"
            case .requiredClientCertWithoutCA: configuration.tlsRequireClientCertificate = true
            case .logLevel: configuration.logLevel = "loud"
            case .noThreads: configuration.threads = 0
            case .noIdleTimeout: configuration.idleTimeoutSeconds = 0
            case .negativeShutdown: configuration.shutdownTimeoutSeconds = -1
            }
        }

        var message: String {
            switch self {
            case .tlsWithoutFiles: "--tls-listen needs --tls-cert and --tls-key"
            case .filesWithoutTLS: "--tls-cert, --tls-key and --tls-client-ca apply to TLS listeners; add --tls-listen HOST:PORT"
            case .requiredClientCertWithoutCA: "--tls-require-client-cert needs --tls-client-ca"
            case .logLevel: "--log-level must be one of: trace, debug, info, notice, warning, error, critical"
            case .noThreads: "--threads must be at least 1"
            case .noIdleTimeout: "--idle-timeout must be at least 1 second"
            case .negativeShutdown: "--shutdown-timeout cannot be negative"
            }
        }
    }

    @Test("several faults: the first in serve's order is reported")
    func order() {
        var configuration = GatewayConfiguration()
        for fault in Fault.allCases.reversed() { fault.apply(to: &configuration) }
        #expect(throws: GatewayConfigurationError(Fault.tlsWithoutFiles.message)) { try configuration.validate() }
    }

    @Test("what cannot run is refused in the flags' terms", arguments: Fault.allCases)
    func refused(fault: Fault) {
        var configuration = GatewayConfiguration()
        fault.apply(to: &configuration)
        #expect(throws: GatewayConfigurationError(fault.message)) { try configuration.validate() }
    }

    @Test("a registration secret shorter than 16 characters is refused")
    func registrationSecret() throws {
        var policy = GatewayConfiguration.PolicySettings()
        policy.registrationSecret = "short"
        #expect(throws: GatewayConfigurationError.self) {
            try AccessConfiguration.load(policy, acceptsClientCertificates: false)
        }
        policy.registrationSecret = "a-long-enough-secret"
        let access = try AccessConfiguration.load(policy, acceptsClientCertificates: false)
        #expect(access.registrationSecret == "a-long-enough-secret")
        #expect(access.providers.isUnauthenticated)
    }
}
