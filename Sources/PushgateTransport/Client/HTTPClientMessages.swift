import NIOCore
import NIOHTTP1

public struct HTTPClientRequest: Sendable {
    public var method: String
    public var path: String
    public var authority: String?
    public var scheme: String
    public var headers: HTTPHeaders
    public var body: ByteBuffer?

    public init(
        method: String = "GET",
        path: String,
        authority: String? = nil,
        scheme: String = "http",
        headers: HTTPHeaders = [:],
        body: ByteBuffer? = nil
    ) {
        self.method = method
        self.path = path
        self.authority = authority
        self.scheme = scheme
        self.headers = headers
        self.body = body
    }
}

public struct HTTPClientResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: ByteBuffer
}

/// A response whose body arrives over time. Iterating the body acknowledges each chunk to the
/// server (HTTP/2 flow control), so a slow reader slows the server instead of filling memory.
public struct HTTPClientStreamingResponse: Sendable {
    /// The HTTP/2 stream, for `HTTP2ClientConnection.reset(streamID:)`.
    public var streamID: Int32
    public var status: Int
    public var headers: HTTPHeaders
    public var body: HTTPClientResponseBody
}

/// The head of a response whose body goes to a callback (`HTTP2ClientConnection.submitStreaming`).
public struct HTTPClientStreamedHead: Sendable {
    /// The HTTP/2 stream, for `HTTP2ClientConnection.reset(streamID:)`.
    public var streamID: Int32
    public var status: Int
    public var headers: HTTPHeaders
    /// Completes when the body ends; fails if the stream is reset or the connection closes first.
    public var ended: EventLoopFuture<Void>
}

public struct HTTPClientResponseBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    let chunks: AsyncThrowingStream<ByteBuffer, any Error>
    let consumed: @Sendable (Int) -> Void
    /// Called when an iterator is dropped before the body ended: the stream is reset and what
    /// was received but never read is credited back to the server.
    let abandoned: @Sendable () -> Void

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<ByteBuffer, any Error>.AsyncIterator
        let consumed: @Sendable (Int) -> Void
        let lifetime: Lifetime

        public mutating func next() async throws -> ByteBuffer? {
            do {
                guard let chunk = try await base.next() else {
                    lifetime.ended = true
                    return nil
                }
                consumed(chunk.readableBytes)
                return chunk
            } catch {
                lifetime.ended = true
                throw error
            }
        }
    }

    /// Shared by an iterator's copies; when the last one goes, an unfinished body is abandoned.
    final class Lifetime: @unchecked Sendable {
        var ended = false
        private let abandoned: @Sendable () -> Void

        init(abandoned: @escaping @Sendable () -> Void) { self.abandoned = abandoned }

        deinit { if !ended { abandoned() } }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: chunks.makeAsyncIterator(), consumed: consumed, lifetime: Lifetime(abandoned: abandoned))
    }
}

/// A GOAWAY frame from the server.
public struct HTTP2GoAway: Sendable, Equatable {
    /// The highest stream the server will still process.
    public var lastStreamID: Int32
    /// HTTP/2 error code (0 = NO_ERROR).
    public var errorCode: UInt32
    /// The frame's debug data as text (Pushgate sends APNs-style JSON: `{"reason":"..."}`).
    public var debugData: String
}

public enum HTTP2ClientError: Error, CustomStringConvertible, Equatable {
    /// The connection closed before the response was complete.
    case connectionClosed
    /// The server reset the stream (HTTP/2 error code).
    case streamReset(errorCode: UInt32)
    /// The server refused the stream without processing it (REFUSED_STREAM, or above a GOAWAY's
    /// last stream id): safe to retry.
    case refused
    /// The request could not be submitted.
    case submitFailed(String)
    /// A whole response's body was over the connection's limit; the stream was reset.
    case responseTooLarge(limit: Int)
    /// The server sent no HTTP/2 SETTINGS in time (not an HTTP/2 server, or a stalled one).
    case noSettings(within: TimeAmount)
    /// The connection closed after some bytes from the server but before its HTTP/2 SETTINGS.
    case closedBeforeSettings
    /// The connection closed (or was reset) before the server sent a single byte: a server
    /// refusing connections, or one that does not speak this protocol on the port.
    case closedWithoutAnswer
    /// A cleartext connection's server speaks TLS: https:// was meant.
    case tlsPort(host: String, port: Int)
    /// A TLS connection's server answered in cleartext: http:// was meant. `answer`: the start of
    /// what it said.
    case cleartextPort(host: String, port: Int, answer: String)
    /// The server answered in HTTP/1 (`statusLine`), not HTTP/2.
    case http1Answer(host: String, port: Int, statusLine: String)
    /// No TCP connection could be made.
    case cannotConnect(host: String, port: Int, reason: String)
    /// The server ended the stream after an informational (1xx) head, with no final response.
    case noFinalResponse

    public var description: String {
        switch self {
        case .connectionClosed: return "the HTTP/2 connection closed before the response was complete"
        case .cannotConnect(let host, let port, let reason): return "cannot connect to \(host):\(port): \(reason)"
        case .closedBeforeSettings:
            return
                "the server closed the connection before its HTTP/2 SETTINGS: not an HTTP/2 server, or a server refusing connections (its connection limits)"
        case .closedWithoutAnswer:
            return
                "the server closed the connection without answering: a server refusing connections (its connection limits), or one that does not speak this protocol on this port"
        case .tlsPort(let host, let port):
            let address = Self.address(host, port)
            return "the server at \(address) speaks TLS, not cleartext HTTP/2: use https://\(address)"
        case .cleartextPort(let host, let port, let answer):
            let address = Self.address(host, port)
            return
                "the server at \(address) speaks cleartext, not TLS (its answer began \"\(answer)\"): use http://\(address)"
        case .http1Answer(let host, let port, let statusLine):
            return
                "the server at \(Self.address(host, port)) answered in HTTP/1 (\"\(statusLine)\"), not HTTP/2: it does not serve HTTP/2 on this port"
        case .streamReset(let code): return "the server reset the stream (HTTP/2 error code \(code))"
        case .refused:
            return "the server refused the stream without processing it (going away or over a limit); retry it"
        case .submitFailed(let reason): return "the request could not be sent: \(reason)"
        case .responseTooLarge(let limit):
            return "the response body is larger than \(limit) bytes; use a streamed request"
        case .noFinalResponse:
            return "the server ended the stream without a final response (only an informational 1xx head)"
        case .noSettings(let timeout):
            return
                "the server sent no HTTP/2 SETTINGS within \(Double(timeout.nanoseconds) / 1e9) s; is it an HTTP/2 server (h2 or prior-knowledge h2c)?"
        }
    }

    /// `HOST:PORT`, an IPv6 address in brackets, as in a URL.
    private static func address(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
