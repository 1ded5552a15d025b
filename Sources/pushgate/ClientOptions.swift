import ArgumentParser
import Foundation
import PushgateDeviceClient
import PushgateTLS
import PushgateTransport

/// Options every client command shares.
struct ClientOptions: ParsableArguments {
    @Option(
        help:
            "Gateway URL: http://HOST:PORT (h2c) or https://HOST:PORT (TLS), no path (the gateway is reached at its root)."
    )
    var server: ServerURL = ServerURL("http://127.0.0.1:2197")!

    @Option(name: .customLong("cacert"), help: "PEM CA file to verify the gateway's certificate (https).")
    var caFile: String?

    func tlsContext() throws -> TLSContext? {
        guard server.isTLS else { return nil }
        return try TLSContext.client(TLSClientConfiguration(trustRootsPath: caFile, serverName: server.host))
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

/// The registration secret, for the commands that create devices (agent and bench).
struct DeviceCreationOptions: ParsableArguments {
    @Option(
        name: .customLong("registration-secret"),
        help:
            "The gateway's registration secret, needed to create devices when the gateway has one (also PUSHGATE_REGISTRATION_SECRET)."
    )
    var registrationSecretOption: String?

    var registrationSecret: String? {
        registrationSecretOption ?? ProcessInfo.processInfo.environment["PUSHGATE_REGISTRATION_SECRET"]
    }
}

extension ServerURL: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}
