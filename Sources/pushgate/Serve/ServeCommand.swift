import ArgumentParser
import Foundation
import Logging
import NIOCore
import PushgateGateway

#if canImport(Glibc)
import Glibc
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the gateway.",
        // The help screen wraps every line longer than the screen flush left: the paragraph is
        // one line for it to wrap, the table is wrapped here to the width it will be shown in.
        discussion: """
            With no settings: cleartext HTTP/2 (prior knowledge) and HTTP/1.1 on 127.0.0.1:2197. \
            SIGTERM or SIGINT drains (/readyz 503 for drainGraceSeconds, then GOAWAY; in-flight \
            requests get shutdownTimeout) and exits 0. SIGHUP reloads the TLS certificate and key, \
            the provider keys and the scheduler policy.

            \(Settings.helpText(width: HelpScreen.columns - 1))
            """
    )

    @Argument(parsing: .captureForPassthrough, help: "Settings as flags, below.")
    var settings: [String] = []

    /// Settings that cannot be used stop `serve` here, so that their errors come with serve's
    /// usage; `run` resolves them again (the file and secret files are small). With
    /// `--log-format json` (from any source) the reason is a `critical` JSON line instead, as
    /// for a refusal found later: a log collector's last line is then the reason, not the usage.
    func validate() throws {
        let resolved = try SettingsArguments.settings(settings, for: Self.self)
        do {
            _ = try SettingsArguments.checked(resolved)
        } catch let error as ValidationError where resolved.configuration.logFormat == .json {
            LoggingSystem.bootstrap(format: .json, level: .info)
            Logger(label: "pushgate").critical("cannot start: \(error.message)")
            throw ExitCode.validationFailure
        }
    }

    func run() async throws {
        let resolved = try SettingsArguments.settings(settings, for: Self.self)
        let configuration = try SettingsArguments.checked(resolved)
        LoggingSystem.bootstrap(
            format: configuration.logFormat,
            level: Logger.Level(rawValue: configuration.logLevel) ?? .info
        )
        for warning in resolved.warnings { Logger(label: "pushgate").warning("\(warning)") }
        do {
            let settings = self.settings
            // A reload (SIGHUP, POST /v1/admin/reload) reads the flags, the environment and the
            // file again, as start did.
            let reread: @Sendable () throws -> GatewayConfiguration = {
                try SettingsArguments.resolve(settings, for: Self.self)
            }
            try await Gateway.run(configuration, logger: Logger(label: "pushgate"), reread: reread) { listeners in
                // One line per listener on stdout, so scripts (and tests binding port 0) learn
                // the real addresses.
                func url(_ address: SocketAddress, tls: Bool) -> String {
                    let host = address.ipAddress.map { address.protocol == .inet6 ? "[\($0)]" : $0 } ?? "?"
                    return "\(tls ? "https" : "http")://\(host):\(address.port ?? 0)"
                }
                for (address, isTLS) in listeners.main { print("listening \(url(address, tls: isTLS))") }
                for address in listeners.admin { print("admin listening \(url(address, tls: false))") }
                fflush(nil)  // all streams: `stdout` itself is not concurrency-safe to name
            }
        } catch {
            // A setting that cannot run is a usage error (64), as the flags' own checks are, and
            // the systemd unit does not restart on it; the rest (the store, a port) exit 1.
            let refused = error is GatewayConfigurationError
            guard configuration.logFormat == .json else {
                throw refused ? ValidationError("\(error)") : error
            }
            // Log collectors get the reason as the last line of the same format, not as text.
            Logger(label: "pushgate").critical("cannot start: \(error)")
            throw refused ? ExitCode.validationFailure : ExitCode.failure
        }
    }
}

/// The settings of `serve` and `config check`, as flags after the command's name.
enum SettingsArguments {
    /// The configuration the settings resolve to (with this process's environment and the
    /// configuration file they name), or a usage error listing every problem.
    static func resolve(_ arguments: [String], for command: any ParsableCommand.Type) throws -> GatewayConfiguration {
        try checked(settings(arguments, for: command))
    }

    /// The configuration `resolved` settings make, or a usage error listing every problem.
    static func checked(_ resolved: ResolvedSettings) throws -> GatewayConfiguration {
        do {
            let configuration = try resolved.checked()
            try configuration.validate()
            return configuration
        } catch {
            throw ValidationError("\(error)")
        }
    }

    static func settings(_ arguments: [String], for command: any ParsableCommand.Type) throws -> ResolvedSettings {
        // Help asked for after a setting reaches here uncaptured by the parser.
        if arguments.contains("--help") || arguments.contains("-h") { throw CleanExit.helpRequest(command) }
        return ResolvedSettings(arguments: arguments, environment: ProcessInfo.processInfo.environment)
    }
}
