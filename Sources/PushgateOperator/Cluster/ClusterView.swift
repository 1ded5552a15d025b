import PushgateCluster
import PushgateTransport

/// What operators see of the cluster a gateway on a database is a node of: the node itself, the
/// live nodes, and where a device is held.
public protocol ClusterView: Sendable {
    /// This node's name (`--node-name`).
    var nodeName: String { get }
    /// The lease this node is a member of its cluster under now; nil when it is not (its lease
    /// lapsed, or it is joining): such a node serves nothing for its devices, and says so on
    /// `/readyz`.
    var memberLease: UInt64? { get }
    /// The devices this node holds now.
    var devicesHeld: Int { get }
    /// The live nodes, as of the last check (every few seconds).
    var liveNodeCount: Int { get }
    /// What this node has done as a member since it started.
    var activity: ClusterActivity { get }
    /// The live nodes, as the database has them now.
    func members() async throws -> [NodeInfo]
    /// The admin view of a device held by another node, from that node; nil when this node
    /// holds it (taking it over if no live node did), for this node to answer.
    func ownersView(ofDevice id: String) async throws -> HTTPServerResponse?
}
