import ArgumentParser
import Foundation
import PushgateDeviceClient
import PushgateTLS
import PushgateTransport

/// Options every client command shares.
struct ClientOptions: ParsableArguments {
    @Option(help: "Gateway URL: http://HOST:PORT (h2c) or https://HOST:PORT (TLS).")
    var server: ServerURL = ServerURL("http://127.0.0.1:2197")!

    @Option(name: .customLong("cacert"), help: "PEM CA file to verify the gateway's certificate (https).")
    var caFile: String?

    func tlsContext() throws -> TLSContext? {
        guard server.isTLS else { return nil }
        return try TLSContext.client(TLSClientConfiguration(trustRootsPath: caFile, serverName: server.host))
    }
}

/// The registration secret, for the commands that create devices (agent and bench).
struct DeviceCreationOptions: ParsableArguments {
    @Option(
        name: .customLong("registration-secret"),
        help: "The gateway's registration secret, needed to create devices when the gateway has one (also PUSHGATE_REGISTRATION_SECRET)."
    )
    var registrationSecretOption: String?

    var registrationSecret: String? {
        registrationSecretOption ?? ProcessInfo.processInfo.environment["PUSHGATE_REGISTRATION_SECRET"]
    }
}

extension ServerURL: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}

extension ListenAddress: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}
