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
        case tlsWithoutFiles, noThreads, noIdleTimeout, negativeShutdown, requiredClientCertWithoutCA

        func apply(to configuration: inout GatewayConfiguration) {
            let tlsListener = [ListenAddress(host: "127.0.0.1", port: 1)]
            switch self {
            case .tlsWithoutFiles: configuration.tlsListen = tlsListener
            case .noThreads: configuration.threads = 0
            case .noIdleTimeout: configuration.idleTimeoutSeconds = 0
            case .negativeShutdown: configuration.shutdownTimeoutSeconds = -1
            case .requiredClientCertWithoutCA:
                configuration.tlsListen = tlsListener
                configuration.tls = .init(certificateChain: "c", privateKey: "k", requireClientCertificate: true)
            }
        }

        var message: String {
            switch self {
            case .tlsWithoutFiles: "--tls-listen needs --tls-cert and --tls-key"
            case .noThreads: "--threads must be at least 1"
            case .noIdleTimeout: "--idle-timeout must be at least 1 second"
            case .negativeShutdown: "--shutdown-timeout cannot be negative"
            case .requiredClientCertWithoutCA: "--tls-require-client-cert needs --tls-client-ca"
            }
        }
    }

    @Test("what cannot run is refused in the flags' terms", arguments: Fault.allCases)
    func refused(fault: Fault) {
        var configuration = GatewayConfiguration()
        fault.apply(to: &configuration)
        do {
            try configuration.validate()
            Issue.record("accepted")
        } catch {
            #expect(error is GatewayConfigurationError)
            #expect("\(error)" == fault.message)
        }
    }

    @Test("a registration secret shorter than 16 characters is refused; the environment supplies one")
    func registrationSecret() throws {
        #expect(throws: GatewayConfigurationError.self) {
            try AccessConfiguration.load(
                file: nil, filePath: nil, flagKeys: [], acceptsClientCertificates: false,
                environment: ["PUSHGATE_REGISTRATION_SECRET": "short"]
            )
        }
        let access = try AccessConfiguration.load(
            file: nil, filePath: nil, flagKeys: [], acceptsClientCertificates: false,
            environment: ["PUSHGATE_REGISTRATION_SECRET": "a-long-enough-secret"]
        )
        #expect(access.registrationSecret == "a-long-enough-secret")
        #expect(access.providers.isUnauthenticated)
    }
}
