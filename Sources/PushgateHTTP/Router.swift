import NIOCore
import NIOHTTP1
import PushgateModel
import PushgateTransport

#if canImport(Glibc)
import Glibc
#endif

/// Which HTTP versions a route may be reached over.
public enum RouteProtocols: Sendable {
    /// Operator routes: Prometheus and plain curl speak HTTP/1.1.
    case http1AndHTTP2
    /// Provider and device routes: APNs clients and agents speak HTTP/2 only.
    case http2Only
}

/// A route's handler: same contract as `HTTPServerHandler.handle`, for one route; it sees only
/// requests its route's admission let through.
public typealias RouteHandler = @Sendable (HTTPServerRequest, HTTPResponder) -> Void

/// What a route decides about a request before its body is read: a body larger than the route
/// takes is refused while it arrives, and whatever the head alone shows wrong (no credentials,
/// bad ones) is answered before a byte of body is buffered.
public struct RouteAdmission: Sendable {
    /// The largest body the route takes. Default: `Router.defaultMaxBodySize`.
    public var maxBodySize: Int
    /// Whether the route takes the request, judged from its head (its body is empty); one it
    /// does not take it has answered through the responder.
    public var admits: (@Sendable (HTTPServerRequest, HTTPResponder) -> Bool)?
    /// Answers, in the route's own terms (headers, counters), a request refused before its body
    /// was handed over (too large, the server's body budget spent); without it, the catalog's
    /// refusal.
    public var refuse: (@Sendable (HTTPServerRequest, Refusal, HTTPResponder) -> Void)?

    public init(
        maxBodySize: Int = Router.defaultMaxBodySize,
        admits: (@Sendable (HTTPServerRequest, HTTPResponder) -> Bool)? = nil,
        refuse: (@Sendable (HTTPServerRequest, Refusal, HTTPResponder) -> Void)? = nil
    ) {
        self.maxBodySize = maxBodySize
        self.admits = admits
        self.refuse = refuse
    }
}

/// Maps method and path to a handler. Paths match exactly, or by a prefix ending in `/` for
/// routes with parameters (the handler parses the rest; the longest matching prefix wins).
///
/// Requests are routed on their head (`admit`): one that no route takes (unknown path, wrong
/// method, HTTP/1.1 on an HTTP/2 route) is answered before its body is read, and the route
/// says how much body it takes and may refuse the request on its head alone.
public struct Router: HTTPServerHandler {
    /// The body a route takes unless it says otherwise: device and operator requests are small
    /// JSON documents.
    public static let defaultMaxBodySize = 64 * 1024

    /// A class: a match hands one reference around, where a struct's copy retained each of its
    /// closures and strings (twice per request: on the head, then with the body).
    private final class Route: Sendable {
        /// Nil: any method (the handler answers wrong methods itself, e.g. in APNs' format).
        let method: String?
        let protocols: RouteProtocols
        /// What a connection whose first routed request is this one serves (a metric label).
        let role: ConnectionRole
        let admission: RouteAdmission
        /// A GET route whose answer is sent whole: HEAD gets it too (the transport sends its head
        /// alone), as load balancers and monitors probe with HEAD.
        let answersHEAD: Bool
        let handler: RouteHandler

        init(
            method: String?,
            protocols: RouteProtocols,
            role: ConnectionRole,
            admission: RouteAdmission,
            answersHEAD: Bool = false,
            handler: @escaping RouteHandler
        ) {
            self.method = method
            self.protocols = protocols
            self.role = role
            self.admission = admission
            self.answersHEAD = answersHEAD
            self.handler = handler
        }

        func takes(_ method: String) -> Bool {
            self.method == nil || self.method == method || (method == "HEAD" && answersHEAD)
        }

        /// The methods it takes, for a 405's `allow`.
        var methods: [String] {
            guard let method else { return [] }
            return answersHEAD ? [method, "HEAD"] : [method]
        }
    }

    private var exact: [String: [Route]] = [:]
    /// The longest exact path in bytes: a longer path (a provider's `/3/device/<token>`, every
    /// push) goes to the prefixes without hashing it for the dictionary.
    private var longestExact = 0
    /// Routes by prefix, longest prefix first: a path goes to the routes of the longest prefix
    /// it starts with (found without building a list per request).
    private var prefixes: [(prefix: String, routes: [Route])] = []

    public init() {}

    /// `answersHEAD`: a GET route whose answer is sent whole (not a stream) answers HEAD too.
    public mutating func add(
        _ method: String,
        _ path: String,
        protocols: RouteProtocols,
        role: ConnectionRole,
        admission: RouteAdmission = RouteAdmission(),
        answersHEAD: Bool = false,
        handler: @escaping RouteHandler
    ) {
        precondition(!answersHEAD || method == "GET", "only a GET route answers HEAD")
        let route = Route(
            method: method,
            protocols: protocols,
            role: role,
            admission: admission,
            answersHEAD: answersHEAD,
            handler: handler
        )
        exact[path, default: []].append(route)
        longestExact = max(longestExact, path.utf8.count)
    }

    public mutating func addPrefix(
        _ method: String?,
        _ prefix: String,
        protocols: RouteProtocols,
        role: ConnectionRole,
        admission: RouteAdmission = RouteAdmission(),
        answersHEAD: Bool = false,
        handler: @escaping RouteHandler
    ) {
        precondition(!answersHEAD || method == "GET", "only a GET route answers HEAD")
        let route = Route(
            method: method,
            protocols: protocols,
            role: role,
            admission: admission,
            answersHEAD: answersHEAD,
            handler: handler
        )
        if let index = prefixes.firstIndex(where: { $0.prefix == prefix }) {
            prefixes[index].routes.append(route)
        } else {
            prefixes.append((prefix, [route]))
            prefixes.sort { $0.prefix.utf8.count > $1.prefix.utf8.count }
        }
    }

    public func admit(_ head: HTTPServerRequest, responder: HTTPResponder) -> RequestAdmission {
        switch match(head) {
        case .none(let answer):
            responder.respond(answer)
            return .answered
        case .refused(let route, let refusal):
            answer(head, refusal, of: route, responder: responder)
            return .answered
        case .route(let route):
            head.connection.classify(as: route.role)
            if let admits = route.admission.admits, !admits(head, responder) { return .answered }
            return .readBody(maxBodySize: route.admission.maxBodySize)
        }
    }

    public func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        switch match(request) {
        case .none(let answer): responder.respond(answer)
        case .refused(let route, let refusal): answer(request, refusal, of: route, responder: responder)
        case .route(let route): route.handler(request, responder)
        }
    }

    /// The catalog's answer, in the one error format, or the route's own.
    public func refuse(_ head: HTTPServerRequest, _ refusal: TransportRefusal, responder: HTTPResponder) {
        let answer = Refusal(transport: refusal)
        switch match(head) {
        case .route(let route), .refused(let route, _): self.answer(head, answer, of: route, responder: responder)
        case .none: responder.respond(.refusal(answer))
        }
    }

    /// HTTP/1.1 bytes that cannot be taken as a request, in the one error format.
    public func headlessRefusal(_ refusal: TransportRefusal) -> HTTPServerResponse {
        .refusal(Refusal(transport: refusal))
    }

    /// A refusal answered by its route when the route answers its own (the provider API puts an
    /// `apns-id` on every answer), else in the one error format.
    private func answer(_ head: HTTPServerRequest, _ refusal: Refusal, of route: Route, responder: HTTPResponder) {
        if let refuse = route.admission.refuse {
            refuse(head, refusal, responder)
        } else {
            responder.respond(.refusal(refusal))
        }
    }

    private enum Match {
        case route(Route)
        /// The route takes the request's path but refuses the request as it came.
        case refused(Route, Refusal)
        /// No route takes the request: the answer.
        case none(HTTPServerResponse)
    }

    private func match(_ request: HTTPServerRequest) -> Match {
        let path: String
        if let query = Self.queryStart(request.path) {
            path = String(request.path[..<query])
        } else {
            path = request.path
        }
        let candidates = (path.utf8.count <= longestExact ? exact[path] : nil) ?? routes(byPrefixOf: path)
        let isHTTP1 = request.connection.httpVersion == .http1_1

        if isHTTP1, let route = candidates.first(where: { $0.protocols == .http2Only }) {
            return .refused(route, .http2Required(path))
        }
        guard !candidates.isEmpty else {
            return .none(.refusal(Refusal(.notFound, "no route for \(path)")))
        }
        guard let route = candidates.first(where: { $0.takes(request.method) }) else {
            return .none(.refusal(.methodNotAllowed(path, allowed: candidates.flatMap(\.methods), not: request.method)))
        }
        return .route(route)
    }

    /// The routes of the longest prefix `path` starts with, compared byte by byte (a path is
    /// bytes; `hasPrefix` compared by Unicode canonical equivalence, and the loop copied each
    /// prefix and its routes, retaining both, on every request).
    private func routes(byPrefixOf path: String) -> [Route] {
        let bytes = path.utf8
        for index in prefixes.indices where bytes.starts(with: prefixes[index].prefix.utf8) {
            return prefixes[index].routes
        }
        return []
    }

    /// Where the query of a request target begins: memchr over contiguous UTF-8 (every
    /// decoded path is), where `firstIndex(of:)` on the UTF-8 view went a byte at a time.
    private static func queryStart(_ target: String) -> String.Index? {
        let offset = target.utf8.withContiguousStorageIfAvailable { bytes -> Int? in
            guard let base = bytes.baseAddress, let found = memchr(base, Int32(UInt8(ascii: "?")), bytes.count) else {
                return nil
            }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
        switch offset {
        case .some(.some(let offset)): return target.utf8.index(target.utf8.startIndex, offsetBy: offset)
        case .some(.none): return nil
        case .none: return target.utf8.firstIndex(of: UInt8(ascii: "?"))
        }
    }
}

extension RouteProtocols: Equatable {}

extension Refusal {
    /// 405 naming the methods `path` takes, also in an `allow` header (RFC 9110 requires one).
    public static func methodNotAllowed(_ path: some StringProtocol, allowed: [String], not method: String) -> Refusal {
        Refusal(
            .methodNotAllowed,
            "\(path) accepts \(allowed.joined(separator: ", ")), not \(method)",
            allowedMethods: allowed
        )
    }

    /// 505 for an HTTP/1.1 request to a route served over HTTP/2 only, saying how to send it.
    public static func http2Required(_ path: some StringProtocol) -> Refusal {
        Refusal(
            .httpVersionNotSupported,
            "\(path) is served over HTTP/2 only; use an HTTP/2 client (e.g. curl --http2-prior-knowledge, or https with ALPN h2)"
        )
    }
}
