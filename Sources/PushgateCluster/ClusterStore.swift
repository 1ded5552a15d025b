import PushgateStore

/// What a node needs of the database beyond the store's commits: the cluster's membership and
/// ownership (`ClusterControl`), one device's records when the node takes it over, and the
/// secret nodes prove to one another. The PostgreSQL store implements it.
public protocol ClusterStore: ClusterControl {
    /// Everything the store holds of one device (its devices list holds that device alone, or
    /// nothing when it does not exist).
    func records(ofDevice id: String) throws -> StoreSnapshot
    /// A secret every node of this database reads, and nothing else: a node presents it with
    /// the requests it forwards to another.
    func clusterSecret() throws -> String
}
