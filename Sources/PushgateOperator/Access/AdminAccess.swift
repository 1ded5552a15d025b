import NIOCore
import PushgateCrypto
import PushgateModel
import PushgateTransport

/// Who may read the operator routes (`/metrics`, `/v1/admin/...`). With an admin token:
/// whoever sends `authorization: bearer <token>`, compared in constant time with its SHA-256
/// (the token itself is not kept). Without one: loopback peers only, so that a gateway that
/// listens on the network does not show its devices to it by default, and of those only
/// requests no proxy forwarded (a proxy on the machine is a loopback peer for all its clients).
public struct AdminAccess: Sendable {
    private let tokenHash: [UInt8]?

    public init(token: String?) {
        tokenHash = token.map { SHA256.hash($0.utf8) }
    }

    public var hasToken: Bool { tokenHash != nil }

    /// Header fields a proxy adds to what it forwards. A request carrying one came through a
    /// proxy, so its loopback peer is the proxy and its client may be anywhere: a proxy on the
    /// same machine would otherwise open the operator routes to everyone it serves.
    public static let forwardingFields = ["forwarded", "x-forwarded-for", "x-real-ip", "via"]

    /// Nil when the request may go on; otherwise the refusal to answer with. `forwardedBy`: the
    /// first of ``forwardingFields`` the request carries.
    public func refusal(authorization: String?, peer: SocketAddress?, forwardedBy: String?) -> Refusal? {
        guard let tokenHash else {
            let loopbackOnly = "this gateway has no admin token, so its operator routes answer loopback clients only"
            let advice =
                "set one (--admin-token-file FILE, --admin-token or PUSHGATE_ADMIN_TOKEN) and send it as authorization: bearer <token>"
            guard let peer, ClientAddress(peer)?.isLoopback == true else {
                return Refusal(.forbidden, "\(loopbackOnly); \(advice)")
            }
            guard let forwardedBy else { return nil }
            return Refusal(
                .forbidden,
                "\(loopbackOnly), and this request came through a proxy (it carries \(forwardedBy)): its client is not known to be on this machine; \(advice)"
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
