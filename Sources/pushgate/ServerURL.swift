import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import PushgateTLS
import PushgateTransport

/// `http://HOST:PORT` (h2c, prior knowledge) or `https://HOST:PORT` (TLS, ALPN h2).
struct ServerURL: ExpressibleByArgument, CustomStringConvertible {
    let isTLS: Bool
    let host: String
    let port: Int
    /// `HOST:PORT` for `:authority`, worked out once: the bench sends it with every request.
    let authority: String

    init?(argument: String) {
        let rest: Substring
        if argument.hasPrefix("http://") {
            isTLS = false
            rest = argument.dropFirst("http://".count)
        } else if argument.hasPrefix("https://") {
            isTLS = true
            rest = argument.dropFirst("https://".count)
        } else {
            return nil
        }
        let authority = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard let address = ListenAddress(argument: String(authority)) ?? (authority.isEmpty ? nil : ListenAddress(argument: "\(authority):\(isTLS ? 443 : 2197)"))
        else { return nil }
        host = address.host
        port = address.port
        self.authority = address.description
    }

    var description: String { "\(scheme)://\(authority)" }
    var scheme: String { isTLS ? "https" : "http" }

    static var defaultValueDescription: String { "http://127.0.0.1:2197" }
}

/// Options every client command shares.
struct ClientOptions: ParsableArguments {
    @Option(help: "Gateway URL: http://HOST:PORT (h2c) or https://HOST:PORT (TLS).")
    var server: ServerURL = ServerURL(argument: "http://127.0.0.1:2197")!

    @Option(name: .customLong("cacert"), help: "PEM CA file to verify the gateway's certificate (https).")
    var caFile: String?

    func tlsContext() throws -> TLSContext? {
        guard server.isTLS else { return nil }
        return try TLSContext.client(TLSClientConfiguration(trustRootsPath: caFile, serverName: server.host))
    }
}

extension ServerURL {
    /// A request to this gateway, for send, agent and bench alike. `bearer` is a device secret,
    /// the registration secret, or a provider token.
    func request(_ method: String, _ path: String, bearer: String? = nil, headers: HTTPHeaders = [:], body: ByteBuffer? = nil) -> HTTPClientRequest {
        var headers = headers
        if let bearer { headers.add(name: "authorization", value: "bearer \(bearer)") }
        return HTTPClientRequest(method: method, path: path, authority: authority, scheme: scheme, headers: headers, body: body)
    }
}

/// The registration secret, for the commands that create devices (agent and bench).
struct DeviceCreationOptions: ParsableArguments {
    @Option(
        name: .customLong("registration-secret"),
        help: "The gateway's registration secret, needed to create devices when the gateway has one (also PUSHGATE_REGISTRATION_SECRET)."
    )
    var option: String?

    var registrationSecret: String? {
        option ?? ProcessInfo.processInfo.environment["PUSHGATE_REGISTRATION_SECRET"]
    }
}
