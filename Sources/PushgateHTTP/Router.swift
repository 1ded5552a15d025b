import NIOCore
import NIOHTTP1
import PushgateModel
import PushgateTransport

/// Which HTTP versions a route may be reached over.
public enum RouteProtocols: Sendable {
    /// Operator routes: Prometheus and plain curl speak HTTP/1.1.
    case http1AndHTTP2
    /// Provider and device routes: APNs clients and agents speak HTTP/2 only.
    case http2Only
}

/// A route's handler: same contract as `HTTPServerHandler`, for one route.
public typealias RouteHandler = @Sendable (HTTPServerRequest, HTTPResponder) -> Void

/// Maps method and path to a handler. Paths match exactly, or by a prefix ending in `/` for
/// routes with parameters (the handler parses the rest; the longest matching prefix wins).
public struct Router: HTTPServerHandler {
    private struct Route: Sendable {
        /// Nil: any method (the handler answers wrong methods itself, e.g. in APNs' format).
        var method: String?
        var protocols: RouteProtocols
        /// What a connection whose first routed request is this one serves (a metric label).
        var role: ConnectionRole
        var handler: RouteHandler
    }

    private var exact: [String: [Route]] = [:]
    /// Routes by prefix, longest prefix first: a path goes to the routes of the longest prefix
    /// it starts with (found without building a list per request).
    private var prefixes: [(prefix: String, routes: [Route])] = []

    public init() {}

    public mutating func add(
        _ method: String,
        _ path: String,
        protocols: RouteProtocols,
        role: ConnectionRole,
        handler: @escaping RouteHandler
    ) {
        let route = Route(method: method, protocols: protocols, role: role, handler: handler)
        exact[path, default: []].append(route)
    }

    public mutating func addPrefix(
        _ method: String?,
        _ prefix: String,
        protocols: RouteProtocols,
        role: ConnectionRole,
        handler: @escaping RouteHandler
    ) {
        let route = Route(method: method, protocols: protocols, role: role, handler: handler)
        if let index = prefixes.firstIndex(where: { $0.prefix == prefix }) {
            prefixes[index].routes.append(route)
        } else {
            prefixes.append((prefix, [route]))
            prefixes.sort { $0.prefix.utf8.count > $1.prefix.utf8.count }
        }
    }

    public func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        let path: String
        if let query = request.path.utf8.firstIndex(of: UInt8(ascii: "?")) {
            path = String(request.path[..<query])
        } else {
            path = request.path
        }
        let candidates = exact[path] ?? prefixes.first(where: { path.hasPrefix($0.prefix) })?.routes ?? []
        let isHTTP1 = request.connection.httpVersion == .http1_1

        if isHTTP1, candidates.contains(where: { $0.protocols == .http2Only }) {
            responder.respond(
                .refusal(
                    Refusal(
                        .httpVersionNotSupported,
                        "\(path) is served over HTTP/2 only; use an HTTP/2 client (e.g. curl --http2-prior-knowledge, or https with ALPN h2)"
                    )
                )
            )
            return
        }
        guard !candidates.isEmpty else {
            responder.respond(.refusal(Refusal(.notFound, "no route for \(path)")))
            return
        }
        guard let route = candidates.first(where: { $0.method == nil || $0.method == request.method }) else {
            let allowed = candidates.compactMap(\.method).joined(separator: ", ")
            var response = HTTPServerResponse.refusal(Refusal(.methodNotAllowed, "\(path) accepts \(allowed), not \(request.method)"))
            response.head.headers.add(name: "allow", value: allowed)
            responder.respond(response)
            return
        }
        request.connection.classify(as: route.role)
        route.handler(request, responder)
    }

    /// The catalog's answer, in the one error format.
    public func response(to refusal: TransportRefusal) -> HTTPServerResponse {
        switch refusal {
        case .bodyTooLarge: .refusal(Refusal(.payloadTooLarge, refusal.detail))
        }
    }
}

extension RouteProtocols: Equatable {}
