import NIOCore
import PushgateCrypto
import PushgateModel
import PushgateTransport

/// Who may read the operator routes (`/metrics`, `/v1/admin/...`). With an admin token:
/// whoever sends `authorization: bearer <token>`, compared in constant time with its SHA-256
/// (the token itself is not kept). Without one: loopback peers only, so that a gateway that
/// listens on the network does not show its devices to it by default.
public struct AdminAccess: Sendable {
    private let tokenHash: [UInt8]?

    public init(token: String?) {
        tokenHash = token.map { SHA256.hash($0.utf8) }
    }

    public var hasToken: Bool { tokenHash != nil }

    /// Nil when the request may go on; otherwise the refusal to answer with.
    public func refusal(authorization: String?, peer: SocketAddress?) -> Refusal? {
        guard let tokenHash else {
            if let peer, ClientAddress(peer)?.isLoopback == true { return nil }
            return Refusal(
                .forbidden,
                "this gateway has no admin token, so its operator routes answer loopback clients only; "
                    + "set one (--admin-token-file FILE, --admin-token or PUSHGATE_ADMIN_TOKEN) and send it as authorization: bearer <token>"
            )
        }
        guard let given = BearerCredential.credential(in: authorization),
              constantTimeEquals(SHA256.hash(given.utf8), tokenHash)
        else {
            return Refusal(
                .unauthorized,
                "missing or wrong admin token: send authorization: bearer <admin token>, the token given to --admin-token-file, --admin-token or PUSHGATE_ADMIN_TOKEN"
            )
        }
        return nil
    }
}
