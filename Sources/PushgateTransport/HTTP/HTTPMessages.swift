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
        if !headers.contains(name: "content-type") {
            headers.add(name: "content-type", value: "text/plain; charset=utf-8")
        }
        self.init(status: status, headers: headers, body: ByteBuffer(string: text))
    }
}

/// The application: turns requests into responses. Called on the connection's event loop; it
/// must not block. It may answer at once or later, from any thread, through the responder.
public protocol HTTPServerHandler: Sendable {
    /// A request's header block has arrived and none of its body has been buffered yet (`head`'s
    /// body is empty): say how much body to read, or answer through `responder` and return
    /// `.answered` to refuse the request before its body costs anything. Only an admitted
    /// request reaches `handle`, once its body has ended.
    func admit(_ head: HTTPServerRequest, responder: HTTPResponder) -> RequestAdmission

    func handle(_ request: HTTPServerRequest, responder: HTTPResponder)

    /// Answers a request the transport refused before the application saw its body, in the
    /// application's own error format (by default, plain text).
    func refuse(_ head: HTTPServerRequest, _ refusal: TransportRefusal, responder: HTTPResponder)

    /// The answer to HTTP/1.1 bytes that cannot be taken as a request (`.malformed`,
    /// `.headerListTooLarge`), in the application's own error format (by default, plain text):
    /// there is no head to route. Sent at once, before the connection is closed.
    func headlessRefusal(_ refusal: TransportRefusal) -> HTTPServerResponse
}

/// What the application decided from a request's head.
public enum RequestAdmission: Sendable, Equatable {
    /// Read the body, refusing it (`TransportRefusal.bodyTooLarge`) as soon as its bytes go past
    /// `maxBodySize`, or past the server's own ceiling when that is lower.
    case readBody(maxBodySize: Int)
    /// The application answered (or will answer) through the responder: the body is discarded
    /// unread, and an HTTP/2 stream still sending one is reset once the answer is out.
    case answered

    /// Up to the server's own ceiling (`HTTP2ServerConfiguration.maxRequestBodySize`,
    /// `HTTPServerConfiguration.maxHTTP1RequestBodySize`).
    public static let readBodyUpToServerLimit = RequestAdmission.readBody(maxBodySize: .max)
}

/// Why the transport refused a request before handing it to the application.
public enum TransportRefusal: Sendable, Equatable {
    /// The body grew past the limit its route admitted it with (or the server's ceiling).
    case bodyTooLarge(limit: Int)
    /// The request bodies held across every connection already fill the server's budget
    /// (`RequestBodyBudget`). Only HTTP/1.1 answers this: HTTP/2 resets the stream with
    /// REFUSED_STREAM instead, which clients retry by themselves.
    case bodyBudgetExhausted
    /// The header fields, counted as RFC 9113 section 6.5.2 counts them (name, value and 32
    /// bytes each) over HTTP/2, as raw bytes over HTTP/1.1, come to more than `limit`.
    case headerListTooLarge(limit: Int)
    /// HTTP/1.1 bytes that are not a request; `detail` says what the parser saw.
    case malformed(detail: String)

    public var status: Int {
        switch self {
        case .bodyTooLarge: 413
        case .bodyBudgetExhausted: 503
        case .headerListTooLarge: 431
        case .malformed: 400
        }
    }

    public var detail: String {
        switch self {
        case .bodyTooLarge(let limit): "request body larger than \(limit) bytes"
        case .bodyBudgetExhausted: "the server holds as many request bodies as it may; retry in a moment"
        case .headerListTooLarge(let limit): "the request's header fields come to more than \(limit) bytes"
        case .malformed(let detail): detail
        }
    }

    /// Seconds after which a retry may succeed (a `retry-after` header); nil when it would not.
    public var retryAfterSeconds: Int? {
        switch self {
        case .bodyBudgetExhausted: 1
        case .bodyTooLarge, .headerListTooLarge, .malformed: nil
        }
    }
}

extension HTTPServerHandler {
    public func admit(_ head: HTTPServerRequest, responder: HTTPResponder) -> RequestAdmission {
        .readBodyUpToServerLimit
    }

    public func refuse(_ head: HTTPServerRequest, _ refusal: TransportRefusal, responder: HTTPResponder) {
        var headers = HTTPHeaders()
        if let seconds = refusal.retryAfterSeconds { headers.add(name: "retry-after", value: String(seconds)) }
        responder.respond(HTTPServerResponse(status: refusal.status, headers: headers, text: refusal.detail + "\n"))
    }

    public func headlessRefusal(_ refusal: TransportRefusal) -> HTTPServerResponse {
        HTTPServerResponse(status: refusal.status, text: refusal.detail + "\n")
    }
}
