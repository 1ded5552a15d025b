import Foundation
import NIOCore
import PushgateHTTP
import PushgateModel
import PushgateTransport

/// The routes the nodes of a cluster call on one another, on the main listeners: every request
/// must carry the cluster's secret (`pushgate-cluster`), else it is refused like an unknown
/// route, so that a stranger learns nothing of them.
extension ClusterNode {
    /// `deviceView`: the admin view of a device this node holds, as its admin API answers it.
    public func registerRoutes(
        on router: inout Router,
        deviceView: @escaping @Sendable (String) async -> HTTPServerResponse
    ) {
        let secret = secret
        let admission = RouteAdmission(admits: { head, responder in
            guard PeerConnections.proves(head.headers, secret: secret) else {
                responder.respond(.refusal(Refusal(.notFound, "no route for \(head.path)")))
                return false
            }
            // A node proven: its connection gets the full stream limit, as a provider's does
            // after a valid token. Held to one stream, forwarded pushes would wait on each
            // other's commits.
            head.connection.markAuthenticated()
            return true
        })
        // A push another node took for a device this one owns.
        router.add("POST", "/internal/v1/push", protocols: .http2Only, role: .provider, admission: admission) {
            [self] request, responder in
            guard let work = ForwardedWork(json: request.body) else {
                responder.respond(.refusal(Refusal(.badRequest, "not a forwarded push")))
                return
            }
            serveForwarded(work).whenSuccess { answer in
                responder.respond(
                    HTTPServerResponse(status: 200, headers: ["content-type": "application/json"], body: answer.json)
                )
            }
        }
        // The admin view of a device held here, which another node was asked for.
        router.addPrefix("GET", Self.deviceViewPath, protocols: .http2Only, role: .operator, admission: admission) {
            [self] request, responder in
            let id = String(request.path.dropFirst(Self.deviceViewPath.count))
            guard holds(id) else {
                responder.respond(.refusal(Self.misdirected(id, owner: "another node")))
                return
            }
            Task { responder.respond(await deviceView(id)) }
        }
        // The device's stream opened on another node, which claimed it at `epoch`.
        router.add("POST", "/internal/v1/release", protocols: .http2Only, role: .device, admission: admission) {
            [self] request, responder in
            guard let release = try? JSONDecoder().decode(Release.self, from: Data(request.body.readableBytesView))
            else {
                responder.respond(.refusal(Refusal(.badRequest, "not a release")))
                return
            }
            Task {
                await released(release.deviceId, claimedAt: release.epoch)
                responder.respond(HTTPServerResponse(status: 204))
            }
        }
    }

    private struct Release: Decodable {
        var deviceId: String
        var epoch: UInt64
    }
}
