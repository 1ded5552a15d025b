import PushgateTLS
import PushgateTransport

/// Whether a failure to reach the gateway can heal by itself. A gateway that is restarting,
/// draining or unreachable for a while is worth waiting for; one whose certificate does not
/// verify, that refuses the TLS handshake, or that speaks another protocol on the port will
/// answer the same way to every retry until someone changes a setting.
public enum ConnectionFailure {
    /// True for the failures retrying cannot fix.
    public static func isPermanent(_ error: any Error) -> Bool {
        switch error {
        case let error as TLSError:
            switch error.kind {
            case .peerCertificate, .refusedByPeer, .notTLS: return true
            case .other: return false
            }
        case let error as HTTP2ClientError:
            switch error {
            case .tlsPort, .cleartextPort, .http1Answer: return true
            default: return false
            }
        default:
            return false
        }
    }
}
