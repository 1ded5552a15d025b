import NIOCore
import NIOHTTP1
import PushgateCluster
import PushgateModel
import PushgateOperator
import PushgateTransport

/// The node as operators see it (`ClusterView`): the admin API's node list and device view,
/// the metrics, readiness.
extension ClusterNode: ClusterView {
    public var nodeName: String { name }

    public var memberLease: UInt64? { actingLease }

    public var devicesHeld: Int { heldCount }

    public var liveNodeCount: Int { liveNodesSeen }

    public var activity: ClusterActivity { activitySoFar }

    public func members() async throws -> [NodeInfo] {
        let store = store
        return try await blocking { try store.nodes() }
    }

    public func ownersView(ofDevice id: String) async throws -> HTTPServerResponse? {
        for attempt in 0..<2 {
            switch try await place(id, .takeover) {
            case .here:
                return nil
            case .node(let address):
                let request = HTTPClientRequest(method: "GET", path: Self.deviceViewPath + id)
                let response = try await reaching(address) { try await self.peers.send(request, to: address) }
                if response.status == 421, attempt == 0 {
                    forgetOwner(of: id)
                    continue
                }
                var headers = HTTPHeaders()
                if let type = response.headers.first(name: "content-type") {
                    headers.add(name: "content-type", value: type)
                }
                return HTTPServerResponse(status: response.status, headers: headers, body: response.body)
            }
        }
        throw Refusal(
            .serviceUnavailable,
            "device \(id) moved between nodes twice while its view was asked for; retry",
            retryAfterSeconds: 1
        )
    }

    /// Where a node asks the owner for a device's admin view (`ownersView`).
    static let deviceViewPath = "/internal/v1/devices/"
}
