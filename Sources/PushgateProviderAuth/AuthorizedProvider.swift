/// Who may make a provider request, and the topic it may push to.
public struct AuthorizedProvider: Sendable, Equatable {
    public enum Identity: Sendable, Equatable {
        /// A provider token signed with this key of this team.
        case token(teamID: String, keyID: String)
        /// A client certificate from the operator's CA, with this subject (RFC 2253).
        case certificate(subject: String)
        /// No provider keys and no client CA are configured (loopback-only deployments).
        case unauthenticated
    }

    public var identity: Identity
    /// The request's `apns-topic`, or the topic a single-app certificate implies when it had none.
    public var topic: String

    public init(identity: Identity, topic: String) {
        self.identity = identity
        self.topic = topic
    }
}
