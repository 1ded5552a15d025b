import ArgumentParser
import Foundation
import PushgateDeviceClient
import PushgateGateway
import PushgateTLS
import PushgateTransport

/// Options every client command shares.
struct ClientOptions: ParsableArguments {
    @Option(
        name: .customLong("server"),
        help: ArgumentHelp(
            "Gateway URL: http://HOST:PORT (h2c) or https://HOST:PORT (TLS), no path (the gateway is reached at its root). The agent takes it more than once (the nodes of a cluster): it connects to the first that answers and moves on to the next when one fails; bench spreads its devices over them; send takes one.",
            valueName: "URL"
        )
    )
    var servers: [ServerURL] = []

    @Option(name: .customLong("cacert"), help: "PEM CA file to verify the gateway's certificate (https).")
    var caFile: String?

    static let defaultServer = ServerURL("http://127.0.0.1:2197")!

    /// The one gateway of a command that talks to one (send, bench).
    var server: ServerURL { servers.first ?? Self.defaultServer }

    /// Refuses a second `--server` where the command talks to one gateway.
    func requireOneServer(_ command: String) throws {
        if servers.count > 1 {
            throw ValidationError(
                "\(command) talks to one gateway: give --server once (the agent and bench take several)"
            )
        }
    }

    /// The TLS context for `server` (nil for http://), presenting `certificate` when given.
    func tlsContext(
        for server: ServerURL? = nil,
        presenting certificate: ProviderCertificateOptions? = nil
    ) throws -> TLSContext? {
        let server = server ?? self.server
        guard server.isTLS else { return nil }
        let chain = certificate?.certificateFile
        if let chain, certificate?.keyFile == nil,
            let pem = try? String(contentsOfFile: chain, encoding: .utf8), !pem.contains("PRIVATE KEY-----")
        {
            throw ClientFailure(
                description: "--cert \(chain) holds no private key: name the key's file with --cert-key"
            )
        }
        return try TLSContext.client(
            TLSClientConfiguration(
                trustRootsPath: caFile,
                certificateChainPath: chain,
                privateKeyPath: chain.map { certificate?.keyFile ?? $0 },
                serverName: server.host
            )
        )
    }
}

/// Client-certificate authentication, for the commands that push (send and bench): the
/// provider's certificate, with the topic it may push to in its subject's UID, as APNs issues
/// them; presented in the TLS handshake, so over https:// only.
struct ProviderCertificateOptions: ParsableArguments {
    @Option(
        name: .customLong("cert"),
        help:
            "Certificate authentication (https:// only): the provider's PEM client certificate (then any intermediates), with its private key in the same file unless --cert-key names another."
    )
    var certificateFile: String?

    @Option(name: .customLong("cert-key"), help: "The PEM private key of --cert, when it is in a file of its own.")
    var keyFile: String?

    func validate() throws {
        if keyFile != nil, certificateFile == nil { throw ValidationError("--cert-key needs --cert") }
    }

    /// Refuses a certificate that would never be presented: cleartext has no handshake.
    func check(for server: ServerURL) throws {
        if certificateFile != nil, !server.isTLS {
            throw ValidationError(
                "--cert needs an https:// server: a client certificate is presented in the TLS handshake, and \(server) is cleartext"
            )
        }
    }
}

/// Provider token authentication, for the commands that push (send and bench): the `.p8` key
/// that signs the token, its key id and the team.
struct ProviderSigningOptions: ParsableArguments {
    @Option(
        name: .customLong("key"),
        help: "Token authentication: the provider's .p8 signing key (needs --key-id and --team-id)."
    )
    var keyFile: String?

    @Option(name: .customLong("key-id"), help: "The signing key's id (the token's kid).")
    var keyID: String?

    @Option(name: .customLong("team-id"), help: "The team id (the token's iss).")
    var teamID: String?

    /// The key, read, with its id and the team; nil when token authentication is not asked for.
    func signingKey() throws -> ProviderSigningKey? {
        guard let keyFile, let keyID, let teamID else { return nil }
        return try ProviderSigningKey(file: keyFile, keyID: keyID, teamID: teamID)
    }

    func validate() throws {
        let given = [keyFile, keyID, teamID].filter { $0 != nil }.count
        if given != 0, given != 3 {
            throw ValidationError("token authentication needs all of --key, --key-id and --team-id")
        }
    }
}

/// The registration secret, for the commands that create devices (agent and bench): given, or
/// read from a file, from a flag or the environment, as `serve` takes its own secrets.
struct DeviceCreationOptions: ParsableArguments {
    @Option(
        name: .customLong("registration-secret"),
        help:
            "The gateway's registration secret, needed to create devices when the gateway has one (also PUSHGATE_REGISTRATION_SECRET). Shows in ps: prefer --registration-secret-file."
    )
    var registrationSecretOption: String?

    @Option(
        name: .customLong("registration-secret-file"),
        help:
            "A file holding the registration secret; surrounding blanks and a final newline are not part of it (also PUSHGATE_REGISTRATION_SECRET_FILE)."
    )
    var registrationSecretFile: String?

    func validate() throws {
        _ = try registrationSecret()
    }

    /// The secret from the first source that gives it: the flags, then the environment.
    func registrationSecret() throws -> String? {
        let environment = ProcessInfo.processInfo.environment
        let sources = [
            ("--registration-secret", registrationSecretOption, "--registration-secret-file", registrationSecretFile),
            (
                "PUSHGATE_REGISTRATION_SECRET", environment["PUSHGATE_REGISTRATION_SECRET"],
                "PUSHGATE_REGISTRATION_SECRET_FILE", environment["PUSHGATE_REGISTRATION_SECRET_FILE"]
            ),
        ]
        for (name, given, fileName, file) in sources {
            switch (given, file) {
            case (nil, nil):
                continue
            case (let given?, nil):
                return given
            case (nil, let file?):
                do {
                    return try SecretFile.read(file)
                } catch {
                    throw ValidationError("\(fileName): \(error)")
                }
            case (_?, _?):
                throw ValidationError("\(name) and \(fileName): give the registration secret once")
            }
        }
        return nil
    }
}

extension ServerURL: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}
