import NIOCore
import PushgateModel
import PushgateTransport

/// Where a device's requests are served when several gateway nodes share the database: on this
/// node (which holds the device, or has just claimed it), or on the node that owns it, to which
/// the request is forwarded as it came. Nil on a gateway alone on its store: everything is here.
public protocol DevicePlacement: Sendable {
    /// Where the request for `deviceID` goes. `opensStream`: the device's event stream opens
    /// here, which claims the device whoever owned it (the newest stream wins). `forwarded`:
    /// another node sent it, having found this node the owner: served here, or refused
    /// `MisdirectedRequest` if the device moved meanwhile, never forwarded again. An answer known
    /// at once comes on `loop`.
    func place(
        deviceID: String,
        opensStream: Bool,
        forwarded: Bool,
        on loop: any EventLoop
    ) -> EventLoopFuture<DevicePlace>
    /// `request` sent to the node at `address`, and its answer.
    func forward(_ request: HTTPServerRequest, to address: String) -> EventLoopFuture<HTTPServerResponse>
    /// Whether another node of the cluster sent `request`.
    func isForwarded(_ request: HTTPServerRequest) -> Bool
}

public enum DevicePlace: Sendable {
    case here
    /// The owner's address (`http://HOST:PORT`).
    case node(String)
    case refused(Refusal)
}
