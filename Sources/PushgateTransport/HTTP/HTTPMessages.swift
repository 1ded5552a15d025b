import NIOCore
import NIOHTTP1

/// A complete request as the application sees it, whatever the HTTP version.
public struct HTTPServerRequest: Sendable {
    public var method: String
    /// The path with its query, as sent (`:path` or the HTTP/1.1 request target).
    public var path: String
    public var authority: String?
    public var scheme: String?
    /// Regular header fields (no pseudo-headers), names lowercase on HTTP/2.
    public var headers: HTTPHeaders
    public var body: ByteBuffer
    public var connection: ConnectionInfo

    public init(
        method: String,
        path: String,
        authority: String? = nil,
        scheme: String? = nil,
        headers: HTTPHeaders = [:],
        body: ByteBuffer = ByteBuffer(),
        connection: ConnectionInfo
    ) {
        self.method = method
        self.path = path
        self.authority = authority
        self.scheme = scheme
        self.headers = headers
        self.body = body
        self.connection = connection
    }
}

/// Status and header fields of a response.
public struct ResponseHead: Sendable {
    public var status: Int
    public var headers: HTTPHeaders

    public init(status: Int, headers: HTTPHeaders = [:]) {
        self.status = status
        self.headers = headers
    }
}

/// A response sent whole.
public struct HTTPServerResponse: Sendable {
    public var head: ResponseHead
    public var body: ByteBuffer?

    public init(status: Int, headers: HTTPHeaders = [:], body: ByteBuffer? = nil) {
        self.head = ResponseHead(status: status, headers: headers)
        self.body = body
    }

    public init(status: Int, headers: HTTPHeaders = [:], text: String) {
        var headers = headers
        if !headers.contains(name: "content-type") { headers.add(name: "content-type", value: "text/plain; charset=utf-8") }
        self.init(status: status, headers: headers, body: ByteBuffer(string: text))
    }
}

/// The application: turns requests into responses. Called on the connection's event loop; it
/// must not block. It may answer at once or later, from any thread, through the responder.
public protocol HTTPServerHandler: Sendable {
    func handle(_ request: HTTPServerRequest, responder: HTTPResponder)

    /// The answer to a request the transport refused before the application saw it, in the
    /// application's own error format (by default, plain text).
    func response(to refusal: TransportRefusal) -> HTTPServerResponse
}

/// Why the transport refused a request before handing it to the application.
public enum TransportRefusal: Sendable, Equatable {
    /// The body grew past the connection's limit.
    case bodyTooLarge(limit: Int)

    public var status: Int {
        switch self {
        case .bodyTooLarge: 413
        }
    }

    public var detail: String {
        switch self {
        case .bodyTooLarge(let limit): "request body larger than \(limit) bytes"
        }
    }
}

extension HTTPServerHandler {
    public func response(to refusal: TransportRefusal) -> HTTPServerResponse {
        HTTPServerResponse(status: refusal.status, text: refusal.detail + "\n")
    }
}
