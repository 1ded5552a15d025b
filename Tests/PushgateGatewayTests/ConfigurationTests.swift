import Logging
import PushgateCrypto
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
        case tlsWithoutFiles, filesWithoutTLS, requiredClientCertWithoutCA, logLevel, noThreads, tooManyThreads,
            noIdleTimeout
        case idleTimeoutBeyondAYear
        case unauthenticatedIdleTimeoutBeyondAYear, negativeShutdown

        func apply(to configuration: inout GatewayConfiguration) {
            switch self {
            case .tlsWithoutFiles: configuration.tlsListen = [ListenAddress(host: "127.0.0.1", port: 1)]
            case .filesWithoutTLS: configuration.tlsClientCA = "ca.pem"
            case .requiredClientCertWithoutCA: configuration.tlsRequireClientCertificate = true
            case .logLevel: configuration.logLevel = "loud"
            case .noThreads: configuration.threads = 0
            // Past the process's thread or descriptor limits serve trapped at start.
            case .tooManyThreads: configuration.threads = 100_000
            case .noIdleTimeout: configuration.idleTimeoutSeconds = 0
            // Written to mean "never": refused, naming the range.
            case .idleTimeoutBeyondAYear: configuration.idleTimeoutSeconds = 9_999_999_999
            case .unauthenticatedIdleTimeoutBeyondAYear:
                configuration.unauthenticatedIdleTimeoutSeconds = 365 * 24 * 3600 + 1
            case .negativeShutdown: configuration.shutdownTimeoutSeconds = -1
            }
        }

        var message: String {
            switch self {
            case .tlsWithoutFiles: "--tls-listen needs --tls-cert and --tls-key"
            case .filesWithoutTLS:
                "--tls-cert, --tls-key and --tls-client-ca apply to TLS listeners; add --tls-listen HOST:PORT"
            case .requiredClientCertWithoutCA: "--tls-require-client-cert needs --tls-client-ca"
            case .logLevel: "--log-level must be one of: trace, debug, info, notice, warning, error, critical"
            case .noThreads, .tooManyThreads: "--threads must be between 1 and 1024"
            case .noIdleTimeout, .idleTimeoutBeyondAYear:
                "--idle-timeout must be between 1 and 31536000 seconds (365 days)"
            case .unauthenticatedIdleTimeoutBeyondAYear:
                "--unauthenticated-idle-timeout must be between 1 and 31536000 seconds (365 days)"
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

    /// Everything the exposure check asks for off loopback (a provider key, a registration
    /// secret), so that only cleartext can stop `prepare`.
    static func authenticated(listen host: String, admin: Bool = false) throws -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        let listener = [ListenAddress(host: host, port: 2197)]
        if admin {
            configuration.listen = [ListenAddress(host: "127.0.0.1", port: 2197)]
            configuration.adminListen = listener
        } else {
            configuration.listen = listener
        }
        configuration.policy.registrationSecret = "a-registration-secret-for-tests"
        configuration.policy.providerKeys = [
            ProviderKeyConfiguration(
                teamID: "TEAM000001",
                keyID: "KEY0000001",
                publicKey: try ES256PrivateKey.generate().publicKey.pemRepresentation,
                topics: ["com.example.app"]
            )
        ]
        return configuration
    }

    static let quiet = {
        var logger = Logger(label: "configuration-test")
        logger.logLevel = .critical
        return logger
    }()

    @Test(
        "cleartext on loopback serves: 127.0.0.0/8, ::1, localhost",
        arguments: ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "localhost"]
    )
    func cleartextOnLoopback(host: String) throws {
        var main = try Self.authenticated(listen: host)
        #expect(try main.prepare(logger: Self.quiet).map(\.host) == [host])
        var admin = try Self.authenticated(listen: host, admin: true)
        _ = try admin.prepare(logger: Self.quiet)
    }

    @Test(
        "cleartext off loopback is refused, main or admin listener, saying what to do, unless --allow-insecure-cleartext",
        arguments: ["192.0.2.2", "0.0.0.0", "::", "10.0.0.5", "128.0.0.1", "fd00::1"]
    )
    func cleartextOffLoopback(host: String) throws {
        for admin in [false, true] {
            var configuration = try Self.authenticated(listen: host, admin: admin)
            do {
                _ = try configuration.prepare(logger: Self.quiet)
                Issue.record("cleartext on \(host) (admin: \(admin)) was not refused")
            } catch let error as GatewayConfigurationError {
                #expect(
                    error.description.hasPrefix("refusing to serve cleartext on \(host):2197 (not loopback)"),
                    "\(error)"
                )
                for advice in [
                    "--tls-listen", "loopback behind a proxy that terminates TLS", "--allow-insecure-cleartext",
                ] {
                    #expect(error.description.contains(advice), "\(error)")
                }
            }
            configuration.allowInsecureCleartext = true
            _ = try configuration.prepare(logger: Self.quiet)
        }
    }
}
