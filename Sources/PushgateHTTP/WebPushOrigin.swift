import PushgateModel
import PushgateTransport

extension WebPushEndpoint {
    /// The origin `request` came to: the listener's scheme (TLS or not) and the host it named,
    /// `:authority`, else `host` (HTTP/2 allows either, and proxies converting HTTP/1.1 send
    /// `host`); nil when it named none.
    public static func origin(of request: HTTPServerRequest) -> String? {
        origin(tls: request.connection.isTLS, authority: request.authority ?? request.headers.first(name: "host"))
    }
}
