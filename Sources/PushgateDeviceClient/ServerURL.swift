import NIOCore
import NIOHTTP1
import PushgateTransport

/// `http://HOST:PORT` (h2c, prior knowledge) or `https://HOST:PORT` (TLS, ALPN h2), with no path
/// but an optional trailing slash.
public struct ServerURL: Sendable, CustomStringConvertible {
    public let isTLS: Bool
    public let host: String
    public let port: Int
    /// `HOST:PORT` for `:authority`, worked out once: the bench sends it with every request.
    public let authority: String

    public init?(_ argument: String) {
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
        let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let authority = parts.first ?? ""
        // The gateway is reached at its root (the provider API is /3/... as at APNs): a path
        // would be dropped silently, so it is refused. A trailing slash is no path.
        guard parts.count < 2 || parts[1].isEmpty else { return nil }
        guard
            let address = ListenAddress(String(authority))
                ?? (authority.isEmpty ? nil : ListenAddress("\(authority):\(isTLS ? 443 : 2197)"))
        else { return nil }
        host = address.host
        port = address.port
        self.authority = address.description
    }

    public var description: String { "\(scheme)://\(authority)" }
    public var scheme: String { isTLS ? "https" : "http" }
}

extension ServerURL {
    /// A request to this gateway, for send, agent and bench alike. `bearer` is a device secret,
    /// the registration secret, or a provider token.
    public func request(
        _ method: String,
        _ path: String,
        bearer: String? = nil,
        headers: HTTPHeaders = [:],
        body: ByteBuffer? = nil
    ) -> HTTPClientRequest {
        var headers = headers
        if let bearer { headers.add(name: "authorization", value: "bearer \(bearer)") }
        return HTTPClientRequest(
            method: method,
            path: path,
            authority: authority,
            scheme: scheme,
            headers: headers,
            body: body
        )
    }
}
